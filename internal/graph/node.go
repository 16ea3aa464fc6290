package graph

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/devid"
	"github.com/gin-topology/gin/internal/natsort"
)

// Per-node limits (the master enforces the same ones; the graph checks them
// again so that no input can make it allocate without bound).
const (
	maxGPUs          = 64
	maxNVLinksPerGPU = 64
	maxNVSwitches    = 64
	maxBridges       = 1024
	maxHCAs          = 64
	maxPortsPerHCA   = 16
	maxC2CLinks      = 64
	maxC2CLinkMBps   = 1_000_000 // MB/s per link, as internal/inventory bounds it
)

// node is one node's structure, built once per inventory and never changed.
// A master holds one per registered node, so it is kept compact (issue
// #16): small integers where the per-node limits bound them, strings that
// repeat across nodes interned (istr), and what can be derived from other
// fields (port names, NVLink bandwidths) derived when asked.
type node struct {
	name        string
	verts       []vertex   // PCIe bridges
	gpus        []gpu      // by NVML index, ascending
	hcas        []hca      // by name, natural order (NIC0, NIC1, ...)
	ports       []port     // every HCA port, HCA order then port number
	computePort []uint16   // indices into ports: compute ports in rail order
	nv          []nvPair   // GPU pairs, row-major by GPU slice index
	nvsw        []istr     // the NVSwitches the GPUs' UP links reach, sorted
	numa        []numaNode // by id, ascending
	interSocket uint64
	info        nodeInfo
}

// nodeInfo is what NodeInfo answers but the leaf switch (the fabric may
// change). Counts fit uint16: at most maxGPUs × maxNVLinksPerGPU NVLinks
// and maxHCAs × maxPortsPerHCA ports.
type nodeInfo struct {
	domain                            istr
	nvLinksUp, nvLinksTotal           uint16
	computePortsUp, computePortsTotal uint16
}

// numaNode is one NUMA node of the host.
type numaNode struct {
	id     int32
	socket uint32
	cpus   istr // CPU list ("0-55,112-167")
}

// numaNode finds a NUMA node by id.
func (n *node) numaNode(id int32) (numaNode, bool) {
	i := sort.Search(len(n.numa), func(i int) bool { return n.numa[i].id >= id })
	if i < len(n.numa) && n.numa[i].id == id {
		return n.numa[i], true
	}
	return numaNode{}, false
}

// cpus is the CPU list of a NUMA node ("" unknown).
func (n *node) cpus(id int32) string {
	nn, _ := n.numaNode(id)
	return nn.cpus.String()
}

// gpu is one GPU of a node.
type gpu struct {
	uuid     string
	pci      istr
	domain   istr     // "<cluster_uuid>.<clique_id>" when in a COMPLETED MNNVL clique
	switches []uint16 // switches reached by UP links: indices into node.nvsw, ascending
	linkMBps uint64   // smallest per-link bandwidth of its UP NVLinks
	index    uint32
	dev      pcieDev
	nearMBps uint32 // PCIe bandwidth GPU↔nearest NIC (C2C and PCIe for a C2C GPU)
	near     int16  // nearest compute port (index into ports), -1 none
	swUp     uint16 // UP NVLinks to a switch (local or off-node), at most maxNVLinksPerGPU
	sm       uint16 // compute capability as an SM version (90 for 9.0); 0 unknown
	nearCls  Class
	// nearP2C: the GPU reaches its nearest NIC over C2C to its own CPU and
	// that CPU's PCIe (NCCL's P2C path type, GPUDirect RDMA kept).
	nearP2C bool
}

// hca is one HCA (PCI function) of a node. Its ports are
// node.ports[firstPort : firstPort+numPorts].
type hca struct {
	name      istr
	dev       pcieDev
	role      ginv1.HcaRole
	firstPort uint16
	numPorts  uint8 // at most maxPortsPerHCA
}

// portIndices are the indices into node.ports of h's ports.
func (h *hca) portIndices() []int {
	out := make([]int, h.numPorts)
	for i := range out {
		out[i] = int(h.firstPort) + i
	}
	return out
}

