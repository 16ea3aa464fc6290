package estimate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/natsort"
)

// leafOf returns each node's leaf group in the simulated fat tree ("sgN"
// from the leaf switch's name).
func leafOf(t *testing.T, g *graph.Graph, nodes []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range nodes {
		info, ok := g.NodeInfo(n)
		if !ok {
			t.Fatalf("no node %s", n)
		}
		leaf, _, _ := strings.Cut(strings.TrimPrefix(info.LeafSwitch, "sim "), "-")
		out[n] = leaf
	}
	return out
}

// contiguous checks that each group's nodes form one run of the ring (the
// run may wrap around the end).
func contiguous(t *testing.T, ordered []string, group map[string]string) {
	t.Helper()
	changes := 0
	for i := range ordered {
		if group[ordered[i]] != group[ordered[(i+1)%len(ordered)]] {
			changes++
		}
	}
	groups := map[string]bool{}
	for _, n := range ordered {
		groups[group[n]] = true
	}
	if len(groups) > 1 && changes != len(groups) {
		t.Errorf("order %v: groups are not contiguous (%d group changes, %d groups)", ordered, changes, len(groups))
	}
}

func TestOrderFatTree(t *testing.T) {
	g := simGraph(t, "leaf-groups=4,spines=4,oversub=2", simPart{profile: "dgx-h100", count: 16})
	all := g.Nodes()
	rng := rand.New(rand.NewPCG(7, 11))
	shuffled := slices.Clone(all)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	interleaved := make([]string, 0, 16)
	for i := range 4 {
		for grp := range 4 {
			interleaved = append(interleaved, all[grp*4+i])
		}
	}
	for _, tc := range []struct {
		name      string
		nodes     []string
		want      []string // nil: all nodes grouped by leaf, natural order
		crossings int
		given     int // -1: more than crossings
	}{
		{name: "sorted", nodes: all, crossings: 4, given: 4},
		{name: "shuffled", nodes: shuffled, crossings: 4, given: -1},
		{name: "interleaved", nodes: interleaved, crossings: 4, given: 16},
		{name: "reversed", nodes: reversed(all), crossings: 4, given: 4},
		{name: "one node", nodes: []string{"node005"}, want: []string{"node005"}},
		{name: "two on one leaf", nodes: []string{"node001", "node000"}, want: []string{"node000", "node001"}},
		{name: "two across", nodes: []string{"node012", "node001"}, want: []string{"node001", "node012"}, crossings: 2, given: 2},
		{
			name:  "two leaves, mixed",
			nodes: []string{"node013", "node002", "node012", "node003", "node001"},
			want:  []string{"node001", "node002", "node003", "node012", "node013"}, crossings: 2, given: 4,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, crossings, given, err := Order(g, tc.nodes)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != nil {
				if !slices.Equal(got, tc.want) {
					t.Errorf("order = %v, want %v", got, tc.want)
				}
			} else {
				if !slices.Equal(got, all) {
					t.Errorf("order = %v, want %v", got, all)
				}
				contiguous(t, got, leafOf(t, g, got))
			}
			if crossings != tc.crossings {
				t.Errorf("crossings = %d, want %d", crossings, tc.crossings)
			}
			if tc.given >= 0 && given != tc.given || tc.given < 0 && given <= crossings {
				t.Errorf("given crossings = %d, want %d (-1: more than %d)", given, tc.given, crossings)
			}
			if want := ringCrossings(g, got); want != crossings {
				t.Errorf("crossings %d, but the ring has %d", crossings, want)
			}
			// Deterministic: the same set in any order gives the same answer.
			again, _, _, err := Order(g, reversed(tc.nodes))
			if err != nil || !slices.Equal(again, got) {
				t.Errorf("reversed input: %v, %v; want %v", again, err, got)
			}
		})
	}
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// TestOrderThreeTier: four leaf groups in two spine groups under a core;
// names make leaf groups 1 and 2 swap places in name order, so only the
// spine-group clustering keeps groups 0 and 1 (and 2 and 3) together.
func TestOrderThreeTier(t *testing.T) {
	var names []string
	for _, prefix := range []string{"a", "c", "b", "d"} { // leaf groups 0, 1, 2, 3
		for i := range 4 {
			names = append(names, fmt.Sprintf("%s%d", prefix, i))
		}
	}
	g, _ := simGraphHook(t, "leaf-groups=4,spines=2,oversub=1", threeTier, simPart{profile: "dgx-h100", names: names})
	if p := mustGPU0Path(t, g, "a0", "b0"); p.SwitchHops != 5 {
		t.Fatalf("a0 → b0: %d switch hops, want 5 (three tiers)", p.SwitchHops)
	}
	input := slices.Clone(names)
	slices.SortFunc(input, natsort.Compare) // a, b, c, d: crosses the core 4 times
	got, crossings, given, err := Order(g, input)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a0", "a1", "a2", "a3", "c0", "c1", "c2", "c3", "b0", "b1", "b2", "b3", "d0", "d1", "d2", "d3"}
	if !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
	if crossings != 4 || given != 4 {
		t.Errorf("crossings %d, given %d: want 4, 4 (every leaf change crosses a spine)", crossings, given)
	}
	if c, gc := coreCrossings(t, g, got), coreCrossings(t, g, input); c != 2 || gc != 4 {
		t.Errorf("core crossings %d (given %d), want 2 (4)", c, gc)
	}
}

