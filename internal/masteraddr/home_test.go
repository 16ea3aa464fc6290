package masteraddr

import (
	"fmt"
	"testing"
)

// Agents spread over the master list by their node name: every master gets
// a share of a cluster's agents, and a node always starts at the same one.
func TestStartIndexSpreadsNodesOverMasters(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 5} {
		counts := make([]int, max(n, 1))
		const nodes = 3000
		for i := range nodes {
			name := fmt.Sprintf("node%04d", i)
			got := StartIndex(name, n)
			if got < 0 || got >= max(n, 1) {
				t.Fatalf("StartIndex(%q, %d) = %d, out of range", name, n, got)
			}
			if again := StartIndex(name, n); again != got {
				t.Fatalf("StartIndex(%q, %d) = %d then %d", name, n, got, again)
			}
			counts[got]++
		}
		for i, c := range counts {
			// A fair share within 15% (FNV-1a over such names is close to uniform).
			if want := nodes / len(counts); c < want*85/100 || c > want*115/100 {
				t.Errorf("%d masters: master %d starts %d of %d nodes, want about %d (%v)", n, i, c, nodes, want, counts)
			}
		}
	}
}

func TestHome(t *testing.T) {
	masters := []string{"m1:5000", "m2:5000", "m3:5000"}
	tests := []struct {
		node    string
		masters []string
		want    string
	}{
		{"node001", nil, ""},
		{"node001", masters[:1], "m1:5000"},
		{"node001", masters, masters[StartIndex("node001", 3)]},
	}
	for _, tc := range tests {
		if got := Home(tc.node, tc.masters); got != tc.want {
			t.Errorf("Home(%q, %v) = %q, want %q", tc.node, tc.masters, got, tc.want)
		}
	}
}
