package estimate

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/natsort"
)

// maxPivots bounds the spine-group clustering of leaves: each pivot costs one
// path per leaf not yet placed. Leaves still unplaced after maxPivots pods
// (only in fabrics whose leaves share no ancestor, or are unknown) form one
// last group.
const maxPivots = 64

// ErrNoNodes is returned for an empty node list.
var ErrNoNodes = errors.New("no nodes")

// Order returns the nodes in an order whose ring (node i → i+1, last →
// first) crosses the spine the least, the spine crossings of that ring and
// those of the ring in the order given.
//
// Nodes are grouped, from the outside in, by spine group (leaves whose
// switches meet at most one tier up, found by the path between one node of
// each leaf), leaf switch (NodeInfo.LeafSwitch; a node of an MNNVL clique
// goes with its clique, under the leaf of the clique's first node), MNNVL
// clique, and name in natural order (node2 before node10). Groups are
// ordered by their first node's name, so the result depends only on the set
// of nodes, never on the order given. Nodes whose leaf is unknown come last.
//
// A ring edge is a crossing when its path (GPU0 to GPU0) is a NET path with
// more than one switch hop, or with unknown hops. Cost: O(n log n) for the
// sort plus 2n paths for the crossings and at most leaves × spine groups
// paths for the clustering; no all-pairs table is built.
func Order(g *graph.Graph, nodes []string) (ordered []string, crossings, givenCrossings int, err error) {
	if g == nil {
		return nil, 0, 0, errors.New("order: no graph")
	}
	if len(nodes) == 0 {
		return nil, 0, 0, fmt.Errorf("order: %w", ErrNoNodes)
	}
	type nodeLoc struct {
		name   string
		leaf   string // physical leaf ("" unknown)
		domain string
	}
	locs := make([]nodeLoc, len(nodes))
	seen := make(map[string]struct{}, len(nodes))
	for i, name := range nodes {
		if _, dup := seen[name]; dup {
			return nil, 0, 0, fmt.Errorf("order: node %s is listed twice", name)
		}
		seen[name] = struct{}{}
		info, ok := g.NodeInfo(name)
		if !ok {
			return nil, 0, 0, fmt.Errorf("order: no node %q in the graph", name)
		}
		locs[i] = nodeLoc{name: name, leaf: info.LeafSwitch, domain: info.NVLinkDomain}
	}
	slices.SortFunc(locs, func(a, b nodeLoc) int { return natsort.Compare(a.name, b.name) })

	// Effective leaf: a clique's nodes stay together under the leaf of its
	// first node that has one.
	domainLeaf := map[string]string{}
	domainFirst := map[string]int{}
	for i, l := range locs {
		if l.domain == "" {
			continue
		}
		if _, ok := domainFirst[l.domain]; !ok {
			domainFirst[l.domain] = i
		}
		if l.leaf != "" && domainLeaf[l.domain] == "" {
			domainLeaf[l.domain] = l.leaf
		}
	}
	// Leaves in order of their first node; rep is a node physically there.
	type leafGroup struct {
		name  string
		first int
		rep   string
		pod   int
	}
	var leaves []*leafGroup
	byLeaf := map[string]*leafGroup{}
	eff := make([]*leafGroup, len(locs))
	var unknown *leafGroup
	for i, l := range locs {
		e := l.leaf
		if l.domain != "" {
			e = domainLeaf[l.domain]
		}
		lg := byLeaf[e]
		if lg == nil {
			lg = &leafGroup{name: e, first: i, pod: -1}
			byLeaf[e] = lg
			if e == "" {
				unknown = lg
			} else {
				leaves = append(leaves, lg)
			}
		}
		if lg.rep == "" && l.leaf == e {
			lg.rep = l.name
		}
		eff[i] = lg
	}

	// Spine groups: a pivot leaf takes every unplaced leaf that shares a
	// spine with it (or an NVLink domain).
	pods := 0
	for p := range leaves {
		pivot := leaves[p]
		if pivot.pod >= 0 {
			continue
		}
		pivot.pod = pods
		if pods == maxPivots {
			for _, lg := range leaves[p:] {
				if lg.pod < 0 {
					lg.pod = pods
				}
			}
			break
		}
		for _, lg := range leaves[p+1:] {
			if lg.pod < 0 && closeLeaves(g, pivot.rep, lg.rep) {
				lg.pod = pods
			}
		}
		pods++
	}
	if unknown != nil {
		unknown.pod = pods + 1
	}

	// Sort key: spine group, leaf, clique, name.
	type key struct{ pod, leaf, group, idx int }
	keys := make([]key, len(locs))
	for i, l := range locs {
		grp := i
		if l.domain != "" {
			grp = domainFirst[l.domain]
		}
		keys[i] = key{pod: eff[i].pod, leaf: eff[i].first, group: grp, idx: i}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := cmp.Compare(a.pod, b.pod); c != 0 {
			return c
		}
		if c := cmp.Compare(a.leaf, b.leaf); c != 0 {
			return c
		}
		if c := cmp.Compare(a.group, b.group); c != 0 {
			return c
		}
		return cmp.Compare(a.idx, b.idx)
	})
	ordered = make([]string, len(keys))
	for i, k := range keys {
		ordered[i] = locs[k.idx].name
	}
	crossings, givenCrossings = ringCrossings(g, ordered), ringCrossings(g, nodes)
	return ordered, crossings, givenCrossings, nil
}

// closeLeaves says whether the leaves of nodes a and b are at most one tier
// apart (same leaf, or a common spine), or the nodes share an NVLink domain.
func closeLeaves(g *graph.Graph, a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	p, err := g.Path(graph.GPURef{Node: a}, graph.GPURef{Node: b})
	if err != nil {
		return false
	}
	if p.Class != graph.ClassNET {
		return true
	}
	return p.SwitchHops >= 1 && p.SwitchHops <= 3
}

// ringCrossings counts the ring edges (i → i+1, last → first) that cross
// the spine. A ring of one node has no edges; a ring of two has two.
func ringCrossings(g *graph.Graph, ring []string) int {
	if len(ring) < 2 {
		return 0
	}
	n := 0
	for i, a := range ring {
		if crosses(g, a, ring[(i+1)%len(ring)]) {
			n++
		}
	}
	return n
}

// crosses says whether the path from GPU0 of node a to GPU0 of node b
// crosses the spine: a NET path over more than one switch, or with unknown
// hops. A node without GPU0 counts as a crossing (unknown).
func crosses(g *graph.Graph, a, b string) bool {
	p, err := g.Path(graph.GPURef{Node: a}, graph.GPURef{Node: b})
	if err != nil {
		return true
	}
	if p.Class != graph.ClassNET {
		return false
	}
	return p.SwitchHops != 1
}
