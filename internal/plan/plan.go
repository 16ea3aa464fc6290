package plan

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/calib"
	"github.com/gin-topology/gin/internal/costmodel"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/planread"
)

// OverrideMargin is how much faster (relative) GIN's choice must be, in
// GIN's model, than NCCL's own choice before the plan overrides NCCL.
const OverrideMargin = 0.03

// Collectives are the collectives NCCL consults the tuner for, in order.
var Collectives = []ginv1.Collective{
	ginv1.Collective_COLLECTIVE_BROADCAST, ginv1.Collective_COLLECTIVE_REDUCE,
	ginv1.Collective_COLLECTIVE_ALL_GATHER, ginv1.Collective_COLLECTIVE_REDUCE_SCATTER,
	ginv1.Collective_COLLECTIVE_ALL_REDUCE,
}

// comm is one communicator shape a job uses.
type comm struct {
	shape costmodel.Shape
	what  string
	// nodes and gpn name the communicator for measured evidence.
	nodes []string
	gpn   int
}

// MeasuredMargin is how much faster (relative) a measured forced
// algorithm must be than NCCL's measured default before the plan
// overrides NCCL: above the few-percent run-to-run spread of nccl-tests.
// Where a measurement knows its own spread there (calib.Cell.Spread, its
// out-of-place and in-place cells), the forced run's slower cell must
// beat the default's faster one by the margin: the two runs' ranges do
// not overlap.
const MeasuredMargin = 0.05

// Evidence answers measured times of a communicator (internal/calib's
// Index implements it).
type Evidence interface {
	Measured(nodes []string, gpusPerNode int, coll ginv1.Collective, bytes uint64) []calib.Cell
}

// Build computes the plan of a job running gpusPerNode GPUs (0: all) on
// each of nodes, in the order given.
func Build(g *graph.Graph, jobID string, nodes []string, gpusPerNode int) (*ginv1.Plan, error) {
	return BuildWith(g, jobID, nodes, gpusPerNode, nil)
}

// BuildWith is Build with measured evidence (nil: the model alone): where
// the cluster measured a communicator's shape, the measurements decide.
func BuildWith(g *graph.Graph, jobID string, nodes []string, gpusPerNode int, ev Evidence) (*ginv1.Plan, error) {
	if jobID == "" {
		return nil, errors.New("plan: empty job id")
	}
	if g == nil {
		return nil, errors.New("plan: nil graph")
	}
	if len(nodes) == 0 {
		return nil, errors.New("plan: no nodes")
	}
	world, err := costmodel.ShapeOf(g, nodes, gpusPerNode)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	ppn := world.NRanks / world.NNodes
	comms := []comm{{world, "world", nodes, ppn}}
	if ppn > 1 && world.NNodes > 1 {
		one := world
		one.NRanks, one.NNodes, one.MNNVL = ppn, 1, false
		one.NICsPerNode, one.NICGbps, one.InterHops, one.Oversubscription, one.Ethernet = 0, 0, 0, 0, false
		one.Nominal.NICsPerNode, one.Nominal.NICGbps = 0, 0
		comms = append(comms, comm{one, "one node", nodes[:1], ppn})
	}
	if world.NNodes > 1 && ppn > 1 {
		per, err := costmodel.ShapeOf(g, nodes, 1)
		if err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		comms = append(comms, comm{per, "one GPU per node", nodes, 1})
	}
	p := &ginv1.Plan{
		FormatVersion: planread.FormatVersion,
		JobId:         jobID,
		Nodes:         append([]string(nil), nodes...),
		GpusPerNode:   uint32(ppn),
		ModelVersion:  costmodel.ModelVersion,
	}
	for _, c := range comms {
		for _, coll := range Collectives {
			rules, err := rulesFor(c, coll, ev)
			if err != nil {
				return nil, fmt.Errorf("plan: %s (%d ranks over %d nodes): %w", c.what, c.shape.NRanks, c.shape.NNodes, err)
			}
			p.Rules = append(p.Rules, rules...)
		}
	}
	p.ContentHash = planread.Hash(p)
	return p, nil
}

// decision is one bucket's outcome.
type decision struct {
	algo     ginv1.Algorithm
	proto    ginv1.Protocol
	channels uint32
	us       float64
	reason   string
	// nccl is NCCL's own choice ("ring/ll") and basis "model" or
	// "measured"; prefers is the cell GIN's model prefers where the plan
	// keeps NCCL's choice for want of evidence: a range where one of them
	// changes gets its own rule, so each range shows its own time and
	// reason.
	nccl, basis, prefers string
	// minV, maxV: the NCCL versions (NCCL_VERSION_CODE) of the oldest and
	// newest measurement a measured override stands on; 0 otherwise.
	minV, maxV uint32
	// choices: the rule's ordered choices when they say more than its one
	// cell (a measured override, or a fallback for when NCCL does not
	// offer the algorithm its model expects); nil otherwise.
	choices []*ginv1.PlanChoice
}

