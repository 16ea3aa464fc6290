package main

import (
	"math"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/planread"
)

const (
	numColls   = 5  // ncclFunc_t 0..4
	numBuckets = 64 // floor(log2(nBytes)) of a size_t
	maxShapes  = 8  // GIN_MAX_SHAPES
	maxAlgos   = 7  // NCCL_NUM_ALGORITHMS today
	maxProtos  = 3
)

// cell is one decision: algo/proto -1 leave the choice to NCCL; channels 0
// keeps NCCL's channel count.
type cell struct {
	algo, proto int8
	channels    int16
}

var leave = cell{algo: -1, proto: -1}

type shape struct {
	nRanks, nNodes uint32
	cells          [numColls][numBuckets]cell
}

type compiled struct {
	shapes  []shape
	dropped int // shapes beyond maxShapes
}

// cellOf turns a plan rule into a cell. Rules that name no algorithm, or an
// algorithm or protocol outside NCCL's ranges, leave the choice to NCCL.
func cellOf(r *ginv1.PlanRule, ok bool) cell {
	if !ok || r == nil {
		return leave
	}
	c := leave
	if ch := r.GetChannels(); ch > 0 {
		c.channels = int16(min(ch, math.MaxInt16))
	}
	a, p := int(r.GetAlgorithm())-1, int(r.GetProtocol())-1
	if a >= 0 && a < maxAlgos && p >= 0 && p < maxProtos {
		c.algo, c.proto = int8(a), int8(p)
	}
	return c
}

// Decide is what the C table answers for a call: the plan's rule for
// (coll, nRanks, nNodes, nBytes) as a cell. The table is built from it.
func Decide(p *ginv1.Plan, coll int, nRanks, nNodes uint32, nBytes uint64) cell {
	r, ok := planread.Lookup(p, ginv1.Collective(coll+1), int(nRanks), int(nNodes), nBytes)
	return cellOf(r, ok)
}

// compile walks every (shape, collective, bucket) of a plan through
// planread.Lookup. Shapes are the plan's distinct (n_ranks, n_nodes), in rule
// order.
func compile(p *ginv1.Plan) *compiled {
	c := &compiled{}
	seen := map[[2]uint32]bool{}
	for _, r := range p.GetRules() {
		k := [2]uint32{r.GetNRanks(), r.GetNNodes()}
		if seen[k] {
			continue
		}
		seen[k] = true
		if len(c.shapes) == maxShapes {
			c.dropped++
			continue
		}
		s := shape{nRanks: k[0], nNodes: k[1]}
		for coll := range numColls {
			for b := range numBuckets {
				s.cells[coll][b] = Decide(p, coll, k[0], k[1], uint64(1)<<b)
			}
		}
		c.shapes = append(c.shapes, s)
	}
	return c
}