// port is one HCA port. Its name ("mlx5_0/1") and its NIC's
// ("node001/mlx5_0") are derived from the HCA's.
type port struct {
	guidN    uint64 // the GUID, when it is 16 hex digits (portGUIDN)
	guid     istr   // the GUID normalised, when it is not (LLDP chassis ids)
	nbr      istr   // normalised GUID of the switch the inventory says the port is cabled to
	id       istr   // "mlx5_0/1"
	num      uint32
	rateGbps uint32
	nbrGbps  uint32
	hca      uint8 // index into node.hcas (at most maxHCAs)
	flags    portFlags
}

// portFlags are a port's booleans, as bits.
type portFlags uint8

const (
	portActive portFlags = 1 << iota
	// portGUIDN: the GUID is guidN.
	portGUIDN
	// portEthernet: link layer Ethernet (RoCE).
	portEthernet
)

func (p *port) active() bool   { return p.flags&portActive != 0 }
func (p *port) hasGUIDN() bool { return p.flags&portGUIDN != 0 }
func (p *port) ethernet() bool { return p.flags&portEthernet != 0 }

// rateMBps is the port's rate, nbrMBps the cable's the inventory's
// neighbour list says (MB/s, 0 unknown).
func (p *port) rateMBps() uint64 { return uint64(p.rateGbps) * 125 }
func (p *port) nbrMBps() uint64  { return uint64(p.nbrGbps) * 125 }

// guidString is the port GUID normalised (16 lower-case hex digits, or
// the identity as the inventory had it trimmed and lower-cased), "" none.
func (p *port) guidString() string {
	if p.hasGUIDN() {
		return fmt.Sprintf("%016x", p.guidN)
	}
	return p.guid.String()
}

// nic names a port's HCA on its node: "node001/mlx5_0".
func (n *node) nic(p *port) string { return n.name + "/" + n.hcas[p.hca].name.String() }

// normGUID normalises a GUID ("0x0002C903004F1A2B", "0002:c903:004f:1a2b")
// to 16 lower-case hex digits (internal/devid); other identities (LLDP
// chassis names) are returned trimmed and lower-cased.
func normGUID(s string) string {
	if g, ok := devid.GUID(s); ok {
		return g
	}
	return strings.ToLower(strings.TrimSpace(s))
}

// guidNumber parses a normalised GUID; ok is false for other identities
// (LLDP chassis ids).
func guidNumber(g string) (uint64, bool) {
	if len(g) != 16 {
		return 0, false
	}
	return devid.GUIDValue(g)
}

// normPCI writes a PCI bus id in its canonical form (internal/devid); a
// string that is not one is compared trimmed and lower-cased.
func normPCI(s string) string {
	if id, ok := devid.PCIBusID(s); ok {
		return id
	}
	return strings.ToLower(strings.TrimSpace(s))
}

// buildNode validates one inventory and builds its structure. Errors name
// the offending field.
func buildNode(inv *ginv1.NodeInventory) (*node, error) {
	if inv == nil {
		return nil, errors.New("inventory is nil")
	}
	if inv.NodeName == "" {
		return nil, errors.New("node_name: empty")
	}
	fail := func(format string, a ...any) error {
		return fmt.Errorf("node %s: "+format, append([]any{inv.NodeName}, a...)...)
	}
	switch {
	case len(inv.Gpus) > maxGPUs:
		return nil, fail("gpus: %d, at most %d", len(inv.Gpus), maxGPUs)
	case len(inv.Nvswitches) > maxNVSwitches:
		return nil, fail("nvswitches: %d, at most %d", len(inv.Nvswitches), maxNVSwitches)
	case len(inv.PcieBridges) > maxBridges:
		return nil, fail("pcie_bridges: %d, at most %d", len(inv.PcieBridges), maxBridges)
	case len(inv.Hcas) > maxHCAs:
		return nil, fail("hcas: %d, at most %d", len(inv.Hcas), maxHCAs)
	}
	n := &node{name: inv.NodeName}
	if h := inv.Host; h != nil {
		n.interSocket = h.InterSocketMbPerS
		if err := n.buildNUMA(h.NumaNodes); err != nil {
			return nil, fail("%w", err)
		}
	}
	byID, err := n.buildPCIe(inv.PcieBridges)
	if err != nil {
		return nil, fail("%w", err)
	}
	if err := n.buildGPUs(inv.Gpus, byID); err != nil {
		return nil, fail("%w", err)
	}
	if err := n.buildHCAs(inv.Hcas, byID, inv.FabricNeighbors); err != nil {
		return nil, fail("%w", err)
	}
	if err := n.buildNVLinks(inv.Gpus); err != nil {
		return nil, fail("%w", err)
	}
	n.pickNearestPorts()
	n.summarise(inv)
	return n, nil
}

