package calib

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/costmodel"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/nccltests"
)

// MaxPoints is the most message sizes (points) one stored measurement
// holds: ginctl refuses to send more (Points) and the master's replicated
// state refuses to store more (state.CheckMeasurement).
const MaxPoints = 256

// GPUModel names a node's GPU model ("" when unknown); the master answers
// it from the stored inventories.
type GPUModel func(node string) string

// KeyOf derives the PlacementShape of a communicator over gpusPerNode GPUs
// (0: all) of each of nodes from the graph; ncclVersion is copied in.
func KeyOf(g *graph.Graph, model GPUModel, nodes []string, gpusPerNode int, ncclVersion string) (*ginv1.PlacementShape, error) {
	s, err := costmodel.ShapeOf(g, nodes, gpusPerNode)
	if err != nil {
		return nil, err
	}
	return keyOfShape(g, model, nodes, s, ncclVersion), nil
}

// keyOfShape is KeyOf for a communicator whose model shape s is known.
func keyOfShape(g *graph.Graph, model GPUModel, nodes []string, s costmodel.Shape, ncclVersion string) *ginv1.PlacementShape {
	ppn := s.NRanks / s.NNodes
	k := &ginv1.PlacementShape{
		GpusPerNode: uint32(ppn), NodeCount: uint32(s.NNodes), NcclVersion: ncclVersion,
		FabricTiers: uint32(s.InterHops), NvlinkDomainSize: 1,
	}
	if s.NNodes > 1 && !s.MNNVL {
		k.NicsPerNode = uint32(s.NICsPerNode)
		k.NicGbps = math.Round(s.NICGbps*10) / 10
	}
	if model != nil {
		k.GpuModel = model(nodes[0])
	}
	gpus, _ := g.NodeGPUs(nodes[0])
	switch info, _ := g.NodeInfo(nodes[0]); {
	case info.NVLinkDomain != "":
		n := 0
		for _, name := range g.Nodes() {
			if in, _ := g.NodeInfo(name); in.NVLinkDomain == info.NVLinkDomain {
				gs, _ := g.NodeGPUs(name)
				n += len(gs)
			}
		}
		k.NvlinkDomainSize = uint32(n)
	case s.IntraNVLink || (ppn == 1 && info.NVLinksUp > 0):
		k.NvlinkDomainSize = uint32(len(gpus))
	}
	return k
}

// Forced is where a measurement's algorithm and protocol came from.
type Forced struct {
	Algorithm ginv1.Algorithm
	Protocol  ginv1.Protocol
	By        string // "flag", "log", "default"
}

// ParseAlgorithm reads one NCCL algorithm name as NCCL_ALGO spells it
// (case-free: ring, tree, nvls, nvlstree, collnetdirect, collnetchain, pat).
func ParseAlgorithm(s string) (ginv1.Algorithm, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "tree":
		return ginv1.Algorithm_ALGORITHM_TREE, nil
	case "ring":
		return ginv1.Algorithm_ALGORITHM_RING, nil
	case "collnetdirect", "collnet_direct":
		return ginv1.Algorithm_ALGORITHM_COLLNET_DIRECT, nil
	case "collnetchain", "collnet_chain":
		return ginv1.Algorithm_ALGORITHM_COLLNET_CHAIN, nil
	case "nvls":
		return ginv1.Algorithm_ALGORITHM_NVLS, nil
	case "nvlstree", "nvls_tree":
		return ginv1.Algorithm_ALGORITHM_NVLS_TREE, nil
	case "pat":
		return ginv1.Algorithm_ALGORITHM_PAT, nil
	}
	return 0, fmt.Errorf("algorithm %q: want one of ring, tree, nvls, nvlstree, collnetdirect, collnetchain, pat", s)
}

// ParseProtocol reads one NCCL protocol name (LL, LL128, Simple).
func ParseProtocol(s string) (ginv1.Protocol, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "ll":
		return ginv1.Protocol_PROTOCOL_LL, nil
	case "ll128":
		return ginv1.Protocol_PROTOCOL_LL128, nil
	case "simple":
		return ginv1.Protocol_PROTOCOL_SIMPLE, nil
	}
	return 0, fmt.Errorf("protocol %q: want one of LL, LL128, Simple", s)
}

