package estimate

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/costmodel"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/inventory"
	"github.com/gin-topology/gin/internal/natsort"
)

// Placement classes, in the order ForGPUCount returns them.
const (
	PlacementNVLinkDomain = "nvlink-domain"
	PlacementNodePCIe     = "node-pcie"
	PlacementOneLeaf      = "one-leaf"
	PlacementSpine        = "spine"
	PlacementEthernet     = "ethernet"
)

// maxProbeGPUs bounds the GPU index probe (the graph allows 64 per node).
const maxProbeGPUs = 64

// nodeSum is what the placement search knows of one node.
type nodeSum struct {
	name    string
	info    graph.NodeInfo
	gpus    int  // GPUs with indices 0..gpus-1
	healthy bool // every NVLink and compute port is up
	free    bool

	intra    int8 // 0 unknown, 1 GPU0–GPU1 is NVLink, -1 it is not (or < 2 GPUs)
	ethernet int8 // 0 unknown, 1 Ethernet compute ports, -1 not
}

// take is some GPUs of one node.
type take struct {
	n    *nodeSum
	gpus int
}

// cluster is the state of one ForGPUCount call.
type cluster struct {
	g          *graph.Graph
	ethernetOf func(string) bool
	nodes      []*nodeSum // healthy first, then natural name order
	total      int
}

// ForGPUCount returns, for n GPUs, every placement class in a fixed order
// (nvlink-domain, node-pcie, one-leaf, spine, ethernet): whether the cluster
// can offer it now from nodes not in busy (the caller puts nodes taken by
// pinned plans, down or draining nodes there; names the graph does not hold
// are ignored), the GPUs it would pick, the prediction of the workload's
// collective on them and the workload's speedup and efficiency.
//
// The graph does not expose the link layer of a port, so ForGPUCount sees
// Ethernet nodes only through costmodel.ShapeOf (which cannot tell either,
// yet); callers holding the inventories use ForGPUCountWith and
// EthernetFromInventories.
func ForGPUCount(g *graph.Graph, n int, busy map[string]bool, w *ginv1.Workload) ([]*ginv1.PlacementEstimate, error) {
	return ForGPUCountWith(g, n, busy, w, Options{})
}

// Options tune ForGPUCountWith.
type Options struct {
	// Ethernet says whether a node's compute ports are Ethernet (RoCE); nil
	// asks the cost model (Shape.Ethernet of the node alone).
	Ethernet func(node string) bool
}

// EthernetFromInventories returns an Options.Ethernet that says true for
// the nodes whose compute ports (HCAs of role COMPUTE, else of unspecified
// role; never storage) are all Ethernet (inventory.ComputeEthernet).
func EthernetFromInventories(invs []*ginv1.NodeInventory) func(node string) bool {
	eth := map[string]bool{}
	for _, inv := range invs {
		if inventory.ComputeEthernet(inv) {
			eth[inv.GetNodeName()] = true
		}
	}
	return func(node string) bool { return eth[node] }
}

// ForGPUCountWith is ForGPUCount with options.
func ForGPUCountWith(g *graph.Graph, n int, busy map[string]bool, w *ginv1.Workload, opts Options) ([]*ginv1.PlacementEstimate, error) {
	if g == nil {
		return nil, errors.New("estimate: no graph")
	}
	if n < 1 {
		return nil, fmt.Errorf("estimate: %d GPUs: want at least 1", n)
	}
	wl, err := resolveWorkload(w)
	if err != nil {
		return nil, fmt.Errorf("estimate: %w", err)
	}
	c := newCluster(g, busy)
	c.ethernetOf = opts.Ethernet
	if n > c.total {
		return nil, fmt.Errorf("estimate: %d GPUs: the cluster has %d", n, c.total)
	}
	out := make([]*ginv1.PlacementEstimate, 0, 5)
	for _, class := range []struct {
		name, desc string
		pick       func(int) ([]take, string, string)
	}{
		{PlacementNVLinkDomain, "all GPUs in one NVLink domain (one node, or one MNNVL clique)", c.pickNVLinkDomain},
		{PlacementNodePCIe, "all GPUs in one node without NVLink between them (PCIe)", c.pickNodePCIe},
		{PlacementOneLeaf, "InfiniBand nodes under one leaf switch", c.pickOneLeaf},
		{PlacementSpine, "InfiniBand nodes under different leaf switches, across the spine", c.pickSpine},
		{PlacementEthernet, "nodes with Ethernet (RoCE) compute ports", c.pickEthernet},
	} {
		pe := &ginv1.PlacementEstimate{Placement: class.name, Description: class.desc}
		takes, detail, reason := class.pick(n)
		if takes == nil {
			pe.Reason = reason
			out = append(out, pe)
			continue
		}
		pe.Available = true
		if detail != "" {
			pe.Description += ": " + detail
		}
		for _, t := range takes {
			for i := range t.gpus {
				pe.Gpus = append(pe.Gpus, gpuName(t.n.name, i))
			}
		}
		if pe.Prediction, err = c.predict(takes, n, wl); err != nil {
			return nil, fmt.Errorf("estimate: %s: %w", class.name, err)
		}
		commUs := pe.Prediction.TimeUs
		pe.Speedup, pe.Efficiency = wl.scale(n, commUs)
		out = append(out, pe)
	}
	return out, nil
}