// buildNUMA indexes the host's NUMA nodes by id; a repeated id keeps its
// last entry.
func (n *node) buildNUMA(ns []*ginv1.NumaNode) error {
	n.numa = make([]numaNode, 0, len(ns))
	for i, nn := range ns {
		if nn == nil {
			return fmt.Errorf("host.numa_nodes[%d]: null", i)
		}
		n.numa = append(n.numa, numaNode{id: int32(nn.Id), socket: nn.Socket, cpus: intern(nn.CpuList)})
	}
	sort.SliceStable(n.numa, func(a, b int) bool { return n.numa[a].id < n.numa[b].id })
	out := n.numa[:0]
	for i, nn := range n.numa {
		if i+1 < len(n.numa) && n.numa[i+1].id == nn.id {
			continue // a later entry of the same id wins
		}
		out = append(out, nn)
	}
	n.numa = out
	return nil
}

// gpuSlot finds a GPU by NVML index: directly when indices are dense (as
// they always are on real nodes), else by binary search (gpus are sorted).
func (n *node) gpuSlot(idx uint32) (int, bool) {
	if int64(idx) < int64(len(n.gpus)) && n.gpus[idx].index == idx {
		return int(idx), true
	}
	i := sort.Search(len(n.gpus), func(i int) bool { return n.gpus[i].index >= idx })
	return i, i < len(n.gpus) && n.gpus[i].index == idx
}

// buildGPUs indexes the GPUs by NVML index.
func (n *node) buildGPUs(gs []*ginv1.Gpu, byID map[string]int) error {
	seenIndex := make(map[uint32]int, len(gs))
	seenPCI := map[string]int{}
	order := make([]int, 0, len(gs))
	for i, g := range gs {
		if g == nil {
			return fmt.Errorf("gpus[%d]: null", i)
		}
		if j, dup := seenIndex[g.Index]; dup {
			return fmt.Errorf("gpus[%d].index: %d is also gpus[%d]", i, g.Index, j)
		}
		seenIndex[g.Index] = i
		if p := normPCI(g.PciBusId); p != "" {
			if j, dup := seenPCI[p]; dup {
				return fmt.Errorf("gpus[%d].pci_bus_id: %q is also gpus[%d]", i, g.PciBusId, j)
			}
			seenPCI[p] = i
		}
		if len(g.Nvlinks) > maxNVLinksPerGPU {
			return fmt.Errorf("gpus[%d].nvlinks: %d, at most %d", i, len(g.Nvlinks), maxNVLinksPerGPU)
		}
		order = append(order, i)
	}
	sort.Slice(order, func(a, b int) bool { return gs[order[a]].Index < gs[order[b]].Index })
	n.gpus = make([]gpu, len(gs))
	for k, i := range order {
		g := gs[i]
		dev, err := n.device(g.PcieParentId, g.PcieLink, g.NumaNode, byID)
		if err != nil {
			return fmt.Errorf("gpus[%d].pcie_parent_id: %w", i, err)
		}
		if c := g.C2C; c != nil && c.LinksUp > 0 && c.LinkMbPerS > 0 {
			if c.LinksUp > maxC2CLinks || c.LinkMbPerS > maxC2CLinkMBps {
				return fmt.Errorf("gpus[%d].c2c: %d links of %d MB/s, at most %d of %d", i, c.LinksUp, c.LinkMbPerS, maxC2CLinks, maxC2CLinkMBps)
			}
			dev.c2c, dev.linkMBps = true, uint32(uint64(c.LinksUp)*c.LinkMbPerS)
		}
		n.gpus[k] = gpu{uuid: g.Uuid, index: g.Index, pci: intern(normPCI(g.PciBusId)), dev: dev, near: -1,
			sm: smVersion(g.ComputeCapabilityMajor, g.ComputeCapabilityMinor)}
		if f := g.Fabric; f != nil && f.State == ginv1.FabricState_FABRIC_STATE_COMPLETED && f.ClusterUuid != "" {
			n.gpus[k].domain = intern(fmt.Sprintf("%s.%d", f.ClusterUuid, f.CliqueId))
		}
	}
	return nil
}