// ForcedOf decides a run's forced algorithm and protocol: the flags when
// given ("" when not), else the log's NCCL_ALGO/NCCL_PROTO when each names
// exactly one choice, else NCCL's default. A log value that allows several
// ("ring,tree", "^nvls") does not pin one, and is reported in the note. A
// run with NCCL_NVLS_ENABLE=0 and no forced algorithm is refused: what it
// measured is not NCCL's default.
func ForcedOf(run *nccltests.Run, algoFlag, protoFlag string) (Forced, string, error) {
	f := Forced{By: "default"}
	var notes []string
	pick := func(flag, env string, parse func(string) error) error {
		if flag != "" {
			f.By = "flag"
			return parse(flag)
		}
		v, ok := run.Env[env]
		if !ok {
			return nil
		}
		if strings.ContainsAny(v, ",^:") {
			notes = append(notes, fmt.Sprintf("%s=%s allows more than one choice: not pinned", env, v))
			return nil
		}
		if err := parse(v); err != nil {
			notes = append(notes, fmt.Sprintf("%s=%s: %v", env, v, err))
			return nil
		}
		if f.By != "flag" {
			f.By = "log"
		}
		return nil
	}
	if err := pick(algoFlag, "NCCL_ALGO", func(s string) (err error) { f.Algorithm, err = ParseAlgorithm(s); return }); err != nil {
		return Forced{}, "", err
	}
	if err := pick(protoFlag, "NCCL_PROTO", func(s string) (err error) { f.Protocol, err = ParseProtocol(s); return }); err != nil {
		return Forced{}, "", err
	}
	if v, ok := run.Env["NCCL_NVLS_ENABLE"]; ok && v == "0" && f.Algorithm == 0 {
		// NCCL's default without NVLS is not what a job gets by default:
		// storing it as "NCCL's default" would compare plans against the
		// wrong baseline.
		return Forced{}, "", fmt.Errorf("the log ran with NCCL_NVLS_ENABLE=0 and no forced algorithm: its choice is not NCCL's default; give --algo for the algorithm it used, or import a run without NCCL_NVLS_ENABLE=0")
	}
	return f, strings.Join(notes, "; "), nil
}

// Collective maps nccl-tests' test name to the tuner's collective; ok is
// false for tests NCCL's tuner never sees (alltoall, sendrecv, …).
func Collective(test string) (ginv1.Collective, bool) {
	switch test {
	case nccltests.AllReduce:
		return ginv1.Collective_COLLECTIVE_ALL_REDUCE, true
	case nccltests.AllGather:
		return ginv1.Collective_COLLECTIVE_ALL_GATHER, true
	case nccltests.ReduceScatter:
		return ginv1.Collective_COLLECTIVE_REDUCE_SCATTER, true
	case nccltests.Broadcast:
		return ginv1.Collective_COLLECTIVE_BROADCAST, true
	case nccltests.Reduce:
		return ginv1.Collective_COLLECTIVE_REDUCE, true
	}
	return 0, false
}

// Points turns a run's table into stored points (the faster cell per size,
// at most MaxPoints, sizes ascending, zero sizes and times
// dropped).
func Points(run *nccltests.Run) ([]*ginv1.MeasuredPoint, error) {
	var out []*ginv1.MeasuredPoint
	for _, p := range run.Points() {
		if p.Bytes == 0 || p.TimeUs <= 0 {
			continue
		}
		mp := &ginv1.MeasuredPoint{Bytes: p.Bytes, TimeUs: p.TimeUs, BusBwGbps: p.BusBW, SlowerTimeUs: p.SlowerTimeUs}
		if p.Choice != nil {
			if a, err := ParseAlgorithm(p.Choice.Algo); err == nil {
				mp.NcclAlgorithm = a
			}
			if pr, err := ParseProtocol(p.Choice.Proto); err == nil {
				mp.NcclProtocol = pr
			}
		}
		out = append(out, mp)
	}
	if len(out) == 0 {
		return nil, errors.New("the table has no size with a non-zero time")
	}
	if len(out) > MaxPoints {
		return nil, fmt.Errorf("%d sizes, more than %d", len(out), MaxPoints)
	}
	return out, nil
}

