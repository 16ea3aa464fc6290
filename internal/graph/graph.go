package graph

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// Graph is the canonical topology graph of the cluster. It is immutable:
// the With* methods return new graphs that share what they did not change,
// so any number of goroutines may query a *Graph without locking. The zero
// Graph is empty and usable; Build(nil, nil) makes one too.
type Graph struct {
	nodes    cowMap[*node]
	names    nameList       // sorted node names
	gpuOwner cowMap[string] // GPU UUID → node name
	fabric   *fabricIndex
}

// NodeInfo summarises one node.
type NodeInfo struct {
	// NVLinkDomain is "<cluster_uuid>.<clique_id>" when the node's GPUs are in
	// a COMPLETED MNNVL clique, else "".
	NVLinkDomain string
	// LeafSwitch is the leaf switch of the node's first compute port (its
	// description, else its GUID), when the fabric or the inventory's fabric
	// neighbours say.
	LeafSwitch                        string
	NVLinksUp, NVLinksTotal           int
	ComputePortsUp, ComputePortsTotal int
}

// Build builds the graph of the given inventories and fabric (nil for
// none). Inventories are validated; the first inconsistency is returned
// naming the node and the field.
func Build(invs []*ginv1.NodeInventory, fabric *ginv1.FabricTopology) (*Graph, error) {
	fx, err := buildFabric(fabric)
	if err != nil {
		return nil, err
	}
	nodes := make([]*node, len(invs))
	errs := make([]error, len(invs))
	workers := min(runtime.GOMAXPROCS(0), max(1, len(invs)/64))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(invs); i += workers {
				nodes[i], errs[i] = buildNode(invs[i])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	g := &Graph{nodes: newCowMap[*node](nodeShards), gpuOwner: newCowMap[string](gpuShards), fabric: fx}
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if _, dup := g.nodes.get(n.name); dup {
			return nil, fmt.Errorf("node %s: listed twice", n.name)
		}
		for _, gp := range n.gpus {
			if gp.uuid == "" {
				continue
			}
			if owner, taken := g.gpuOwner.get(gp.uuid); taken {
				return nil, fmt.Errorf("node %s: gpus[GPU%d].uuid: %s is also a GPU of node %s", n.name, gp.index, gp.uuid, owner)
			}
			g.gpuOwner.setInPlace(gp.uuid, n.name)
		}
		g.nodes.setInPlace(n.name, n)
		names = append(names, n.name)
	}
	sort.Strings(names)
	g.names = newNameList(names)
	return g, nil
}

// WithNode returns the graph with one node's inventory added or replaced.
// Only that node's structure is rebuilt.
func (g *Graph) WithNode(inv *ginv1.NodeInventory) (*Graph, error) {
	n, sets, dels, existed, err := g.placeNode(inv)
	if err != nil {
		return nil, err
	}
	out := &Graph{
		nodes:    g.nodes.with(map[string]*node{n.name: n}, nil),
		gpuOwner: g.gpuOwner.with(sets, dels),
		fabric:   g.fabric,
		names:    g.names,
	}
	if !existed {
		out.names = g.names.with(n.name)
	}
	return out, nil
}

// CheckNode returns the error WithNode would return for inv, without
// making the new graph: a check at the edge (a master checks every
// inventory before it commits it) that copies none of the graph's
// indexes, whose size grows with the cluster (issue #16).
func (g *Graph) CheckNode(inv *ginv1.NodeInventory) error {
	_, _, _, _, err := g.placeNode(inv)
	return err
}

// placeNode builds inv's node and checks it against g: its GPU UUIDs
// (sets, owned by the node) are no other node's and unique; dels are the
// UUIDs of the node it replaces, if it existed.
func (g *Graph) placeNode(inv *ginv1.NodeInventory) (n *node, sets map[string]string, dels []string, existed bool, err error) {
	n, err = buildNode(inv)
	if err != nil {
		return nil, nil, nil, false, err
	}
	old, existed := g.nodes.get(n.name)
	if existed {
		for _, gp := range old.gpus {
			if gp.uuid != "" {
				dels = append(dels, gp.uuid)
			}
		}
	}
	sets = make(map[string]string, len(n.gpus))
	for _, gp := range n.gpus {
		if gp.uuid == "" {
			continue
		}
		if owner, taken := g.gpuOwner.get(gp.uuid); taken && owner != n.name {
			return nil, nil, nil, false, fmt.Errorf("node %s: gpus[GPU%d].uuid: %s is also a GPU of node %s", n.name, gp.index, gp.uuid, owner)
		}
		if _, dup := sets[gp.uuid]; dup {
			return nil, nil, nil, false, fmt.Errorf("node %s: gpus[GPU%d].uuid: %s used twice", n.name, gp.index, gp.uuid)
		}
		sets[gp.uuid] = n.name
	}
	return n, sets, dels, existed, nil
}

// WithoutNode returns the graph without the named node (the same graph when
// it has no such node).
func (g *Graph) WithoutNode(name string) *Graph {
	old, ok := g.nodes.get(name)
	if !ok {
		return g
	}
	var dels []string
	for _, gp := range old.gpus {
		if gp.uuid != "" {
			dels = append(dels, gp.uuid)
		}
	}
	return &Graph{
		nodes:    g.nodes.with(nil, []string{name}),
		gpuOwner: g.gpuOwner.with(nil, dels),
		fabric:   g.fabric,
		names:    g.names.without(name),
	}
}

