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

// compile turns a verified plan into the C table's cells: the plan's
// distinct (n_ranks, n_nodes) shapes in rule order (at most maxShapes), and
// for each rule its buckets. Verify guarantees that rules do not overlap,
// so this is what plan.Lookup answers for every (shape, collective,
// bucket), in one pass over the rules; sizes past the last bucket take its
// cell, as Lookup clamps them.
func compile(p *ginv1.Plan) *compiled {
	c := &compiled{}
	index := map[[2]uint32]int{}
	for _, r := range p.GetRules() {
		k := [2]uint32{r.GetNRanks(), r.GetNNodes()}
		i, seen := index[k]
		if !seen {
			if len(c.shapes) == maxShapes {
				index[k] = -1
				c.dropped++
				continue
			}
			i = len(c.shapes)
			index[k] = i
			s := shape{nRanks: k[0], nNodes: k[1]}
			for coll := range numColls {
				for b := range numBuckets {
					s.cells[coll][b] = leave
				}
			}
			c.shapes = append(c.shapes, s)
		}
		coll := int(r.GetCollective()) - 1
		if i < 0 || coll < 0 || coll >= numColls {
			continue
		}
		cl := cellOf(r, true)
		for b := r.GetMinLog2Bytes(); b <= min(r.GetMaxLog2Bytes(), planread.MaxLog2Bytes); b++ {
			c.shapes[i].cells[coll][b] = cl
		}
	}
	for i := range c.shapes {
		for coll := range numColls {
			for b := planread.MaxLog2Bytes + 1; b < numBuckets; b++ {
				c.shapes[i].cells[coll][b] = c.shapes[i].cells[coll][planread.MaxLog2Bytes]
			}
		}
	}
	return c
}