// Cell is a measured time for one (algorithm, protocol) — UNSPECIFIED
// algorithm: NCCL's default choice — at one size.
type Cell struct {
	Algorithm ginv1.Algorithm
	Protocol  ginv1.Protocol
	Default   bool
	TimeUs    float64
	// How: "measured" (a measured size), "interpolated" (between two
	// measured sizes), "extrapolated" (above the largest), "scaled" (from
	// a ring run of a nearby node count, NearbyForRing).
	How string
	// Evidence names the measurement ("measurement 3f2a… (all_reduce,
	// nccl-tests on node[001-002], NCCL 2.21.5)").
	Evidence string
	ID       string
	// Spread is the measurement's run-to-run spread there (SpreadAt):
	// its slower cell is TimeUs × (1 + Spread); 0 when not known.
	Spread float64
	// NCCLVersion is the NCCL version the measurement ran on ("2.27.3";
	// "" when its log did not say).
	NCCLVersion string
}

// ExtrapolateFrom is the smallest largest-measured size from which times
// are extrapolated above the measured range.
const ExtrapolateFrom = 64 << 20

// Curve is the model's time (µs) of a measurement's cell on its shape at a
// size; 0 or less where the model has none. At calibrates it with the
// measured points.
type Curve func(bytes uint64) float64

// At returns m's time at bytes: measured at a measured size; between the
// two nearest sizes, the model's time calibrated by the measured/model
// ratio of those two, interpolated in log-size (the model carries the
// curve's shape, the measurements its level), or linearly in size when
// model is nil or has no time there; above the largest size, when that is
// at least ExtrapolateFrom, the model calibrated by the largest size's
// ratio (without a model: that size's bandwidth). ok is false otherwise
// (below the smallest size, or above a largest size that is still
// latency-bound).
func At(m *ginv1.Measurement, bytes uint64, model Curve) (us float64, how string, ok bool) {
	pts := m.GetPoints()
	if len(pts) == 0 {
		return 0, "", false
	}
	i := sort.Search(len(pts), func(i int) bool { return pts[i].GetBytes() >= bytes })
	switch {
	case i < len(pts) && pts[i].GetBytes() == bytes:
		return pts[i].GetTimeUs(), "measured", true
	case i == 0:
		return 0, "", false
	case i == len(pts):
		last := pts[len(pts)-1]
		if last.GetBytes() < ExtrapolateFrom {
			return 0, "", false
		}
		if r, mb, ok := ratio(model, last, bytes); ok {
			return mb * r, "extrapolated", true
		}
		return last.GetTimeUs() * float64(bytes) / float64(last.GetBytes()), "extrapolated", true
	}
	a, b := pts[i-1], pts[i]
	if ra, mb, ok := ratio(model, a, bytes); ok {
		if rb, _, ok := ratio(model, b, bytes); ok {
			f := math.Log(float64(bytes)/float64(a.GetBytes())) / math.Log(float64(b.GetBytes())/float64(a.GetBytes()))
			return mb * ra * math.Pow(rb/ra, f), "interpolated", true
		}
	}
	f := float64(bytes-a.GetBytes()) / float64(b.GetBytes()-a.GetBytes())
	return a.GetTimeUs() + f*(b.GetTimeUs()-a.GetTimeUs()), "interpolated", true
}

