package main

import (
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/plantable"
)

// The decision table is internal/plantable's: the same compile serves the
// agent's C form (plansock form 2) and this loader.
const (
	numColls   = plantable.NumColls
	numBuckets = plantable.NumBuckets
)

type (
	cell     = plantable.Cell
	compiled = plantable.Table
)

// Decide is what the C table answers for a call (planread.Lookup as a cell).
func Decide(p *ginv1.Plan, coll int, nRanks, nNodes uint32, nBytes uint64) cell {
	return plantable.Decide(p, coll, nRanks, nNodes, nBytes)
}

func compile(p *ginv1.Plan) *compiled { return plantable.Compile(p) }