// smVersion is a compute capability as an SM version (9.0: 90); 0 when it
// does not fit (no real GPU's does not).
func smVersion(major, minor uint32) uint16 {
	v := uint64(major)*10 + uint64(minor)
	if v > math.MaxUint16 {
		return 0
	}
	return uint16(v)
}

// buildHCAs indexes HCAs (natural name order) and their ports.
func (n *node) buildHCAs(hs []*ginv1.Hca, byID map[string]int, nbrs []*ginv1.FabricNeighbor) error {
	type nbrKey struct {
		hca  string
		port uint32
	}
	nbr := make(map[nbrKey]*ginv1.FabricNeighbor, len(nbrs))
	for i, f := range nbrs {
		if f == nil {
			return fmt.Errorf("fabric_neighbors[%d]: null", i)
		}
		nbr[nbrKey{f.Hca, f.Port}] = f
	}
	order := make([]int, 0, len(hs))
	seen := map[string]int{}
	ports := 0
	for i, h := range hs {
		if h == nil {
			return fmt.Errorf("hcas[%d]: null", i)
		}
		if h.Name == "" {
			return fmt.Errorf("hcas[%d].name: empty", i)
		}
		if j, dup := seen[h.Name]; dup {
			return fmt.Errorf("hcas[%d].name: %q is also hcas[%d]", i, h.Name, j)
		}
		seen[h.Name] = i
		if len(h.Ports) > maxPortsPerHCA {
			return fmt.Errorf("hcas[%d].ports: %d, at most %d", i, len(h.Ports), maxPortsPerHCA)
		}
		ports += len(h.Ports)
		order = append(order, i)
	}
	n.ports = make([]port, 0, ports)
	sort.Slice(order, func(a, b int) bool { return natsort.Less(hs[order[a]].Name, hs[order[b]].Name) })
	n.hcas = make([]hca, len(hs))
	for k, i := range order {
		h := hs[i]
		dev, err := n.device(h.PcieParentId, h.PcieLink, h.NumaNode, byID)
		if err != nil {
			return fmt.Errorf("hcas[%d].pcie_parent_id: %w", i, err)
		}
		n.hcas[k] = hca{name: intern(h.Name), dev: dev, role: h.Role, firstPort: uint16(len(n.ports)), numPorts: uint8(len(h.Ports))}
		seenPort := map[uint32]bool{}
		for j, p := range h.Ports {
			if p == nil {
				return fmt.Errorf("hcas[%d].ports[%d]: null", i, j)
			}
			if seenPort[p.Port] {
				return fmt.Errorf("hcas[%d].ports[%d].port: %d used twice", i, j, p.Port)
			}
			seenPort[p.Port] = true
			pt := port{hca: uint8(k), num: p.Port, rateGbps: p.RateGbps,
				id: intern(h.Name + "/" + strconv.FormatUint(uint64(p.Port), 10))}
			if p.State == ginv1.PortState_PORT_STATE_ACTIVE {
				pt.flags |= portActive
			}
			if p.LinkLayer == ginv1.LinkLayer_LINK_LAYER_ETHERNET {
				pt.flags |= portEthernet
			}
			g := normGUID(p.PortGuid)
			if v, ok := guidNumber(g); ok {
				pt.guidN, pt.flags = v, pt.flags|portGUIDN
			} else {
				pt.guid = intern(g)
			}
			if f := nbr[nbrKey{h.Name, p.Port}]; f != nil {
				pt.nbr = intern(normGUID(f.SwitchGuid))
				pt.nbrGbps = f.RateGbps
			}
			n.ports = append(n.ports, pt)
		}
	}
	// Compute ports in rail order; without any COMPUTE HCA fall back to HCAs
	// of unspecified role (never storage).
	for _, role := range []ginv1.HcaRole{ginv1.HcaRole_HCA_ROLE_COMPUTE, ginv1.HcaRole_HCA_ROLE_UNSPECIFIED} {
		for _, h := range n.hcas {
			if h.role == role {
				for i := range uint16(h.numPorts) {
					n.computePort = append(n.computePort, h.firstPort+i)
				}
			}
		}
		if len(n.computePort) > 0 {
			break
		}
	}
	return nil
}

