package graph

import (
	"fmt"
	"strconv"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// vertex is one PCIe bridge of a node's tree (24 bytes: a node has tens).
// Indices fit int16: a node has at most maxBridges bridges.
type vertex struct {
	id       istr  // as the inventory has it
	parent   int16 // -1 for a root (host bridge)
	depth    int16 // 0 for a root
	root     int16 // index of the root above it
	kind     vertexKind
	numa     int32  // the root's NUMA node (children inherit it), -1 unknown
	linkMBps uint32 // link to the parent, 0 unknown (pcieMBps fits)
}

// vertexKind says what a bridge is, as bits.
type vertexKind uint8

const (
	vertexSwitch vertexKind = 1 << iota
	// vertexDownstream: a downstream port of the switch above it (part of it).
	vertexDownstream
	// vertexRootPort: a root port of the host bridge above it (part of it).
	vertexRootPort
)

func (v *vertex) isSwitch() bool   { return v.kind&vertexSwitch != 0 }
func (v *vertex) downstream() bool { return v.kind&vertexDownstream != 0 }
func (v *vertex) rootPort() bool   { return v.kind&vertexRootPort != 0 }

// pcieDev is a device's place in the PCIe tree.
type pcieDev struct {
	parent int16 // vertex index, -1 when the inventory does not say
	// c2c: the device is a GPU attached to its CPU over a chip-to-chip link
	// (NVLink-C2C on Grace): linkMBps is then that link's bandwidth, and
	// the GPU reaches every PCIe device outside its own root through the
	// CPU (nvidia-smi prints SYS; NCCL calls the GPU→C2C→CPU→PCIe→NIC path
	// P2C).
	c2c      bool
	numa     int32
	linkMBps uint32 // PCIe link (pcieMBps) or C2C links (at most maxC2CLinks × maxC2CLinkMBps)
}

// buildPCIe builds the tree, rejecting unknown parents, cycles and
// duplicate ids. It returns the bridge index by normalised id.
func (n *node) buildPCIe(bs []*ginv1.PcieBridge) (map[string]int, error) {
	byID := make(map[string]int, len(bs))
	n.verts = make([]vertex, len(bs))
	for i, b := range bs {
		if b == nil {
			return nil, fmt.Errorf("pcie_bridges[%d]: null", i)
		}
		id := normPCI(b.Id)
		if id == "" {
			return nil, fmt.Errorf("pcie_bridges[%d].id: empty", i)
		}
		if j, dup := byID[id]; dup {
			return nil, fmt.Errorf("pcie_bridges[%d].id: %q is also pcie_bridges[%d]", i, b.Id, j)
		}
		byID[id] = i
		v := vertex{id: intern(b.Id), parent: -1, depth: -1, numa: b.NumaNode}
		switch b.Kind {
		case ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH:
			v.kind = vertexSwitch
		case ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH_DOWNSTREAM_PORT:
			v.kind = vertexSwitch | vertexDownstream
		case ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_ROOT_PORT:
			v.kind = vertexRootPort
		}
		if b.Link != nil {
			v.linkMBps = uint32(pcieMBps(b.Link.Generation, b.Link.Width))
		}
		n.verts[i] = v
	}
	for i, b := range bs {
		if b.ParentId == "" {
			continue
		}
		if b.Kind == ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_HOST_BRIDGE {
			return nil, fmt.Errorf("pcie_bridges[%d].parent_id: host bridge %q has a parent %q", i, b.Id, b.ParentId)
		}
		p, ok := byID[normPCI(b.ParentId)]
		if !ok {
			return nil, fmt.Errorf("pcie_bridges[%d].parent_id: %q is not a bridge of the node", i, b.ParentId)
		}
		n.verts[i].parent = int16(p)
	}
	// Depths and roots, iteratively; a walk longer than the bridge count is a cycle.
	for i := range n.verts {
		if n.verts[i].depth >= 0 {
			continue
		}
		var chain []int16
		v := int16(i)
		for v >= 0 && n.verts[v].depth < 0 {
			chain = append(chain, v)
			if len(chain) > len(n.verts) {
				return nil, fmt.Errorf("pcie_bridges[%d].parent_id: the parent chain of %q is a cycle", i, bs[i].Id)
			}
			v = n.verts[v].parent
		}
		for k := len(chain) - 1; k >= 0; k-- {
			c := &n.verts[chain[k]]
			if c.parent < 0 {
				c.depth, c.root = 0, chain[k]
				continue
			}
			p := &n.verts[c.parent]
			c.depth, c.root = p.depth+1, p.root
			c.numa = n.verts[p.root].numa
		}
	}
	return byID, nil
}

// device places a device (GPU or HCA) under its parent bridge.
func (n *node) device(parent string, link *ginv1.PcieLink, numa int32, byID map[string]int) (pcieDev, error) {
	d := pcieDev{parent: -1, numa: numa}
	if link != nil {
		d.linkMBps = uint32(pcieMBps(link.Generation, link.Width))
	}
	if parent == "" {
		return d, nil
	}
	p, ok := byID[normPCI(parent)]
	if !ok {
		return d, fmt.Errorf("%q is not a bridge of the node", parent)
	}
	d.parent = int16(p)
	if rn := n.verts[n.verts[p].root].numa; rn >= 0 {
		d.numa = rn
	}
	return d, nil
}

// pcieClass classifies the PCIe path between two devices exactly as
// nvidia-smi does, and returns its bottleneck bandwidth:
//   - lowest common ancestor a switch, both devices directly on it: PIX;
//   - lowest common ancestor a switch otherwise: PXB;
//   - lowest common ancestor the host bridge: PHB;
//   - different host bridges on the same NUMA node: NODE;
//   - different NUMA nodes (or unknown): SYS, capped by the inter-socket
//     bandwidth when the sockets differ.
func (n *node) pcieClass(a, b pcieDev) (Class, uint64) {
	cls, mbps, _ := n.pcieWalk(a, b, nil)
	return cls, mbps
}

// pcieWalk is pcieClass that also appends the bridges on the path to hops
// when hops is non-nil.
func (n *node) pcieWalk(a, b pcieDev, hops *[]Hop) (Class, uint64, int) {
	bw := minNZ(uint64(a.linkMBps), uint64(b.linkMBps))
	if a.parent < 0 || b.parent < 0 {
		return n.acrossRoots(a, b, bw, hops)
	}
	x, y := int(a.parent), int(b.parent)
	var up, down []int
	for n.verts[x].depth > n.verts[y].depth {
		bw = minNZ(bw, uint64(n.verts[x].linkMBps))
		if hops != nil {
			up = append(up, x)
		}
		x = int(n.verts[x].parent)
	}
	for n.verts[y].depth > n.verts[x].depth {
		bw = minNZ(bw, uint64(n.verts[y].linkMBps))
		if hops != nil {
			down = append(down, y)
		}
		y = int(n.verts[y].parent)
	}
	for x != y && n.verts[x].parent >= 0 {
		bw = minNZ(bw, minNZ(uint64(n.verts[x].linkMBps), uint64(n.verts[y].linkMBps)))
		if hops != nil {
			up, down = append(up, x), append(down, y)
		}
		x, y = int(n.verts[x].parent), int(n.verts[y].parent)
	}
	if x != y { // different roots
		a.numa, b.numa = pickNUMA(a.numa, n.verts[x].numa), pickNUMA(b.numa, n.verts[y].numa)
		if hops != nil {
			n.appendBridges(hops, up)
			n.appendBridges(hops, []int{x})
		}
		cls, mbps, _ := n.acrossRoots(a, b, bw, hops)
		if hops != nil {
			n.appendBridges(hops, []int{y})
			n.appendBridgesRev(hops, down)
		}
		return cls, mbps, -1
	}
	if hops != nil {
		n.appendBridges(hops, up)
		n.appendBridges(hops, []int{x})
		n.appendBridgesRev(hops, down)
	}
	sw := n.switchOf(x)
	switch {
	case !n.verts[x].isSwitch():
		return ClassPHB, bw, x
	case n.switchOf(int(a.parent)) == sw && n.switchOf(int(b.parent)) == sw:
		return ClassPIX, bw, x
	default:
		return ClassPXB, bw, x
	}
}

// switchOf is the switch a bridge belongs to: a downstream port belongs to
// the switch above it; any other bridge is its own.
func (n *node) switchOf(v int) int {
	if n.verts[v].downstream() {
		if p := n.verts[v].parent; p >= 0 && n.verts[p].isSwitch() && !n.verts[p].downstream() {
			return int(p)
		}
	}
	return v
}

func pickNUMA(dev, root int32) int32 {
	if root >= 0 {
		return root
	}
	return dev
}

// acrossRoots classifies two devices under different host bridges. A
// C2C-attached GPU is SYS to every device outside its root, as
// `nvidia-smi topo -m` prints on GB200 trays even for a NIC of the GPU's
// own Grace; the bandwidth is then the C2C link, the other device's PCIe
// link and, across CPUs, the CPU-to-CPU link.
func (n *node) acrossRoots(a, b pcieDev, bw uint64, hops *[]Hop) (Class, uint64, int) {
	if (a.c2c || b.c2c) && a.numa >= 0 && a.numa == b.numa {
		if hops != nil {
			*hops = append(*hops, Hop{Kind: "cpu", ID: "numa" + strconv.Itoa(int(a.numa)), Node: n.name, LinkMBps: bw})
		}
		return ClassSYS, bw, -1
	}
	if a.numa >= 0 && a.numa == b.numa {
		return ClassNODE, bw, -1
	}
	na, okA := n.numaNode(a.numa)
	nb, okB := n.numaNode(b.numa)
	if okA && okB && na.socket != nb.socket && n.interSocket > 0 {
		bw = minNZ(bw, n.interSocket)
	}
	if hops != nil {
		*hops = append(*hops, Hop{Kind: "cpu", ID: "numa" + strconv.Itoa(int(a.numa)), Node: n.name})
		*hops = append(*hops, Hop{Kind: "cpu", ID: "numa" + strconv.Itoa(int(b.numa)), Node: n.name, LinkMBps: n.interSocket})
	}
	return ClassSYS, bw, -1
}

func (n *node) hopOf(v int) Hop {
	kind := "pcie"
	if !n.verts[v].isSwitch() && n.verts[v].parent < 0 {
		kind = "host-bridge"
	}
	return Hop{Kind: kind, ID: n.verts[v].id.String(), Node: n.name, LinkMBps: uint64(n.verts[v].linkMBps)}
}

func (n *node) appendBridges(hops *[]Hop, vs []int) {
	for _, v := range vs {
		*hops = append(*hops, n.hopOf(v))
	}
}

func (n *node) appendBridgesRev(hops *[]Hop, vs []int) {
	for i := len(vs) - 1; i >= 0; i-- {
		*hops = append(*hops, n.hopOf(vs[i]))
	}
}

// pcieAbove lists the bridges from a device's parent up to its host
// bridge (nil when the inventory does not place the device).
func (n *node) pcieAbove(d pcieDev) []PCIeBridgeView {
	var out []PCIeBridgeView
	for v := d.parent; v >= 0; v = n.verts[v].parent {
		x := &n.verts[v]
		out = append(out, PCIeBridgeView{ID: x.id.String(), HostBridge: x.parent < 0, RootPort: x.rootPort(),
			Switch: x.isSwitch() && !x.downstream() && x.parent >= 0, DownstreamPort: x.downstream(), NUMANode: x.numa})
	}
	return out
}