// SpreadAt is m's run-to-run spread at bytes, relative to its faster
// cell (MeasuredPoint.slower_time_us / time_us - 1): at a measured size
// that size's; between two measured sizes the larger of theirs (a time
// interpolated from two is no surer than the less sure of them); above
// the largest size that size's. 0 where a size has one cell or was stored
// without its slower one, and below the smallest size.
func SpreadAt(m *ginv1.Measurement, bytes uint64) float64 {
	pts := m.GetPoints()
	spread := func(p *ginv1.MeasuredPoint) float64 {
		if p.GetSlowerTimeUs() <= p.GetTimeUs() || p.GetTimeUs() <= 0 {
			return 0
		}
		return p.GetSlowerTimeUs()/p.GetTimeUs() - 1
	}
	i := sort.Search(len(pts), func(i int) bool { return pts[i].GetBytes() >= bytes })
	switch {
	case len(pts) == 0 || i == 0 && pts[0].GetBytes() != bytes:
		return 0
	case i == len(pts):
		return spread(pts[len(pts)-1])
	case pts[i].GetBytes() == bytes:
		return spread(pts[i])
	}
	return max(spread(pts[i-1]), spread(pts[i]))
}

// ratio is p's measured/model ratio and the model's time at bytes; ok is
// false without a model or a positive model time at either size.
func ratio(model Curve, p *ginv1.MeasuredPoint, bytes uint64) (r, atBytes float64, ok bool) {
	if model == nil || p.GetTimeUs() <= 0 {
		return 0, 0, false
	}
	mp, mb := model(p.GetBytes()), model(bytes)
	if mp <= 0 || mb <= 0 || math.IsNaN(mp) || math.IsNaN(mb) {
		return 0, 0, false
	}
	return p.GetTimeUs() / mp, mb, true
}

// SameShape says whether two keys describe the same placement, ignoring the
// NCCL version (a job's NCCL version is not known when its plan is built).
func SameShape(a, b *ginv1.PlacementShape) bool {
	return a.GetNodeCount() == b.GetNodeCount() && sameButNodes(a, b)
}

// sameButNodes is SameShape without the node count.
func sameButNodes(a, b *ginv1.PlacementShape) bool {
	return a.GetGpuModel() == b.GetGpuModel() && a.GetNvlinkDomainSize() == b.GetNvlinkDomainSize() &&
		a.GetGpusPerNode() == b.GetGpusPerNode() && a.GetNicsPerNode() == b.GetNicsPerNode() &&
		math.Abs(a.GetNicGbps()-b.GetNicGbps()) < 0.05 && a.GetFabricTiers() == b.GetFabricTiers()
}

