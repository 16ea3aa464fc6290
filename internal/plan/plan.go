package plan

import (
	"errors"
	"fmt"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
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
}

// Build computes the plan of a job running gpusPerNode GPUs (0: all) on
// each of nodes, in the order given.
func Build(g *graph.Graph, jobID string, nodes []string, gpusPerNode int) (*ginv1.Plan, error) {
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
	comms := []comm{{world, "world"}}
	if ppn > 1 && world.NNodes > 1 {
		one := world
		one.NRanks, one.NNodes, one.MNNVL = ppn, 1, false
		one.NICsPerNode, one.NICGbps, one.InterHops, one.Oversubscription, one.Ethernet = 0, 0, 0, 0, false
		comms = append(comms, comm{one, "one node"})
	}
	if world.NNodes > 1 && ppn > 1 {
		per, err := costmodel.ShapeOf(g, nodes, 1)
		if err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		comms = append(comms, comm{per, "one GPU per node"})
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
			rules, err := rulesFor(c, coll)
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
}

func (d decision) same(o decision) bool {
	return d.algo == o.algo && d.proto == o.proto && d.channels == o.channels
}

// rulesFor computes the rules of one shape and collective, merging
// adjacent buckets with the same decision.
func rulesFor(c comm, coll ginv1.Collective) ([]*ginv1.PlanRule, error) {
	var rules []*ginv1.PlanRule
	var prev decision
	for b := 0; b <= planread.MaxLog2Bytes; b++ {
		d, err := decide(c.shape, coll, uint64(1)<<b)
		if err != nil {
			return nil, err
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
func decide(s costmodel.Shape, coll ginv1.Collective, bytes uint64) (decision, error) {
	gin, err := costmodel.Predict(s, coll, bytes)
	if err != nil {
		return decision{}, err
	}
	nccl, err := costmodel.PredictNCCL(s, coll, bytes)
	if err != nil {
		return decision{}, err
	}
	if gin.Algorithm == nccl.Algorithm && gin.Protocol == nccl.Protocol {
		return decision{us: gin.TimeUs, reason: "leave it to NCCL: its model picks the same (" + planread.CellName(gin.Algorithm, gin.Protocol) + ")"}, nil
	}
	// NCCL's choice as GIN's model sees it.
	ncclUs, ok := costmodel.Cost(s, coll, nccl.Algorithm, nccl.Protocol, bytes)
	if ok && gin.TimeUs >= ncclUs*(1-OverrideMargin) {
		return decision{us: ncclUs, reason: fmt.Sprintf("leave it to NCCL: %s is within %d%% of NCCL's %s",
			planread.CellName(gin.Algorithm, gin.Protocol), int(OverrideMargin*100), planread.CellName(nccl.Algorithm, nccl.Protocol))}, nil
	}
	why := "GIN's model"
	if ok {
		why = fmt.Sprintf("%.0f%% faster than NCCL's %s", 100*(1-gin.TimeUs/ncclUs), planread.CellName(nccl.Algorithm, nccl.Protocol))
	}
	return decision{algo: gin.Algorithm, proto: gin.Protocol, us: gin.TimeUs,
		reason: planread.CellName(gin.Algorithm, gin.Protocol) + ": " + why + factors(s, gin.Algorithm)}, nil
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
