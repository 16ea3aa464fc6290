package sim

import (
	"fmt"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// builder assembles one simulated node's inventory. Profiles call its
// methods to lay out their PCIe trees, GPUs, NVLinks and HCAs; identities
// come from the cluster and node names (ids.go).
type builder struct {
	cluster, node string
	index         int
	inv           *ginv1.NodeInventory
}

func newBuilder(cluster, node string, index int) *builder {
	return &builder{cluster: cluster, node: node, index: index, inv: &ginv1.NodeInventory{NodeName: node}}
}

// host fills the Host message.
func (b *builder) host(model string, interSocketMBps uint64, numa ...*ginv1.NumaNode) {
	b.inv.Host = &ginv1.Host{
		Hostname:          b.node,
		MachineId:         machineID(b.cluster, b.node),
		SystemModel:       model,
		KernelVersion:     "6.8.0-sim",
		DriverVersion:     "570.124.06",
		CudaDriverVersion: "12.8",
		NumaNodes:         numa,
		InterSocketMbPerS: interSocketMBps,
	}
}

func numaNode(id, socket uint32, cpus string) *ginv1.NumaNode {
	return &ginv1.NumaNode{Id: id, Socket: socket, CpuList: cpus}
}

// busID is the normalised sysfs PCI address of function fn on bus.
func busID(bus, fn int) string { return fmt.Sprintf("0000:%02x:00.%d", bus, fn) }

// hostBridge adds the host bridge pci0000:<bus> on a NUMA node and returns its id.
func (b *builder) hostBridge(bus int, numa int32, desc string) string {
	id := fmt.Sprintf("pci0000:%02x", bus)
	b.inv.PcieBridges = append(b.inv.PcieBridges, &ginv1.PcieBridge{
		Id: id, Kind: ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_HOST_BRIDGE, NumaNode: numa, Description: desc,
	})
	return id
}

// pcieSwitch adds a PCIe switch (or root port) with the given id under parent.
func (b *builder) pcieSwitch(id, parent string, numa int32, gen, width uint32, desc string) string {
	b.inv.PcieBridges = append(b.inv.PcieBridges, &ginv1.PcieBridge{
		Id: id, Kind: ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH, ParentId: parent, NumaNode: numa,
		Link: &ginv1.PcieLink{Generation: gen, Width: width}, Description: desc,
	})
	return id
}

// gpuModel describes one GPU product.
type gpuModel struct {
	name         string
	arch         string
	ccMajor      uint32
	ccMinor      uint32
	memoryBytes  uint64
	pcieGen      uint32
	nvlinkVer    uint32
	linkMBps     uint64
	noSerial     bool // GeForce boards report no serial
	nvlinkPerGPU int
}

// gpu adds GPU index at busID under parent and returns it.
func (b *builder) gpu(m gpuModel, index int, bus, parent string, numa int32) *ginv1.Gpu {
	g := &ginv1.Gpu{
		Uuid:                   gpuUUID(b.cluster, b.node, index),
		Index:                  uint32(index),
		Model:                  m.name,
		ComputeCapabilityMajor: m.ccMajor,
		ComputeCapabilityMinor: m.ccMinor,
		PciBusId:               bus,
		PcieParentId:           parent,
		PcieLink:               &ginv1.PcieLink{Generation: m.pcieGen, Width: 16},
		NumaNode:               numa,
		MemoryBytes:            m.memoryBytes,
		Architecture:           m.arch,
	}
	if !m.noSerial {
		g.Serial = serial(b.cluster, b.node, "gpu", fmt.Sprint(index))
	}
	b.inv.Gpus = append(b.inv.Gpus, g)
	return g
}

// nvswitches adds n baseboard NVSwitches and returns their PCI bus ids.
func (b *builder) nvswitches(n int, firstBus int, model string, linkCount uint32) []string {
	ids := make([]string, n)
	for i := range n {
		ids[i] = busID(firstBus+i, 0)
		b.inv.Nvswitches = append(b.inv.Nvswitches, &ginv1.NvSwitch{
			Id: ids[i], PciBusId: ids[i], Model: model, LinkCount: linkCount,
		})
	}
	return ids
}

// wireToSwitches gives every GPU m.nvlinkPerGPU links, link l going to
// switch l%len(switches). A nil switch list means off-node switches (MNNVL).
func (b *builder) wireToSwitches(m gpuModel, switches []string, offNode int) {
	next := map[string]uint32{}
	for _, g := range b.inv.Gpus {
		for l := range m.nvlinkPerGPU {
			remote := ""
			if len(switches) > 0 {
				remote = switches[l%len(switches)]
			}
			key := remote
			if remote == "" {
				key = fmt.Sprint("off-node-", l%max(offNode, 1))
			}
			g.Nvlinks = append(g.Nvlinks, &ginv1.NvLink{
				Index: uint32(l), Version: m.nvlinkVer, BandwidthMbPerS: m.linkMBps,
				State: ginv1.LinkState_LINK_STATE_UP, Health: ginv1.LinkHealth_LINK_HEALTH_HEALTHY,
				RemoteType:      ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_SWITCH,
				RemotePciBusId:  remote,
				RemoteLinkIndex: next[key],
			})
			next[key]++
		}
	}
}

// wireDirect bonds n links between two GPUs.
func (b *builder) wireDirect(m gpuModel, a, c *ginv1.Gpu, n int) {
	for l := range n {
		for _, p := range [][2]*ginv1.Gpu{{a, c}, {c, a}} {
			p[0].Nvlinks = append(p[0].Nvlinks, &ginv1.NvLink{
				Index: uint32(l), Version: m.nvlinkVer, BandwidthMbPerS: m.linkMBps,
				State: ginv1.LinkState_LINK_STATE_UP, Health: ginv1.LinkHealth_LINK_HEALTH_HEALTHY,
				RemoteType:      ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_GPU,
				RemotePciBusId:  p[1].PciBusId,
				RemoteLinkIndex: uint32(l),
			})
		}
	}
}

// hcaModel describes one NIC product and how one of its functions is used.
type hcaModel struct {
	hcaType   string
	boardID   string
	firmware  string
	pcieGen   uint32
	role      ginv1.HcaRole
	rateGbps  uint32
	linkLayer ginv1.LinkLayer
}

// hca adds an HCA (one PCI function, one port) and returns it.
func (b *builder) hca(m hcaModel, name, bus, parent string, numa int32) *ginv1.Hca {
	h := &ginv1.Hca{
		Name:            name,
		NodeGuid:        nodeGUID(b.cluster, b.node, name),
		SysImageGuid:    nodeGUID(b.cluster, b.node, name),
		PciBusId:        bus,
		PcieParentId:    parent,
		PcieLink:        &ginv1.PcieLink{Generation: m.pcieGen, Width: 16},
		NumaNode:        numa,
		HcaType:         m.hcaType,
		BoardId:         m.boardID,
		FirmwareVersion: m.firmware,
		Role:            m.role,
	}
	pg := PortGUID(b.cluster, b.node, name, 1)
	p := &ginv1.HcaPort{
		Port:      1,
		PortGuid:  pg,
		State:     ginv1.PortState_PORT_STATE_ACTIVE,
		PhysState: ginv1.PortPhysState_PORT_PHYS_STATE_LINK_UP,
		RateGbps:  m.rateGbps,
		RateText:  rateText(m.rateGbps, m.rateGbps),
		LinkLayer: m.linkLayer,
		Gids:      []string{linkLocalGID(pg)},
		Health:    ginv1.LinkHealth_LINK_HEALTH_HEALTHY,
	}
	if m.linkLayer == ginv1.LinkLayer_LINK_LAYER_INFINIBAND {
		p.Lid = lid(b.cluster, b.node, name, 1)
		p.SmLid = 1
	} else {
		var busN, fn int
		fmt.Sscanf(bus, "0000:%x:00.%d", &busN, &fn)
		v4 := ipv4(b.cluster, b.node, name)
		p.Netdev = &ginv1.NetDevice{
			Name:          fmt.Sprintf("enp%ds0f%dnp%d", busN, fn, fn),
			Mac:           mac(b.cluster, b.node, name),
			Mtu:           9000,
			Ipv4Addresses: []string{v4},
			Ipv6Addresses: []string{ipv6(b.cluster, b.node, name)},
		}
		p.Gids = append(p.Gids, ipv4MappedGID(v4))
	}
	h.Ports = []*ginv1.HcaPort{p}
	b.inv.Hcas = append(b.inv.Hcas, h)
	if m.role == ginv1.HcaRole_HCA_ROLE_COMPUTE {
		b.inv.QpSummaries = append(b.inv.QpSummaries,
			&ginv1.QpSummary{Device: name, Port: 1, Type: "RC", State: "RTS", Count: 0},
			&ginv1.QpSummary{Device: name, Port: 1, Type: "UD", State: "RTS", Count: 1},
		)
	}
	return h
}

// ipv4MappedGID is the RoCE v2 GID of an IPv4 address ("10.1.2.3/16").
func ipv4MappedGID(cidr string) string {
	var a, b, c, d int
	fmt.Sscanf(cidr, "%d.%d.%d.%d", &a, &b, &c, &d)
	return fmt.Sprintf("0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", a, b, c, d)
}

// rateText is the kernel's sysfs rate text for a port running at rate Gb/s
// whose full 4X rate is native Gb/s.
func rateText(rate, native uint32) string {
	gen := map[uint32]string{100: "EDR", 200: "HDR", 400: "NDR", 800: "XDR"}[native]
	if gen == "" {
		return fmt.Sprintf("%d Gb/sec", rate)
	}
	width := "4X"
	switch {
	case rate == 0:
		return "0 Gb/sec"
	case rate*2 == native:
		width = "2X"
	case rate*4 == native:
		width = "1X"
	}
	return fmt.Sprintf("%d Gb/sec (%s %s)", rate, width, gen)
}
