package main

import (
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

type compiledCase struct {
	name string
	p    *ginv1.Plan
}

// compile's one pass over the rules answers what planread.Lookup answers
// for every (shape, collective, bucket) of real and forcing plans.
func TestCompileEqualsLookup(t *testing.T) {
	for _, pl := range []*compiledCase{{"sim", simPlan(t, "job-c")}, {"forcing", forcingPlan(t, "job-c")}} {
		c := compile(pl.p)
		if len(c.shapes) == 0 {
			t.Fatalf("%s: no shapes", pl.name)
		}
		for _, s := range c.shapes {
			for coll := range numColls {
				for b := range numBuckets {
					if got, want := s.cells[coll][b], Decide(pl.p, coll, s.nRanks, s.nNodes, uint64(1)<<b); got != want {
						t.Fatalf("%s: shape %d/%d coll %d bucket %d: compiled %+v, Lookup %+v", pl.name, s.nRanks, s.nNodes, coll, b, got, want)
					}
				}
			}
		}
	}
}