func newCluster(g *graph.Graph, busy map[string]bool) *cluster {
	names := g.Nodes()
	c := &cluster{g: g, nodes: make([]*nodeSum, 0, len(names))}
	for _, name := range names {
		info, _ := g.NodeInfo(name)
		ns := &nodeSum{
			name: name, info: info, gpus: gpuCount(g, name), free: !busy[name],
			healthy: info.NVLinksUp == info.NVLinksTotal && info.ComputePortsUp == info.ComputePortsTotal,
		}
		c.total += ns.gpus
		c.nodes = append(c.nodes, ns)
	}
	slices.SortStableFunc(c.nodes, func(a, b *nodeSum) int {
		if a.healthy != b.healthy {
			if a.healthy {
				return -1
			}
			return 1
		}
		return natsort.Compare(a.name, b.name)
	})
	return c
}

// gpuCount is the number of GPUs of a node whose indices run 0..n-1 (real
// nodes number their GPUs densely), found by binary search.
func gpuCount(g *graph.Graph, name string) int {
	has := func(i int) bool {
		r := graph.GPURef{Node: name, Index: i}
		_, err := g.Path(r, r)
		return err == nil
	}
	lo, hi := 0, maxProbeGPUs+1 // has(lo-1) holds, has(hi) does not
	if !has(0) {
		return 0
	}
	lo = 1
	for lo < hi {
		mid := (lo + hi) / 2
		if has(mid) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// nvlinked says whether GPU0 and GPU1 of the node talk over NVLink.
func (c *cluster) nvlinked(ns *nodeSum) bool {
	if ns.intra == 0 {
		ns.intra = -1
		if ns.gpus >= 2 {
			if p, err := c.g.Path(graph.GPURef{Node: ns.name}, graph.GPURef{Node: ns.name, Index: 1}); err == nil && p.Class == graph.ClassNVLink {
				ns.intra = 1
			}
		}
	}
	return ns.intra > 0
}

// nvlinkAll says whether GPUs 0..k-1 of the node are pairwise NVLinked.
func (c *cluster) nvlinkAll(ns *nodeSum, k int) bool {
	if k > ns.gpus || !c.nvlinked(ns) {
		return false
	}
	for i := range k {
		for j := i + 1; j < k; j++ {
			if i == 0 && j == 1 {
				continue
			}
			p, err := c.g.Path(graph.GPURef{Node: ns.name, Index: i}, graph.GPURef{Node: ns.name, Index: j})
			if err != nil || p.Class != graph.ClassNVLink {
				return false
			}
		}
	}
	return true
}

// isEthernet says whether the node's compute fabric is Ethernet (RoCE), as
// the cost model sees it.
func (c *cluster) isEthernet(ns *nodeSum) bool {
	if ns.ethernet == 0 {
		ns.ethernet = -1
		if c.ethernetOf != nil {
			if c.ethernetOf(ns.name) {
				ns.ethernet = 1
			}
		} else if s, err := costmodel.ShapeOf(c.g, []string{ns.name}, 0); err == nil && s.Ethernet {
			ns.ethernet = 1
		}
	}
	return ns.ethernet > 0
}

// scaleOut says whether a node can join a multi-node placement: it has
// GPUs and an up compute port.
func scaleOut(ns *nodeSum) bool { return ns.gpus > 0 && ns.info.ComputePortsUp > 0 }

// pickNVLinkDomain: one free node with n pairwise NVLinked GPUs, else whole
// nodes of one MNNVL clique.
func (c *cluster) pickNVLinkDomain(n int) ([]take, string, string) {
	largest, largestFree := 0, 0
	for _, ns := range c.nodes {
		if !c.nvlinked(ns) {
			continue
		}
		largest = max(largest, ns.gpus)
		if ns.free {
			largestFree = max(largestFree, ns.gpus)
		}
		if ns.free && c.nvlinkAll(ns, n) {
			return []take{{ns, n}}, fmt.Sprintf("%d GPUs of %s", n, ns.name), ""
		}
	}
	type clique struct {
		name        string
		nodes       []*nodeSum
		total, free int
	}
	var cliques []*clique
	byName := map[string]*clique{}
	for _, ns := range c.nodes {
		d := ns.info.NVLinkDomain
		if d == "" || ns.gpus == 0 {
			continue
		}
		cq := byName[d]
		if cq == nil {
			cq = &clique{name: d}
			byName[d] = cq
			cliques = append(cliques, cq)
		}
		cq.total += ns.gpus
		if ns.free {
			cq.free += ns.gpus
			cq.nodes = append(cq.nodes, ns)
		}
	}
	for _, cq := range cliques {
		largest = max(largest, cq.total)
		largestFree = max(largestFree, cq.free)
		if cq.free < n || len(cq.nodes) < 2 {
			continue
		}
		takes := fill(cq.nodes, n)
		return takes, fmt.Sprintf("%d GPUs on %d nodes of MNNVL clique %s", n, len(takes), cq.name), ""
	}
	switch {
	case largest == 0:
		return nil, "", "no node has NVLink between its GPUs"
	case largest < n:
		what := "one node"
		if len(cliques) > 0 {
			what = "one node or MNNVL clique"
		}
		return nil, "", fmt.Sprintf("the largest NVLink domain (%s) has %d GPUs; %d GPUs span more than one", what, largest, n)
	default:
		return nil, "", fmt.Sprintf("no NVLink domain has %d free GPUs (at most %d free in one); the rest are busy", n, largestFree)
	}
}

// pickNodePCIe: one free node with at least n GPUs and no NVLink between
// GPU0 and GPU1.
func (c *cluster) pickNodePCIe(n int) ([]take, string, string) {
	largest := 0
	for _, ns := range c.nodes {
		if ns.gpus == 0 || c.nvlinked(ns) {
			continue
		}
		largest = max(largest, ns.gpus)
		if ns.free && ns.gpus >= n {
			return []take{{ns, n}}, fmt.Sprintf("%d GPUs of %s", n, ns.name), ""
		}
	}
	switch {
	case largest == 0:
		return nil, "", "every node connects its GPUs with NVLink"
	case largest < n:
		return nil, "", fmt.Sprintf("the largest node without NVLink has %d GPUs", largest)
	default:
		return nil, "", fmt.Sprintf("no node without NVLink with %d GPUs is free", n)
	}
}

// fill takes whole nodes in order, then part of the last one. n GPUs that
// fit in the first node are split over two nodes (a multi-node placement
// needs two): ⌈n/2⌉ and ⌊n/2⌋. nil when the nodes hold too few GPUs.
func fill(nodes []*nodeSum, n int) []take {
	if len(nodes) < 2 || n < 2 {
		return nil
	}
	if nodes[0].gpus >= n {
		if nodes[1].gpus < n/2 {
			return nil
		}
		return []take{{nodes[0], n - n/2}, {nodes[1], n / 2}}
	}
	var out []take
	left := n
	for _, ns := range nodes {
		k := min(ns.gpus, left)
		if k == 0 {
			continue
		}
		out = append(out, take{ns, k})
		if left -= k; left == 0 {
			return out
		}
	}
	return nil
}

// leafGroups groups nodes by leaf switch in order of their first node; nodes
// with an unknown leaf are left out.
func leafGroups(nodes []*nodeSum) (groups [][]*nodeSum) {
	idx := map[string]int{}
	for _, ns := range nodes {
		leaf := ns.info.LeafSwitch
		if leaf == "" {
			continue
		}
		i, ok := idx[leaf]
		if !ok {
			i = len(groups)
			idx[leaf] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], ns)
	}
	return groups
}

// scaleOutPool returns the free nodes that can join a multi-node placement
// and whose compute fabric is Ethernet (eth) or not, and whether the
// cluster has any such node at all.
func (c *cluster) scaleOutPool(eth bool) (free []*nodeSum, any bool) {
	for _, ns := range c.nodes {
		if !scaleOut(ns) || c.isEthernet(ns) != eth {
			continue
		}
		any = true
		if ns.free {
			free = append(free, ns)
		}
	}
	return free, any
}

// cliqueReason is why a scale-out class is not offered when its nodes would
// all be in one MNNVL clique (NCCL would use NVLink, not the network).
const cliqueReason = "the free nodes it would take are all in one MNNVL clique: that is the nvlink-domain placement"

// oneClique says whether every picked node is in the same MNNVL clique.
func oneClique(takes []take) bool {
	d := takes[0].n.info.NVLinkDomain
	if d == "" {
		return false
	}
	for _, t := range takes[1:] {
		if t.n.info.NVLinkDomain != d {
			return false
		}
	}
	return true
}

func sumGPUs(nodes []*nodeSum) int {
	s := 0
	for _, ns := range nodes {
		s += ns.gpus
	}
	return s
}

// pickOneLeaf: the first leaf switch whose free InfiniBand nodes hold n
// GPUs on at least two nodes.
func (c *cluster) pickOneLeaf(n int) ([]take, string, string) {
	if n < 2 {
		return nil, "", "1 GPU needs no second node"
	}
	pool, any := c.scaleOutPool(false)
	if !any {
		return nil, "", "no node has InfiniBand compute ports"
	}
	groups := leafGroups(pool)
	best, bestLeaf, clique := 0, "", false
	for _, grp := range groups {
		if t := fill(grp, n); t != nil {
			if oneClique(t) {
				clique = true
				continue
			}
			return t, fmt.Sprintf("%d GPUs on %d nodes under leaf %s", n, len(t), grp[0].info.LeafSwitch), ""
		}
		if s := sumGPUs(grp); s > best {
			best, bestLeaf = s, grp[0].info.LeafSwitch
		}
	}
	switch {
	case clique:
		return nil, "", cliqueReason
	case len(pool) == 0:
		return nil, "", "no InfiniBand node is free"
	case len(groups) == 0:
		return nil, "", "the fabric does not say which leaf switch the free nodes are under"
	default:
		return nil, "", fmt.Sprintf("no leaf switch has %d free GPUs on two or more nodes (most: %d under %s)", n, best, bestLeaf)
	}
}

// pickSpine: free InfiniBand nodes taken round-robin over the leaf switches
// (in order of their first node), as a scheduler blind to the topology
// would, so the placement crosses the spine.
func (c *cluster) pickSpine(n int) ([]take, string, string) {
	if n < 2 {
		return nil, "", "1 GPU needs no second node"
	}
	pool, any := c.scaleOutPool(false)
	if !any {
		return nil, "", "no node has InfiniBand compute ports"
	}
	groups := leafGroups(pool)
	if len(groups) < 2 {
		switch {
		case len(pool) == 0:
			return nil, "", "no InfiniBand node is free"
		case len(groups) == 1:
			return nil, "", "all free InfiniBand nodes are under one leaf switch"
		}
		return nil, "", "the fabric does not say which leaf switches the free nodes are under"
	}
	grouped := 0
	for _, grp := range groups {
		grouped += len(grp)
	}
	var rr []*nodeSum
	for i := 0; len(rr) < grouped; i++ {
		for _, grp := range groups {
			if i < len(grp) {
				rr = append(rr, grp[i])
			}
		}
	}
	t := fill(rr, n)
	if t == nil {
		return nil, "", fmt.Sprintf("the free InfiniBand nodes under known leaf switches hold %d GPUs", sumGPUs(rr))
	}
	if oneClique(t) {
		return nil, "", cliqueReason
	}
	leaves := map[string]bool{}
	for _, tk := range t {
		leaves[tk.n.info.LeafSwitch] = true
	}
	return t, fmt.Sprintf("%d GPUs on %d nodes under %d leaf switches", n, len(t), len(leaves)), ""
}

// pickEthernet: free Ethernet (RoCE) nodes, under one leaf switch when one
// has enough, else in name order across leaves.
func (c *cluster) pickEthernet(n int) ([]take, string, string) {
	if n < 2 {
		return nil, "", "1 GPU needs no second node"
	}
	pool, any := c.scaleOutPool(true)
	if !any {
		return nil, "", "no node has Ethernet (RoCE) compute ports"
	}
	groups := leafGroups(pool)
	for _, grp := range groups {
		if t := fill(grp, n); t != nil && !oneClique(t) {
			return t, fmt.Sprintf("%d GPUs on %d nodes under leaf %s", n, len(t), grp[0].info.LeafSwitch), ""
		}
	}
	if t := fill(pool, n); t != nil {
		if oneClique(t) {
			return nil, "", cliqueReason
		}
		return t, fmt.Sprintf("%d GPUs on %d nodes", n, len(t)), ""
	}
	return nil, "", fmt.Sprintf("the free Ethernet nodes hold %d GPUs on %d nodes", sumGPUs(pool), len(pool))
}

// predict predicts the workload's collective on the picked GPUs. The shape
// is that of the smallest per-node share (the node with the fewest ranks
// drives the fewest NICs: the bottleneck), with the true rank count.
func (c *cluster) predict(takes []take, n int, wl workload) (*ginv1.Prediction, error) {
	names := make([]string, len(takes))
	per := takes[0].gpus
	for i, t := range takes {
		names[i] = t.n.name
		per = min(per, t.gpus)
	}
	if n == 1 {
		return predict(costmodel.Shape{NRanks: 1, NNodes: 1}, wl.coll, wl.bytes)
	}
	s, err := costmodel.ShapeOf(c.g, names, per)
	if err != nil {
		return nil, fmt.Errorf("nodes %s: %w", strings.Join(names, ","), err)
	}
	s.NRanks = n
	// The cost model cannot see the link layer: tell it what we know.
	eth := true
	for _, t := range takes {
		eth = eth && c.isEthernet(t.n)
	}
	s.Ethernet = s.Ethernet || eth && s.NNodes > 1
	return predict(s, wl.coll, wl.bytes)
}
