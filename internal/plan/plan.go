package plan

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

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
	// "measured": a range where NCCL's choice or the basis changes gets its
	// own rule, so each range shows its own time and reason.
	nccl, basis string
}

func (d decision) same(o decision) bool {
	return d.algo == o.algo && d.proto == o.proto && d.channels == o.channels && d.nccl == o.nccl && d.basis == o.basis
}

// rulesFor computes the rules of one shape and collective, merging
// adjacent buckets with the same decision.
func rulesFor(c comm, coll ginv1.Collective, ev Evidence) ([]*ginv1.PlanRule, error) {
	var rules []*ginv1.PlanRule
	var prev decision
	margin := modelMargin(c, coll, ev)
	for b := 0; b <= planread.MaxLog2Bytes; b++ {
		bytes := uint64(1) << b
		d, err := decide(c.shape, coll, bytes, margin)
		if err != nil {
			return nil, err
		}
		if ev != nil {
			if md, ok := decideMeasured(c.shape, coll, bytes, ev.Measured(c.nodes, c.gpn, coll, bytes)); ok {
				d = md
			}
		}
		if len(rules) > 0 && d.same(prev) {
			rules[len(rules)-1].MaxLog2Bytes = uint32(b)
			continue
		}
		prev = d
		rules = append(rules, &ginv1.PlanRule{
			Collective: coll, NRanks: uint32(c.shape.NRanks), NNodes: uint32(c.shape.NNodes),
			MinLog2Bytes: uint32(b), MaxLog2Bytes: uint32(b),
			Algorithm: d.algo, Protocol: d.proto, Channels: d.channels,
			PredictedUs: round3(d.us), Reason: d.reason,
		})
	}
	return rules, nil
}

// decide compares GIN's choice with NCCL's for one bucket.
func decide(s costmodel.Shape, coll ginv1.Collective, bytes uint64, margin float64) (decision, error) {
	gin, err := costmodel.Predict(s, coll, bytes)
	if err != nil {
		return decision{}, err
	}
	nccl, err := costmodel.PredictNCCL(s, coll, bytes)
	if err != nil {
		return decision{}, err
	}
	ncclCell := planread.CellName(nccl.Algorithm, nccl.Protocol)
	if gin.Algorithm == nccl.Algorithm && gin.Protocol == nccl.Protocol {
		return decision{us: gin.TimeUs, nccl: ncclCell, basis: "model", reason: "leave it to NCCL: its model picks the same (" + ncclCell + ")"}, nil
	}
	// NCCL's choice as GIN's model sees it.
	ncclUs, ok := costmodel.Cost(s, coll, nccl.Algorithm, nccl.Protocol, bytes)
	marginNote := ""
	if margin > OverrideMargin {
		marginNote = " (the model's measured error on this shape)"
	}
	if ok && gin.TimeUs >= ncclUs*(1-margin) {
		return decision{us: ncclUs, nccl: ncclCell, basis: "model", reason: fmt.Sprintf("leave it to NCCL: %s is within %.0f%%%s of NCCL's %s",
			planread.CellName(gin.Algorithm, gin.Protocol), margin*100, marginNote, planread.CellName(nccl.Algorithm, nccl.Protocol))}, nil
	}
	why := "GIN's model"
	if ok {
		why = fmt.Sprintf("%.0f%% faster than NCCL's %s", 100*(1-gin.TimeUs/ncclUs), planread.CellName(nccl.Algorithm, nccl.Protocol))
	}
	return decision{algo: gin.Algorithm, proto: gin.Protocol, us: gin.TimeUs, nccl: ncclCell, basis: "model",
		reason: planread.CellName(gin.Algorithm, gin.Protocol) + ": " + why + factors(s, gin.Algorithm)}, nil
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
func decideMeasured(s costmodel.Shape, coll ginv1.Collective, bytes uint64, cells []calib.Cell) (decision, bool) {
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
		nccl, err := costmodel.PredictNCCL(s, coll, bytes)
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
	return decision{algo: best.Algorithm, proto: proto, us: best.TimeUs, nccl: "measured", basis: "measured",
		reason: fmt.Sprintf("%s: measured %.0f%% faster than %s at %s (%.1f µs vs %.1f µs%s, %s%s; %s; %s)",
			planread.CellName(best.Algorithm, proto), 100*(1-best.TimeUs/def.TimeUs), defWhat, at, best.TimeUs, def.TimeUs,
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
		return strings.ToLower(strings.TrimPrefix(c.Algorithm.String(), "ALGORITHM_"))
	}
	return planread.CellName(c.Algorithm, c.Protocol)
}

func humanSize(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%d GiB", b>>30)
	case b >= 1<<20:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}

// factors names what GIN knows that NCCL's model does not.
func factors(s costmodel.Shape, a ginv1.Algorithm) string {
	var f []string
	if s.NNodes == 2 && a == ginv1.Algorithm_ALGORITHM_TREE {
		f = append(f, "2 nodes: tree halves the inter-node bytes")
	}
	if s.InterHops > 1 && s.Oversubscription > 1 {
		f = append(f, fmt.Sprintf("spine oversubscription %g:1", s.Oversubscription))
	}
	if s.InterHops > 1 {
		f = append(f, fmt.Sprintf("%d switch hops", s.InterHops))
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