func mustGPU0Path(t *testing.T, g *graph.Graph, a, b string) graph.Path {
	t.Helper()
	p, err := g.Path(graph.GPURef{Node: a}, graph.GPURef{Node: b})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func coreCrossings(t *testing.T, g *graph.Graph, ring []string) int {
	n := 0
	for i, a := range ring {
		if mustGPU0Path(t, g, a, ring[(i+1)%len(ring)]).SwitchHops > 3 {
			n++
		}
	}
	return n
}

func TestOrderNaturalNoFabric(t *testing.T) {
	g := simGraph(t, "none", simPart{profile: "dgx-h100", names: []string{"gpu10", "gpu2", "gpu1", "gpu20", "gpu3"}})
	got, crossings, given, err := Order(g, []string{"gpu20", "gpu3", "gpu10", "gpu1", "gpu2"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"gpu1", "gpu2", "gpu3", "gpu10", "gpu20"}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
	// Without a fabric every hop is unknown: every ring edge may cross.
	if crossings != 5 || given != 5 {
		t.Errorf("crossings %d, given %d; want 5, 5 (unknown hops count)", crossings, given)
	}
}

func TestOrderMNNVL(t *testing.T) {
	// 36 GB200 trays = 2 NVL72 racks (18 trays each), fabric in 3 leaf
	// groups of 12: rack 1 spans leaf groups 1 and 2.
	g := simGraph(t, "leaf-groups=3,spines=2", simPart{profile: "gb200-nvl72", count: 36})
	all := g.Nodes()
	got, crossings, _, err := Order(g, reversed(all))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, all) {
		t.Errorf("order = %v, want %v", got, all)
	}
	// Inside a rack the ring is MNNVL; node017 → node018 changes racks
	// under one leaf (sg1); only node035 → node000 crosses the spine.
	if crossings != 1 {
		t.Errorf("crossings = %d, want 1", crossings)
	}
}

func TestOrderErrors(t *testing.T) {
	g := simGraph(t, "", simPart{profile: "dgx-h100", count: 2})
	for _, tc := range []struct {
		name  string
		g     *graph.Graph
		nodes []string
		want  string
	}{
		{"empty", g, nil, "no nodes"},
		{"unknown", g, []string{"node000", "node777"}, `"node777"`},
		{"duplicate", g, []string{"node000", "node001", "node000"}, "node000 is listed twice"},
		{"nil graph", nil, []string{"node000"}, "no graph"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := Order(tc.g, tc.nodes)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func BenchmarkOrder10kNodes(b *testing.B) {
	const n = 10000
	g := simGraph(b, "leaf-groups=32,spines=16,oversub=2", simPart{profile: "dgx-h100", count: n})
	nodes := g.Nodes()
	rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	b.ReportAllocs()
	for b.Loop() {
		_, c, gc, err := Order(g, nodes)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(c), "crossings")
		b.ReportMetric(float64(gc), "given-crossings")
	}
}
