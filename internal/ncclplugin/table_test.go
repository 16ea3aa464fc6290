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
		if len(c.Shapes) == 0 {
			t.Fatalf("%s: no shapes", pl.name)
		}
		for _, s := range c.Shapes {
			for coll := range numColls {
				for b := range numBuckets {
					if got, want := s.Cells[coll][b], Decide(pl.p, coll, s.NRanks, s.NNodes, uint64(1)<<b); got != want {
						t.Fatalf("%s: shape %d/%d coll %d bucket %d: compiled %+v, Lookup %+v", pl.name, s.NRanks, s.NNodes, coll, b, got, want)
					}
				}
			}
		}
	}
}