func (d decision) same(o decision) bool {
	if len(d.choices) != len(o.choices) {
		return false
	}
	for i := range d.choices {
		if !proto.Equal(d.choices[i], o.choices[i]) {
			return false
		}
	}
	return d.algo == o.algo && d.proto == o.proto && d.channels == o.channels && d.nccl == o.nccl && d.basis == o.basis && d.prefers == o.prefers
}

// rulesFor computes the rules of one shape and collective, merging
// adjacent buckets with the same decision.
func rulesFor(c comm, coll ginv1.Collective, ev Evidence) ([]*ginv1.PlanRule, error) {
	var rules []*ginv1.PlanRule
	var prev, last decision
	// ends says what holds at both ends of a rule whose buckets gave
	// different reasons (the margins move with the size): the reason of
	// its smallest bucket alone would be true only there.
	ends := func() {
		if len(rules) == 0 {
			return
		}
		r := rules[len(rules)-1]
		if r.MaxLog2Bytes == r.MinLog2Bytes || last.reason == r.Reason {
			return
		}
		r.Reason = fmt.Sprintf("at %s: %s; at %s: %s", humanSize(1<<r.MinLog2Bytes), r.Reason, humanSize(1<<r.MaxLog2Bytes), last.reason)
	}
	margin := modelMargin(c, coll, ev)
	for b := 0; b <= planread.MaxLog2Bytes; b++ {
		bytes := uint64(1) << b
		d, err := decide(c.shape, coll, bytes, margin)
		if err != nil {
			return nil, err
		}
		if ev != nil {
			cells := ev.Measured(c.nodes, c.gpn, coll, bytes)
			if md, ok := decideMeasured(c.shape, coll, bytes, cells, nil); ok {
				d = md
			}
			d = withChoices(c.shape, coll, bytes, cells, d)
		}
		if len(rules) > 0 && d.same(prev) {
			rules[len(rules)-1].MaxLog2Bytes = uint32(b)
			last = d
			continue
		}
		ends()
		prev, last = d, d
		rules = append(rules, &ginv1.PlanRule{
			Collective: coll, NRanks: uint32(c.shape.NRanks), NNodes: uint32(c.shape.NNodes),
			MinLog2Bytes: uint32(b), MaxLog2Bytes: uint32(b),
			Algorithm: d.algo, Protocol: d.proto, Channels: d.channels,
			PredictedUs: round3(d.us), Reason: d.reason, Choices: d.choices,
		})
	}
	ends()
	return rules, nil
}