// Lookup returns the measured cells of coll at bytes among ms whose shape
// is key's: for each (algorithm, protocol) the newest measurement (highest
// created index) that covers bytes. curve gives the model's curve of a
// measurement's cell (nil: no model, interpolation linear in size).
func Lookup(ms []*ginv1.Measurement, key *ginv1.PlacementShape, coll ginv1.Collective, bytes uint64, curve func(*ginv1.Measurement) Curve) []Cell {
	model := func(m *ginv1.Measurement) Curve {
		if curve == nil {
			return nil
		}
		return curve(m)
	}
	type ap struct {
		a ginv1.Algorithm
		p ginv1.Protocol
	}
	best := map[ap]*ginv1.Measurement{}
	for _, m := range ms {
		if m.GetCollective() != coll || !SameShape(m.GetShape(), key) {
			continue
		}
		if _, _, ok := At(m, bytes, model(m)); !ok {
			continue
		}
		k := ap{m.GetAlgorithm(), m.GetProtocol()}
		if old, ok := best[k]; !ok || m.GetCreatedIndex() > old.GetCreatedIndex() {
			best[k] = m
		}
	}
	// A newer run of a forced algorithm supersedes an older one of the
	// same algorithm where either left the protocol to NCCL (tree/* and
	// tree/simple measure the same choice at sizes where NCCL picks
	// Simple): the later measurement, production data of the job's own
	// forced cell included, decides.
	for k, m := range best {
		if k.a == ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
			continue
		}
		for k2, m2 := range best {
			if k2.a == k.a && k2.p != k.p && (k.p == 0 || k2.p == 0) && m2.GetCreatedIndex() > m.GetCreatedIndex() {
				delete(best, k)
				break
			}
		}
	}
	out := make([]Cell, 0, len(best))
	for k, m := range best {
		us, how, _ := At(m, bytes, model(m))
		out = append(out, Cell{Algorithm: k.a, Protocol: k.p, Default: k.a == 0 && k.p == 0, TimeUs: us, How: how, Evidence: Describe(m), ID: m.GetId(),
			Spread: SpreadAt(m, bytes), NCCLVersion: m.GetShape().GetNcclVersion()})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].TimeUs != out[j].TimeUs {
			return out[i].TimeUs < out[j].TimeUs
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Describe names a measurement for reasons and listings.
func Describe(m *ginv1.Measurement) string {
	nodes := m.GetNodes()
	on := strings.Join(nodes, ",")
	if len(nodes) > 3 {
		on = fmt.Sprintf("%s,…,%s (%d nodes)", nodes[0], nodes[len(nodes)-1], len(nodes))
	}
	v := ""
	if m.GetShape().GetNcclVersion() != "" {
		v = ", NCCL " + m.GetShape().GetNcclVersion()
	}
	what := "nccl-tests"
	switch {
	case strings.HasPrefix(m.GetSource(), "nccl-inspector:"):
		what = "production, NCCL Inspector"
	case strings.HasPrefix(m.GetSource(), "tuner-csv:"):
		what = "tuner measurement CSV"
	}
	return fmt.Sprintf("measurement %s (%s on %s%s)", m.GetId(), what, on, v)
}

// Index answers measured cells for communicators of one graph: it derives
// each communicator's key and model shape once and keeps the measurements
// of that shape, and those of nearby shapes it may scale (scale.go).
// Not safe for concurrent use.
type Index struct {
	g     *graph.Graph
	model GPUModel
	ms    []*ginv1.Measurement
	byKey map[string]*commEvidence
}

// commEvidence is what an Index knows of one communicator.
type commEvidence struct {
	shape costmodel.Shape
	same  []*ginv1.Measurement // of the communicator's key
	near  []*ginv1.Measurement // ring runs of a nearby node count (scale.go)
}

// NewIndex returns an Index over ms for graph g.
func NewIndex(g *graph.Graph, model GPUModel, ms []*ginv1.Measurement) *Index {
	return &Index{g: g, model: model, ms: ms, byKey: map[string]*commEvidence{}}
}

// Len is how many measurements the index holds.
func (x *Index) Len() int { return len(x.ms) }

// Measured returns the measured cells of coll at bytes for the
// communicator over gpusPerNode GPUs of each of nodes: those of its own
// shape, calibrated in size against the model; when its shape has no
// measurement at all, ring runs of a nearby node count scaled to it (How
// "scaled"); nil when none, or
// when the shape cannot be derived.
func (x *Index) Measured(nodes []string, gpusPerNode int, coll ginv1.Collective, bytes uint64) []Cell {
	if x == nil || len(x.ms) == 0 || len(nodes) == 0 {
		return nil
	}
	k := fmt.Sprintf("%d\x00%s", gpusPerNode, strings.Join(nodes, "\x00"))
	ev, ok := x.byKey[k]
	if !ok {
		ev = &commEvidence{}
		var err error
		ev.shape, err = costmodel.ShapeOf(x.g, nodes, gpusPerNode)
		if err == nil {
			key := keyOfShape(x.g, x.model, nodes, ev.shape, "")
			for _, m := range x.ms {
				switch {
				case SameShape(m.GetShape(), key):
					ev.same = append(ev.same, m)
				case NearbyForRing(m, key):
					ev.near = append(ev.near, m)
				}
			}
		}
		x.byKey[k] = ev
	}
	if len(ev.same) > 0 {
		return Lookup(ev.same, ev.same[0].GetShape(), coll, bytes, func(m *ginv1.Measurement) Curve { return CellCurve(ev.shape, m) })
	}
	return scaled(ev.near, ev.shape, coll, bytes)
}

// CellCurve is GIN's model of a measurement's cell on shape s: the forced
// algorithm and protocol (a forced algorithm alone: its fastest protocol),
// or for NCCL's default the cell NCCL's own model picks, each priced by
// GIN's model.
func CellCurve(s costmodel.Shape, m *ginv1.Measurement) Curve {
	coll, algo, proto := m.GetCollective(), m.GetAlgorithm(), m.GetProtocol()
	return func(bytes uint64) float64 {
		if algo == ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
			n, err := costmodel.PredictNCCL(s, coll, bytes)
			if err != nil {
				return 0
			}
			algo, proto := n.Algorithm, n.Protocol
			us, _ := costmodel.Cost(s, coll, algo, proto, bytes)
			return us
		}
		if proto != ginv1.Protocol_PROTOCOL_UNSPECIFIED {
			us, _ := costmodel.Cost(s, coll, algo, proto, bytes)
			return us
		}
		best := 0.0
		for _, p := range costmodel.Protocols {
			if us, ok := costmodel.Cost(s, coll, algo, p, bytes); ok && (best == 0 || us < best) {
				best = us
			}
		}
		return best
	}
}