// pickNearestPorts precomputes every GPU's nearest compute port: ACTIVE ports
// first, then the best path (PIX, PXB, P2C, PHB, NODE, SYS: NCCL's order,
// P2C being a C2C GPU to a NIC of its own CPU), then the lowest HCA (rail
// order). C2C GPUs that tie on several NICs of their CPU take them in turn
// (the k-th such GPU the k-th NIC, modulo), as NCCL spreads GPUs over
// equidistant NICs; other GPUs keep the lowest.
func (n *node) pickNearestPorts() {
	type choice struct {
		port int
		cls  Class
		mbps uint64
		p2c  bool
	}
	turn := map[string]int{} // C2C GPUs seen per tied NIC set
	for gi := range n.gpus {
		g := &n.gpus[gi]
		var ties []choice
		bestActive, bestRank := false, 0
		for _, pi := range n.computePort {
			p := &n.ports[pi]
			h := n.hcas[p.hca].dev
			cls, mbps := n.pcieClass(g.dev, h)
			c := choice{port: int(pi), cls: cls, mbps: mbps, p2c: g.dev.c2c && cls == ClassSYS && g.dev.numa >= 0 && g.dev.numa == h.numa}
			r := nicRank(c.cls, c.p2c)
			switch {
			case len(ties) > 0 && bestActive && !p.active(), len(ties) > 0 && bestActive == p.active() && r > bestRank:
				continue
			case len(ties) > 0 && bestActive == p.active() && r == bestRank:
				ties = append(ties, c)
				continue
			}
			ties, bestActive, bestRank = []choice{c}, p.active(), r
		}
		if len(ties) == 0 {
			g.near = -1
			continue
		}
		pick := ties[0]
		if g.dev.c2c && len(ties) > 1 {
			key := ""
			for _, c := range ties {
				key += strconv.Itoa(c.port) + ","
			}
			pick = ties[turn[key]%len(ties)]
			turn[key]++
		}
		g.near, g.nearCls, g.nearMBps, g.nearP2C = int16(pick.port), pick.cls, uint32(pick.mbps), pick.p2c
	}
}

// nicRank orders GPU→NIC paths as NCCL's path types do: PIX < PXB < P2C <
// PHB < NODE < SYS.
func nicRank(c Class, p2c bool) int {
	if p2c {
		return 2*int(ClassPXB) + 1
	}
	return 2 * int(c)
}

// summarise fills the node's nodeInfo.
func (n *node) summarise(inv *ginv1.NodeInventory) {
	for _, g := range n.gpus {
		if g.domain != (istr{}) {
			n.info.domain = g.domain
			break
		}
	}
	for _, g := range inv.Gpus {
		for _, l := range g.Nvlinks {
			if l == nil {
				continue
			}
			n.info.nvLinksTotal++
			if l.State == ginv1.LinkState_LINK_STATE_UP {
				n.info.nvLinksUp++
			}
		}
	}
	for _, pi := range n.computePort {
		n.info.computePortsTotal++
		if n.ports[pi].active() {
			n.info.computePortsUp++
		}
	}
}