// decide compares GIN's choice with NCCL's for one bucket from the model
// alone (costmodel.Judge): GIN's choice overrides NCCL's when it is faster
// by more than margin and either the fabric decides it or the pair is in a
// validated regime and beats its held-out error; otherwise NCCL's choice
// is kept and the reason says why.
func decide(s costmodel.Shape, coll ginv1.Collective, bytes uint64, margin float64) (decision, error) {
	v, err := costmodel.Judge(s, coll, bytes, margin)
	if err != nil {
		return decision{}, err
	}
	ginCell := planread.CellName(v.GIN.Algorithm, v.GIN.Protocol)
	ncclCell := planread.CellName(v.NCCL.Algorithm, v.NCCL.Protocol)
	d := decision{us: v.NCCLUs, nccl: ncclCell, basis: "model"}
	pct := func(f float64) int { return int(math.Round(100 * f)) }
	if v.GIN.Algorithm == v.NCCL.Algorithm && v.GIN.Protocol == v.NCCL.Protocol {
		d.reason = "leave it to NCCL: its model picks the same (" + ncclCell + ")"
		return d, nil
	}
	healthy := fmt.Sprintf("on a healthy fabric %d%% faster", pct(v.IdealMargin))
	if v.IdealMargin < 0 {
		healthy = fmt.Sprintf("on a healthy fabric %d%% slower", pct(-v.IdealMargin))
	}
	switch {
	case !v.Priced:
		d.reason = fmt.Sprintf("leave it to NCCL: GIN's model does not offer NCCL's %s to compare with %s", ncclCell, ginCell)
	case v.Basis == costmodel.BasisNone:
		marginNote := ""
		if margin > OverrideMargin {
			marginNote = " (the model's measured error on this shape)"
		}
		d.reason = fmt.Sprintf("leave it to NCCL: %s is within %.0f%%%s of NCCL's %s", ginCell, margin*100, marginNote, ncclCell)
	case v.Basis == costmodel.BasisFabric:
		d.algo, d.proto, d.us = v.GIN.Algorithm, v.GIN.Protocol, v.GIN.TimeUs
		d.reason = fmt.Sprintf("%s: %d%% faster than NCCL's %s; the fabric decides it (%s; %s)%s",
			ginCell, pct(v.Margin), ncclCell, strings.Join(v.Fabric, "; "), healthy, factors(s, v.GIN.Algorithm))
	case v.Basis == costmodel.BasisValidated:
		d.algo, d.proto, d.us = v.GIN.Algorithm, v.GIN.Protocol, v.GIN.TimeUs
		d.reason = fmt.Sprintf("%s: %d%% faster than NCCL's %s; validated: %s%s", ginCell, pct(v.Margin), ncclCell, v.Regime, factors(s, v.GIN.Algorithm))
	case v.Basis == costmodel.BasisWithinError:
		d.prefers = ginCell
		d.reason = fmt.Sprintf("GIN's model prefers %s by %d%% over NCCL's %s, within the held-out error of %s; NCCL's choice kept",
			ginCell, pct(v.Margin), ncclCell, v.Regime)
	default:
		d.prefers = ginCell
		fabric := ""
		if len(v.Fabric) > 0 {
			fabric = fmt.Sprintf("; the fabric (%s) accounts for %d%% of it, not more than the model's error", strings.Join(v.Fabric, "; "), pct(v.Margin-max(v.IdealMargin, 0)))
		}
		mine, theirs := algoWord(v.GIN.Algorithm), algoWord(v.NCCL.Algorithm)
		if mine == theirs {
			mine, theirs = ginCell, ncclCell
		}
		nodes := "nodes"
		if s.NNodes == 1 {
			nodes = "node"
		}
		d.reason = fmt.Sprintf("GIN's model prefers %s by %d%% over NCCL's %s, not validated on this shape (no published %s run against %s at %d %s × %d sm%d GPUs)%s; NCCL's choice kept",
			ginCell, pct(v.Margin), ncclCell, mine, theirs, s.NNodes, nodes, s.NRanks/s.NNodes, s.CompCap, fabric)
	}
	return d, nil
}

func algoWord(a ginv1.Algorithm) string {
	return strings.ToLower(strings.TrimPrefix(a.String(), "ALGORITHM_"))
}

// modelMargin is how much faster GIN's model must find its choice than
// NCCL's before a model-only rule overrides NCCL: OverrideMargin, or the
// model's median error against the communicator's measured NCCL-default
// runs when those exist and it is larger (a fabric effect smaller than the
// model's own measured error on the shape is not evidence).
func modelMargin(c comm, coll ginv1.Collective, ev Evidence) float64 {
	if ev == nil {
		return OverrideMargin
	}
	var errs []float64
	for b := 0; b <= planread.MaxLog2Bytes; b++ {
		bytes := uint64(1) << b
		for _, cell := range ev.Measured(c.nodes, c.gpn, coll, bytes) {
			if !cell.Default || cell.How != "measured" || cell.TimeUs <= 0 {
				continue
			}
			nccl, err := costmodel.PredictNCCL(c.shape, coll, bytes)
			if err != nil {
				continue
			}
			if us, ok := costmodel.Cost(c.shape, coll, nccl.Algorithm, nccl.Protocol, bytes); ok {
				errs = append(errs, math.Abs(us-cell.TimeUs)/cell.TimeUs)
			}
		}
	}
	if len(errs) == 0 {
		return OverrideMargin
	}
	sort.Float64s(errs)
	return math.Min(math.Max(OverrideMargin, errs[len(errs)/2]), 0.5)
}

