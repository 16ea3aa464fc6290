package graph

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// nameList against a sorted slice under random adds and removes (enough to
// split blocks and empty them), every older list unchanged by later edits.
func TestNameListMatchesSortedSlice(t *testing.T) {
	for _, start := range []int{0, 1, 700, 3000} {
		t.Run(fmt.Sprintf("start=%d", start), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(start), 7))
			var want []string
			for i := range start {
				want = append(want, fmt.Sprintf("n%05d", 2*i))
			}
			l := newNameList(slices.Clone(want))
			type version struct {
				l    nameList
				want []string
			}
			var kept []version
			for op := range 4000 {
				name := fmt.Sprintf("n%05d", rng.IntN(2*start+2000))
				i, found := slices.BinarySearch(want, name)
				if rng.IntN(3) == 0 { // remove, present or not
					l = l.without(name)
					if found {
						want = slices.Delete(slices.Clone(want), i, i+1)
					}
				} else {
					l = l.with(name)
					if !found {
						want = slices.Insert(slices.Clone(want), i, name)
					}
				}
				if op%500 == 0 {
					kept = append(kept, version{l, want})
				}
			}
			if got := l.all(); !slices.Equal(got, want) || l.len() != len(want) {
				t.Fatalf("list of %d names (len %d) differs from the sorted slice of %d", len(got), l.len(), len(want))
			}
			for _, b := range l.blocks {
				if len(b) == 0 || len(b) > maxNameBlock {
					t.Fatalf("a block of %d names (want 1..%d)", len(b), maxNameBlock)
				}
			}
			for i, v := range kept {
				if !slices.Equal(v.l.all(), v.want) {
					t.Fatalf("version %d changed by later edits", i)
				}
			}
		})
	}
}
