package export

import (
	"errors"
	"fmt"
	"sort"

	"github.com/gin-topology/gin/internal/graph"
)

// Topology is the exports' one intermediate model (topograph's shape: the
// graph is translated once, engines only render): the cluster's nodes, its
// compute fabric merged into a tree of Slurm switches, and its MNNVL
// NVLink domains as blocks. SlurmTree renders Tree, SlurmBlock renders
// Blocks, and a node's labels come from Place. It is built by Build and
// not changed after.
type Topology struct {
	// Nodes are the cluster's node names in natural order (node2 before
	// node10), each a valid Slurm hostlist name.
	Nodes []string
	// Tree is the compute fabric as Slurm's topology/tree sees it.
	Tree Tree
	// Blocks are the MNNVL NVLink domains, one block each, in the order
	// of their first node; NoDomain the nodes in none (natural order).
	Blocks   []*Block
	NoDomain []string
}

// Tree is the compute fabric merged into Slurm switches.
type Tree struct {
	// Switches lists every Slurm switch in the order topology.conf
	// writes them: leaf groups first, then level by level, the unknown
	// switch last.
	Switches []*TreeSwitch
	// Roots are the top switches: more than one when fabrics are not
	// connected (or nodes reach no known switch).
	Roots []*TreeSwitch
}

// TreeSwitch is one Slurm switch: a leaf group (Level 1, holding Nodes) or a
// merge of the fabric switches above its Children.
type TreeSwitch struct {
	Name     string
	Level    int      // 1 for leaf groups
	Nodes    []string // level 1: its nodes, natural order
	Children []*TreeSwitch
	Parent   *TreeSwitch // nil for a root
	// Fabric lists the fabric switches merged into it, by index order of
	// the graph's switch list (FromInventory ones after).
	Fabric  []FabricSwitch
	Comment []string // extra comment lines (the unknown switch's reason)
}

// FabricSwitch is one switch of the fabric behind a Slurm switch.
type FabricSwitch struct {
	GUID        string
	Description string
	Tier        uint32
	// FromInventory: named only by the nodes' own fabric neighbours, not
	// by a fabric scan.
	FromInventory bool
}

// Block is one MNNVL NVLink domain.
type Block struct {
	Name   string // block01, block02, ... in the order of their first node
	Domain string // "<cluster_uuid>.<clique_id>"
	Nodes  []string
}

// ErrNoNodes: an empty graph has no topology to export (and an empty
// topology.conf would break slurmctld).
var ErrNoNodes = errors.New("the cluster has no nodes yet, and an empty topology.conf would break slurmctld")

// Build translates the graph into its Topology. It fails on an empty
// graph (ErrNoNodes) and on node names that are not valid hostlist names.
func Build(g *graph.Graph) (*Topology, error) {
	if g == nil || g.Len() == 0 {
		return nil, ErrNoNodes
	}
	names := g.Nodes()
	if err := checkNodeNames(names); err != nil {
		return nil, err
	}
	sortNatural(names)
	t := &Topology{Nodes: names}
	t.Tree = buildTree(g, names)
	t.Blocks, t.NoDomain = buildBlocks(g, names)
	return t, nil
}

// Place is where node sits: its Slurm switches from its leaf group up to
// its root, and its block (nil when it is in no NVLink domain). ok is
// false for a node not in the topology.
func (t *Topology) Place(node string) (path []*TreeSwitch, block *Block, ok bool) {
	for _, s := range t.Tree.Switches {
		if s.Level == 1 && contains(s.Nodes, node) {
			for v := s; v != nil; v = v.Parent {
				path = append(path, v)
			}
			break
		}
	}
	for _, b := range t.Blocks {
		if contains(b.Nodes, node) {
			block = b
			break
		}
	}
	return path, block, path != nil
}