// decideMeasured decides a bucket from measurements of the communicator's
// shape; ok is false when they cannot say what NCCL's default costs there
// (no measurement of NCCL's default, nor of the cell NCCL's model picks).
// without, when not nil, is the algorithms NCCL does not offer: their
// cells and NCCL's default runs (which ran with them offered) are left
// out, and NCCL's choice is what its model picks among the others.
func decideMeasured(s costmodel.Shape, coll ginv1.Collective, bytes uint64, cells []calib.Cell, without map[ginv1.Algorithm]bool) (decision, bool) {
	if without != nil {
		var kept []calib.Cell
		for _, c := range cells {
			if !c.Default && !without[c.Algorithm] {
				kept = append(kept, c)
			}
		}
		cells = kept
	}
	if len(cells) == 0 {
		return decision{}, false
	}
	var def *calib.Cell
	defWhat := "NCCL's default"
	for i := range cells {
		if cells[i].Default {
			def = &cells[i]
			break
		}
	}
	if def == nil {
		// No run of NCCL's default: a forced run of the cell NCCL's own
		// model picks stands for it.
		nccl, err := ncclPick(s, coll, bytes, without)
		if err != nil {
			return decision{}, false
		}
		for i := range cells {
			c := &cells[i]
			if c.Algorithm == nccl.Algorithm && (c.Protocol == nccl.Protocol || c.Protocol == ginv1.Protocol_PROTOCOL_UNSPECIFIED) {
				def = c
				defWhat = "NCCL's choice " + planread.CellName(nccl.Algorithm, nccl.Protocol) + " (its model's; measured forced)"
				break
			}
		}
	}
	if def == nil {
		return decision{}, false
	}
	var best *calib.Cell
	for i := range cells {
		c := &cells[i]
		if c.Default || c == def {
			continue
		}
		if best == nil || c.TimeUs < best.TimeUs {
			best = c
		}
	}
	at := humanSize(bytes)
	if best == nil || best.TimeUs*(1+best.Spread) >= def.TimeUs*(1-MeasuredMargin) {
		why := fmt.Sprintf("leave it to NCCL: measured, %s takes %.1f µs at %s (%s, %s)", defWhat, def.TimeUs, at, def.How, def.Evidence)
		if best != nil {
			why = fmt.Sprintf("leave it to NCCL: measured, %s takes %.1f µs at %s, %s %.1f µs%s is not %d%% faster (%s; %s)",
				defWhat, def.TimeUs, at, cellLabel(best), best.TimeUs, slowerNote(best, " (its slower cell %.1f µs)"), int(MeasuredMargin*100), def.Evidence, best.Evidence)
		}
		return decision{us: def.TimeUs, nccl: "measured", basis: "measured", reason: why}, true
	}
	proto := best.Protocol
	protoNote := ""
	if proto == ginv1.Protocol_PROTOCOL_UNSPECIFIED {
		// The run forced only the algorithm: take the protocol GIN's
		// model finds fastest for it.
		bestUs := -1.0
		for _, pr := range costmodel.Protocols {
			if us, ok := costmodel.Cost(s, coll, best.Algorithm, pr, bytes); ok && (bestUs < 0 || us < bestUs) {
				bestUs, proto = us, pr
			}
		}
		if proto == ginv1.Protocol_PROTOCOL_UNSPECIFIED {
			return decision{}, false
		}
		protoNote = ", protocol from the model"
	}
	minV, maxV := versionSpan(best.NCCLVersion, def.NCCLVersion)
	return decision{algo: best.Algorithm, proto: proto, us: best.TimeUs, nccl: "measured", basis: "measured", minV: minV, maxV: maxV,
		reason: fmt.Sprintf("%s: measured %.0f%% faster than %s at %s (%.1f µs vs %.1f µs, %.2f× the bandwidth%s, %s%s; %s; %s)",
			planread.CellName(best.Algorithm, proto), 100*(1-best.TimeUs/def.TimeUs), defWhat, at, best.TimeUs, def.TimeUs, def.TimeUs/best.TimeUs,
			slowerNote(best, ", %.1f µs in its slower cell"), best.How, protoNote, best.Evidence, def.Evidence)}, true
}

// slowerNote formats a measured cell's slower out-of-place/in-place time
// (µs) with format when its measurement knows it, else "".
func slowerNote(c *calib.Cell, format string) string {
	if c.Spread <= 0 {
		return ""
	}
	return fmt.Sprintf(format, c.TimeUs*(1+c.Spread))
}

func cellLabel(c *calib.Cell) string {
	if c.Protocol == ginv1.Protocol_PROTOCOL_UNSPECIFIED {
		return algoWord(c.Algorithm)
	}
	return planread.CellName(c.Algorithm, c.Protocol)
}

func humanSize(b uint64) string {
	switch {
	case b >= 1<<40:
		return fmt.Sprintf("%d TiB", b>>40)
	case b >= 1<<30:
		return fmt.Sprintf("%d GiB", b>>30)
	case b >= 1<<20:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}

// factors names what GIN's model knows beyond NCCL's that is not a
// fabric fault (costmodel.FabricFactors names those).
func factors(s costmodel.Shape, a ginv1.Algorithm) string {
	var f []string
	if s.NNodes == 2 && a == ginv1.Algorithm_ALGORITHM_TREE {
		f = append(f, "2 nodes: tree halves the inter-node bytes")
	}
	if s.Ethernet {
		f = append(f, "RoCE latency")
	}
	if s.NNodes > 1 && s.CompCap < 90 && s.IntraNVLink {
		f = append(f, "measured NVLink LL step latency")
	}
	if len(f) == 0 {
		return ""
	}
	return " (" + strings.Join(f, "; ") + ")"
}

// round3 keeps predicted times to ns so that the plan does not carry
// float noise.
func round3(v float64) float64 {
	return float64(int64(v*1000+0.5)) / 1000
}