// Basis values of an estimate.
const (
	BasisMeasured   = "measured"
	BasisCalibrated = "calibrated"
	BasisModelled   = "modelled"
)

// Apply replaces a model prediction with the fastest measured cell when
// cells is not empty, and says on what basis the figure stands:
// "measured" at a measured size, "calibrated" when interpolated or
// extrapolated from the measurements, else "modelled".
func Apply(p *ginv1.Prediction, cells []Cell) {
	if len(cells) == 0 {
		p.Basis = BasisModelled
		return
	}
	c := cells[0]
	p.Basis = BasisCalibrated
	if c.How == "measured" {
		p.Basis = BasisMeasured
	}
	what := "NCCL's default"
	if !c.Default {
		what = strings.ToLower(strings.TrimPrefix(c.Algorithm.String(), "ALGORITHM_"))
		if c.Protocol != 0 {
			what += "/" + strings.ToLower(strings.TrimPrefix(c.Protocol.String(), "PROTOCOL_"))
		}
	}
	p.Evidence = fmt.Sprintf("%s, %s: %s", what, c.How, c.Evidence)
	if c.Spread > 0 {
		p.Evidence += fmt.Sprintf("; its out-of-place and in-place cells differ by %.1f%% there", 100*c.Spread)
	}
	p.Algorithm, p.Protocol, p.Channels = c.Algorithm, c.Protocol, 0
	p.TimeUs = c.TimeUs
	if c.TimeUs > 0 {
		p.AlgbwGbps = float64(p.GetSizeBytes()) / c.TimeUs / 1000
	}
	p.BusbwGbps = p.AlgbwGbps * costmodel.BusFactor(p.GetCollective(), int(p.GetNRanks()))
}

// ModelInputs says what a modelled figure stands on: the fabric facts of
// the placement as the graph has them now (after degraded or down links),
// so that an estimate that changed says why.
func ModelInputs(s costmodel.Shape) string {
	parts := []string{fmt.Sprintf("%d ranks over %d node(s)", s.NRanks, s.NNodes)}
	switch {
	case s.IntraNVLink && s.NRanks/max(s.NNodes, 1) > 1:
		parts = append(parts, fmt.Sprintf("NVLink %.0f GB/s per GPU", s.IntraGBps))
	case s.NRanks/max(s.NNodes, 1) > 1:
		parts = append(parts, fmt.Sprintf("PCIe %.0f GB/s per GPU", s.IntraGBps))
	}
	if s.NNodes > 1 && !s.MNNVL {
		parts = append(parts, fmt.Sprintf("%d NIC(s) per node, slowest %g Gb/s", s.NICsPerNode, s.NICGbps),
			fmt.Sprintf("%d switch hop(s)", s.InterHops))
		if s.Oversubscription > 1 {
			parts = append(parts, fmt.Sprintf("oversubscription %g:1", s.Oversubscription))
		}
		if s.NICPath != costmodel.NICPathSwitch {
			parts = append(parts, s.NICPath.String())
		}
	}
	return "model: " + strings.Join(parts, ", ")
}
