package export

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gin-topology/gin/internal/graph"
)

// This file builds the model's Tree from the graph's switches and the
// model's hosts (the package documentation's four steps), and names its
// switches.

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
	t       *Topology
	sws     []graph.SwitchView
	nFabric int
	idx     map[string]int // GUID → index into sws
	all     []*tvertex
	roots   []*tvertex
}

// buildTree follows the package documentation's four steps: compute
// ports to leaves, leaf groups, tiers merged upwards, the unknown switch;
// then the switches are named.
func buildTree(sws []graph.SwitchView, t *Topology) Tree {
	b := &treeBuild{t: t, sws: sws, nFabric: len(sws), idx: make(map[string]int, len(sws))}
	for i, s := range sws {
		b.idx[s.GUID] = i
	}
	cur, consumed, unknown := b.leafGroups(t.Nodes)
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
		first := -1
		for _, h := range b.t.hostIndex[name].HCAs {
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
			s.Fabric = append(s.Fabric, FabricSwitch{GUID: sw.GUID, Description: sw.Description, Tier: sw.Tier, FromInventory: m >= b.nFabric,
				DownMBps: sw.DownMBps, UpMBps: sw.UpMBps})
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

// nameVertices names the Slurm switches: after the fabric switch when a
// vertex is exactly one switch with a usable, unique description, else
// leafNN/spineNN/coreNN/tierK-NN by level in order.
func nameVertices(all []*tvertex, sws []graph.SwitchView) {
	taken := map[string]bool{UnknownSwitch: true}
	count := map[string]int{}
	for _, v := range all {
		if v.name == "" && len(v.members) == 1 {
			if n := slurmName(sws[v.members[0]].Description); n != "" {
				count[strings.ToLower(n)]++
			}
		}
	}
	for _, v := range all {
		if v.name == "" && len(v.members) == 1 {
			n := slurmName(sws[v.members[0]].Description)
			if n != "" && count[strings.ToLower(n)] == 1 && !taken[strings.ToLower(n)] {
				v.name = n
				taken[strings.ToLower(n)] = true
			}
		}
	}
	seq := map[string]int{}
	for _, v := range all {
		if v.name != "" {
			continue
		}
		var prefix string
		switch v.level {
		case 1:
			prefix = "leaf"
		case 2:
			prefix = "spine"
		case 3:
			prefix = "core"
		default:
			prefix = fmt.Sprintf("tier%d-", v.level)
		}
		for {
			seq[prefix]++
			n := fmt.Sprintf("%s%02d", prefix, seq[prefix])
			if !taken[strings.ToLower(n)] {
				v.name = n
				taken[n] = true
				break
			}
		}
	}
}

// slurmName derives a Slurm switch name from a switch description: the
// hostname of an NVIDIA "MF0;<host>:<model>/U1" description, else the whole
// description; characters outside [A-Za-z0-9._-] become '-'. "" when nothing
// usable is left or the name is longer than Slurm allows.
func slurmName(desc string) string {
	d := strings.TrimSpace(desc)
	if rest, ok := strings.CutPrefix(d, "MF0;"); ok {
		if host, _, ok := strings.Cut(rest, ":"); ok {
			d = host
		}
	}
	var b strings.Builder
	dash := false
	for i := 0; i < len(d); i++ {
		c := d[i]
		if isNameChar(c) {
			b.WriteByte(c)
			dash = c == '-'
			continue
		}
		if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	s := strings.Trim(b.String(), "-.")
	if len(s) > maxSlurmName {
		return ""
	}
	return s
}

// unionFind is a union-find over ints.
type unionFind map[int]int

func (u unionFind) find(x int) int {
	p, ok := u[x]
	if !ok || p == x {
		return x
	}
	r := u.find(p)
	u[x] = r
	return r
}

func (u unionFind) union(a, b int) {
	ra, rb := u.find(a), u.find(b)
	if ra == rb {
		return
	}
	if rb < ra {
		ra, rb = rb, ra
	}
	u[rb] = ra
}