// blockName is the i-th block's name (from 0).
func blockName(i int) string { return fmt.Sprintf("block%02d", i+1) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// buildBlocks groups names (natural order) by NVLink domain.
func buildBlocks(g *graph.Graph, names []string) (blocks []*Block, none []string) {
	byDomain := map[string]*Block{}
	for _, n := range names {
		info, _ := g.NodeInfo(n)
		if info.NVLinkDomain == "" {
			none = append(none, n)
			continue
		}
		b := byDomain[info.NVLinkDomain]
		if b == nil {
			b = &Block{Domain: info.NVLinkDomain}
			byDomain[info.NVLinkDomain] = b
			blocks = append(blocks, b)
		}
		b.Nodes = append(b.Nodes, n)
	}
	for i, b := range blocks {
		b.Name = blockName(i)
	}
	return blocks, none
}

// tvertex is one Slurm switch of the tree being built (indices into the
// switch list: merging works on them before the switches are named).
type tvertex struct {
	level    int      // 1 for leaf groups
	members  []int    // fabric switches merged into it (indices into the switch list)
	nodes    []string // level 1: its nodes, natural order
	children []*tvertex
	first    string // first node below it (natural order), for stable numbering
	name     string
	comment  []string
}

// treeBuild is one tree being built: the fabric's switches (the graph's,
// then those known only from inventories, from nFabric on) and the
// vertices made so far.
type treeBuild struct {
	g       *graph.Graph
	sws     []graph.SwitchView
	nFabric int
	idx     map[string]int // GUID → index into sws
	all     []*tvertex
	roots   []*tvertex
}

// buildTree follows the package documentation's four steps: compute
// ports to leaves, leaf groups, tiers merged upwards, the unknown switch;
// then the switches are named.
func buildTree(g *graph.Graph, names []string) Tree {
	sws := g.Switches()
	b := &treeBuild{g: g, sws: sws, nFabric: len(sws), idx: make(map[string]int, len(sws))}
	for i, s := range sws {
		b.idx[s.GUID] = i
	}
	cur, consumed, unknown := b.leafGroups(names)
	b.mergeUp(cur, consumed)
	if len(unknown) > 0 {
		u := &tvertex{level: 1, nodes: unknown, first: unknown[0], name: UnknownSwitch,
			comment: []string{UnknownSwitch + ": nodes whose compute ports reach no switch known to the fabric scan or to their inventory"}}
		b.roots = append(b.roots, u)
		b.all = append(b.all, u)
	}
	nameVertices(b.all, b.sws)
	return b.tree()
}

// leafGroups (steps 1 and 2): each node's compute ports to their leaves,
// leaves serving a common node one group, in the order of their first
// node; the nodes reaching no switch are returned apart.
func (b *treeBuild) leafGroups(names []string) (groupsInOrder []*tvertex, consumed map[int]bool, unknown []string) {
	uf := unionFind{}
	nodeLeaf := map[string]int{} // node → one of its leaves
	usedLeaf := map[int]bool{}
	for _, name := range names {
		v, _ := b.g.NodeView(name)
		first := -1
		for _, h := range v.HCAs {
			for _, p := range h.Ports {
				if p.Rail < 0 || p.Switch == "" {
					continue
				}
				i, ok := b.idx[p.Switch]
				if !ok { // named only by the node's fabric neighbours
					i = len(b.sws)
					b.sws = append(b.sws, graph.SwitchView{GUID: p.Switch, Tier: 1})
					b.idx[p.Switch] = i
				}
				usedLeaf[i] = true
				if first < 0 {
					first = i
				} else {
					uf.union(first, i)
				}
			}
		}
		if first < 0 {
			unknown = append(unknown, name)
			continue
		}
		nodeLeaf[name] = first
	}
	groups := map[int]*tvertex{}
	for _, name := range names {
		l, ok := nodeLeaf[name]
		if !ok {
			continue
		}
		r := uf.find(l)
		v := groups[r]
		if v == nil {
			v = &tvertex{level: 1, first: name}
			groups[r] = v
			groupsInOrder = append(groupsInOrder, v)
		}
		v.nodes = append(v.nodes, name)
	}
	consumed = map[int]bool{}
	for l := range usedLeaf {
		v := groups[uf.find(l)]
		v.members = append(v.members, l)
		consumed[l] = true
	}
	for _, v := range groupsInOrder {
		sort.Ints(v.members)
	}
	b.all = append(b.all, groupsInOrder...)
	return groupsInOrder, consumed, unknown
}

// mergeUp (step 3): the uplinks of the current vertices merged per
// connected component, level by level, until no vertex has an unconsumed
// uplink; a vertex without one is a root.
func (b *treeBuild) mergeUp(cur []*tvertex, consumed map[int]bool) {
	for level := 2; len(cur) > 0; level++ {
		parents := make([][]int, len(cur))
		cuf := unionFind{}
		for i, v := range cur {
			set := map[int]bool{}
			for _, m := range v.members {
				for _, u := range b.sws[m].Uplinks {
					if j, ok := b.idx[u.GUID]; ok && !consumed[j] {
						set[j] = true
					}
				}
			}
			for j := range set {
				parents[i] = append(parents[i], j)
				cuf.union(-1-i, j)
			}
			sort.Ints(parents[i])
		}
		comp := map[int]*tvertex{}
		var next []*tvertex
		for i, v := range cur {
			if len(parents[i]) == 0 {
				b.roots = append(b.roots, v)
				continue
			}
			r := cuf.find(-1 - i)
			nv := comp[r]
			if nv == nil {
				nv = &tvertex{level: level, first: v.first}
				comp[r] = nv
				next = append(next, nv)
			}
			nv.children = append(nv.children, v)
			for _, p := range parents[i] {
				if !consumed[p] {
					consumed[p] = true
					nv.members = append(nv.members, p)
				}
			}
		}
		for _, nv := range next {
			sort.Ints(nv.members)
		}
		b.all = append(b.all, next...)
		cur = next
	}
}

// tree turns the named vertices into the model's switches.
func (b *treeBuild) tree() Tree {
	of := make(map[*tvertex]*TreeSwitch, len(b.all))
	var t Tree
	for _, v := range b.all {
		s := &TreeSwitch{Name: v.name, Level: v.level, Nodes: v.nodes, Comment: v.comment}
		for _, m := range v.members {
			sw := b.sws[m]
			s.Fabric = append(s.Fabric, FabricSwitch{GUID: sw.GUID, Description: sw.Description, Tier: sw.Tier, FromInventory: m >= b.nFabric})
		}
		of[v] = s
		t.Switches = append(t.Switches, s)
	}
	for _, v := range b.all {
		for _, c := range v.children {
			of[v].Children = append(of[v].Children, of[c])
			of[c].Parent = of[v]
		}
	}
	for _, r := range b.roots {
		t.Roots = append(t.Roots, of[r])
	}
	return t
}
