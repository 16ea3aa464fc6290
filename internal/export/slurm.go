package export

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gin-topology/gin/internal/devid"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/natsort"
)

// Slurm switch names SlurmTree reserves.
const (
	// UnknownSwitch holds the nodes whose compute ports reach no known switch.
	UnknownSwitch = "unknown"
)

// maxSlurmName is Slurm's limit on SwitchName and BlockName.
const maxSlurmName = 64

// tvertex is one Slurm switch of the tree being built.
type tvertex struct {
	level    int      // 1 for leaf groups
	members  []int    // fabric switches merged into it (indices into the switch list)
	nodes    []string // level 1: its nodes, natural order
	children []*tvertex
	first    string // first node below it (natural order), for stable numbering
	name     string
	comment  []string
}

// SlurmTree writes a Slurm topology.conf for TopologyPlugin=topology/tree
// from the graph's compute fabric (see the package documentation for how
// the Clos tiers are merged into a tree and how switches are named). It
// fails on an empty graph (Slurm must never get an empty tree) and on node
// names that are not valid hostlist names.
func SlurmTree(g *graph.Graph) ([]byte, error) {
	if g == nil || g.Len() == 0 {
		return nil, errors.New("the cluster has no nodes yet, and an empty topology.conf would break slurmctld")
	}
	names := g.Nodes()
	if err := checkNodeNames(names); err != nil {
		return nil, fmt.Errorf("cannot write a Slurm topology.conf: %w", err)
	}
	sortNatural(names)

	sws := g.Switches()
	nFabric := len(sws)
	idx := make(map[string]int, len(sws))
	for i, s := range sws {
		idx[s.GUID] = i
	}
	uf := unionFind{}
	nodeLeaf := map[string]int{} // node → one of its leaves
	usedLeaf := map[int]bool{}
	var unknown []string
	for _, name := range names {
		v, _ := g.NodeView(name)
		first := -1
		for _, h := range v.HCAs {
			for _, p := range h.Ports {
				if p.Rail < 0 || p.Switch == "" {
					continue
				}
				i, ok := idx[p.Switch]
				if !ok { // named only by the node's fabric neighbours
					i = len(sws)
					sws = append(sws, graph.SwitchView{GUID: p.Switch, Tier: 1})
					idx[p.Switch] = i
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

	// Level 1: leaf groups, in the order of their first node.
	var all []*tvertex
	groups := map[int]*tvertex{}
	var cur []*tvertex
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
			cur = append(cur, v)
		}
		v.nodes = append(v.nodes, name)
	}
	consumed := map[int]bool{}
	for l := range usedLeaf {
		v := groups[uf.find(l)]
		v.members = append(v.members, l)
		consumed[l] = true
	}
	for _, v := range cur {
		sort.Ints(v.members)
	}
	all = append(all, cur...)

	// Upper levels: merge the uplinks of the current vertices per connected
	// component, until no vertex has an unconsumed uplink.
	var roots []*tvertex
	for level := 2; len(cur) > 0; level++ {
		parents := make([][]int, len(cur))
		cuf := unionFind{}
		for i, v := range cur {
			set := map[int]bool{}
			for _, m := range v.members {
				for _, u := range sws[m].Uplinks {
					if j, ok := idx[u.GUID]; ok && !consumed[j] {
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
				roots = append(roots, v)
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
		all = append(all, next...)
		cur = next
	}
	if len(unknown) > 0 {
		u := &tvertex{level: 1, nodes: unknown, first: unknown[0], name: UnknownSwitch,
			comment: []string{UnknownSwitch + ": nodes whose compute ports reach no switch known to the fabric scan or to their inventory"}}
		roots = append(roots, u)
		all = append(all, u)
	}
	nameVertices(all, sws)

	var b bytes.Buffer
	b.WriteString("# Slurm topology.conf for TopologyPlugin=topology/tree, written by GIN from its topology graph.\n")
	fmt.Fprintf(&b, "# %d nodes; fabric tiers merged into a tree (switches serving the same nodes are one SwitchName).\n", len(names))
	if len(roots) > 1 {
		tops := make([]string, len(roots))
		for i, r := range roots {
			tops[i] = r.name
		}
		fmt.Fprintf(&b, "# %d separate trees (top switches %s): no switch connects them, so Slurm keeps each job\n", len(roots), strings.Join(tops, ", "))
		b.WriteString("# within one of them (slurmctld logs that no switch reaches all nodes; that is intended).\n")
	}
	for _, v := range all {
		for _, m := range v.members {
			s := sws[m]
			where := fmt.Sprintf("tier %d", s.Tier)
			if m >= nFabric {
				where = "tier 1, known only from node inventories"
			}
			fmt.Fprintf(&b, "# %s: %s %s %s\n", v.name, devid.GUIDText(s.GUID), commentText(s.Description), where)
		}
		for _, c := range v.comment {
			fmt.Fprintf(&b, "# %s\n", c)
		}
		if len(v.children) == 0 {
			fmt.Fprintf(&b, "SwitchName=%s Nodes=%s\n", v.name, hostlist.Compress(v.nodes))
			continue
		}
		kids := make([]string, len(v.children))
		for i, c := range v.children {
			kids[i] = c.name
		}
		fmt.Fprintf(&b, "SwitchName=%s Switches=%s\n", v.name, hostlist.Compress(kids))
	}
	return b.Bytes(), nil
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

func isNameChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// checkNodeNames rejects names a Slurm hostlist cannot carry.
func checkNodeNames(names []string) error {
	for _, n := range names {
		if n == "" {
			return errors.New("empty node name")
		}
		for i := 0; i < len(n); i++ {
			if !isNameChar(n[i]) {
				return fmt.Errorf("node name %q: character %q is not allowed in a Slurm hostlist", n, n[i])
			}
		}
	}
	return nil
}

// SlurmBlock writes a Slurm topology.conf for TopologyPlugin=topology/block:
// one BlockName per MNNVL NVLink domain and a BlockSizes line (see the
// package documentation). Every node must be in an NVLink domain.
func SlurmBlock(g *graph.Graph) ([]byte, error) {
	if g == nil || g.Len() == 0 {
		return nil, errors.New("the cluster has no nodes yet, and an empty topology.conf would break slurmctld")
	}
	names := g.Nodes()
	if err := checkNodeNames(names); err != nil {
		return nil, fmt.Errorf("cannot write a Slurm topology.conf: %w", err)
	}
	sortNatural(names)
	type block struct {
		domain string
		nodes  []string
	}
	var blocks []*block
	byDomain := map[string]*block{}
	var missing []string
	for _, n := range names {
		info, _ := g.NodeInfo(n)
		if info.NVLinkDomain == "" {
			missing = append(missing, n)
			continue
		}
		b := byDomain[info.NVLinkDomain]
		if b == nil {
			b = &block{domain: info.NVLinkDomain}
			byDomain[info.NVLinkDomain] = b
			blocks = append(blocks, b)
		}
		b.nodes = append(b.nodes, n)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("topology/block needs MNNVL NVLink domains, and %d of %d nodes are in none (%s); export slurm (topology/tree) for them instead",
			len(missing), len(names), hostlist.Compress(missing))
	}
	base := len(blocks[0].nodes)
	for _, b := range blocks {
		base = min(base, len(b.nodes))
	}
	sizes := []string{fmt.Sprint(base)}
	for k := 2; k <= len(blocks); k *= 2 {
		sizes = append(sizes, fmt.Sprint(base*k))
	}
	var out bytes.Buffer
	out.WriteString("# Slurm topology.conf for TopologyPlugin=topology/block, written by GIN from its topology graph.\n")
	fmt.Fprintf(&out, "# %d nodes in %d MNNVL NVLink domains (one block each); blocks are paired in this order into larger blocks.\n", len(names), len(blocks))
	for i, b := range blocks {
		name := fmt.Sprintf("block%02d", i+1)
		fmt.Fprintf(&out, "# %s: NVLink domain %s\n", name, commentText(b.domain))
		fmt.Fprintf(&out, "BlockName=%s Nodes=%s\n", name, hostlist.Compress(b.nodes))
	}
	fmt.Fprintf(&out, "BlockSizes=%s\n", strings.Join(sizes, ","))
	return out.Bytes(), nil
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

// commentText quotes free text for a one-line comment.
func commentText(s string) string {
	if s == "" {
		return `""`
	}
	return fmt.Sprintf("%q", s)
}

// sortNatural sorts names so that node2 comes before node10.
func sortNatural(names []string) {
	sort.SliceStable(names, func(i, j int) bool { return natsort.Less(names[i], names[j]) })
}