// WithFabric returns the graph with the fabric replaced (nil: no fabric).
func (g *Graph) WithFabric(f *ginv1.FabricTopology) (*Graph, error) {
	fx, err := buildFabric(f)
	if err != nil {
		return nil, err
	}
	return &Graph{nodes: g.nodes, gpuOwner: g.gpuOwner, fabric: fx, names: g.names}, nil
}

// Nodes returns the node names, sorted.
func (g *Graph) Nodes() []string { return g.names.all() }

// Len is the number of nodes.
func (g *Graph) Len() int { return g.names.len() }

// NodeInfo summarises a node.
func (g *Graph) NodeInfo(name string) (NodeInfo, bool) {
	n, ok := g.nodes.get(name)
	if !ok {
		return NodeInfo{}, false
	}
	info := NodeInfo{NVLinkDomain: n.info.domain.String(),
		NVLinksUp: int(n.info.nvLinksUp), NVLinksTotal: int(n.info.nvLinksTotal),
		ComputePortsUp: int(n.info.computePortsUp), ComputePortsTotal: int(n.info.computePortsTotal)}
	if len(n.computePort) > 0 {
		a := g.attachment(&n.ports[n.computePort[0]])
		switch {
		case a.sw >= 0:
			info.LeafSwitch = g.fabric.switches[a.sw].name()
		case a.key != "":
			info.LeafSwitch = "0x" + a.key
		}
	}
	return info, true
}

// ResolveGPU finds a GPU by UUID, "node/GPU<index>" or "node/<index>".
func (g *Graph) ResolveGPU(ref string) (GPURef, error) {
	if nodeName, rest, ok := strings.Cut(ref, "/"); ok && !strings.HasPrefix(ref, "GPU-") {
		n, found := g.nodes.get(nodeName)
		if !found {
			return GPURef{}, fmt.Errorf("GPU %q: no node %q in the graph", ref, nodeName)
		}
		idx, err := strconv.ParseUint(strings.TrimPrefix(rest, "GPU"), 10, 32)
		if err != nil {
			return GPURef{}, fmt.Errorf("GPU %q: want node/GPU<index>, node/<index> or a GPU UUID", ref)
		}
		i, found := n.gpuSlot(uint32(idx))
		if !found {
			return GPURef{}, fmt.Errorf("GPU %q: node %s has no GPU%d (it has %d GPUs)", ref, nodeName, idx, len(n.gpus))
		}
		return GPURef{Node: nodeName, Index: int(idx), UUID: n.gpus[i].uuid}, nil
	}
	owner, ok := g.gpuOwner.get(ref)
	if !ok {
		return GPURef{}, fmt.Errorf("GPU %q: no GPU with that UUID (want a GPU UUID, node/GPU<index> or node/<index>)", ref)
	}
	n, _ := g.nodes.get(owner)
	for _, gp := range n.gpus {
		if gp.uuid == ref {
			return GPURef{Node: owner, Index: int(gp.index), UUID: ref}, nil
		}
	}
	return GPURef{}, fmt.Errorf("GPU %q: index out of date (node %s)", ref, owner)
}

// lookup returns a GPU reference's node and GPU slice index.
func (g *Graph) lookup(r GPURef) (*node, int, error) {
	n, ok := g.nodes.get(r.Node)
	if !ok {
		return nil, 0, fmt.Errorf("no node %q in the graph", r.Node)
	}
	if r.Index < 0 || r.Index > int(^uint32(0)) {
		return nil, 0, fmt.Errorf("node %s: GPU index %d out of range", r.Node, r.Index)
	}
	i, ok := n.gpuSlot(uint32(r.Index))
	if !ok {
		return nil, 0, fmt.Errorf("node %s has no GPU%d", r.Node, r.Index)
	}
	return n, i, nil
}

// attach is where a port meets the fabric.
type attach struct {
	sw   int32  // fabric switch index, -1 when the fabric does not know it
	key  string // neighbour switch GUID from the inventory when sw < 0
	mbps uint64 // cable rate
}

// attachment finds a port's leaf: from the fabric by port GUID, else from
// the inventory's fabric neighbours.
func (g *Graph) attachment(p *port) attach {
	nbr := p.nbr.String()
	if g.fabric == nil { // the zero Graph
		return attach{sw: -1, key: nbr, mbps: p.nbrMBps()}
	}
	if p.hasGUIDN() {
		if a, ok := g.fabric.attachN[p.guidN]; ok {
			return attach{sw: a.sw, mbps: a.mbps}
		}
	} else if guid := p.guid.String(); guid != "" {
		if a, ok := g.fabric.attach[guid]; ok {
			return attach{sw: a.sw, mbps: a.mbps}
		}
	}
	if nbr != "" {
		if s, ok := g.fabric.byGUID[nbr]; ok {
			return attach{sw: s, mbps: p.nbrMBps()}
		}
		return attach{sw: -1, key: nbr, mbps: p.nbrMBps()}
	}
	return attach{sw: -1}
}
