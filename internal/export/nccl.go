package export

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/devid"
	"github.com/gin-topology/gin/internal/inventory"
)

// NCCL PCI classes (src/graph/topo.cc kvDictPciClass) and values.
const (
	ncclClassBridge   = "0x060400"
	ncclClassNVSwitch = "0x068000"
	ncclClassCPU      = "0x068001" // NVLink to a CPU (IBM NPU)
	ncclClassGPU      = "0x030200" // 3D controller; NCCL matches the 0x03 prefix
	ncclClassVGA      = "0x030000"
	ncclClassIB       = "0x020700"
	ncclClassEthernet = "0x020000"
	// ncclOffNodeNVSwitch is the nvlink target written for links to NVSwitches
	// outside the node (MNNVL trays report no PCI address for them). NCCL
	// ignores the target of an NVSwitch link: every GPU's NVSwitch links go to
	// the one NVS vertex of its system.
	ncclOffNodeNVSwitch = "0000:00:00.0"
	// ncclConnectXMaxConn is the max_qp ibv_devinfo reports for ConnectX-6/7
	// and BlueField-3, which NCCL's IB plugin reports as maxconn.
	ncclConnectXMaxConn = 131072
)

// pciGenSpeed is NCCL's link_speed text per PCIe generation (the kernel's
// current_link_speed since Linux 5.7; kvDictPciGen).
var pciGenSpeed = [...]string{1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe", 6: "64.0 GT/s PCIe"}

// xnode is one element of the XML being written.
type xnode struct {
	name     string
	attrs    [][2]string
	children []*xnode
	key      string // sort key among siblings
	hasDev   bool   // a GPU or NIC is at or below it
}

func (x *xnode) attr(k, v string) { x.attrs = append(x.attrs, [2]string{k, v}) }

// errNilInventory: NCCLTopo needs the node's inventory.
var errNilInventory = errors.New("export: nccl topo: nil inventory")

// NCCLTopo renders an NCCL_TOPO_FILE for one node (nccl-plugin.md §5): the
// system root, one cpu per NUMA node, the PCIe switches as pci bridges
// (NCCL collapses a switch's upstream and downstream ports into one pci
// element and leaves out root ports; so does this), each GPU as a pci
// element holding a gpu with its NVLinks, and each HCA as a pci element
// holding a nic with one net per ACTIVE port.
//
// The structure comes from the model's Host of the node, which must have
// been built from inv (the master passes its graph and the stored
// inventory of one read): which GPUs and HCAs, in which order, under which
// bridges of the PCIe tree and on which NUMA node. The attribute values
// NCCL wants and the model does not keep (link generations and widths,
// compute capabilities, NVLink targets, port states, GUIDs) are read from
// inv, whose identities are canonical (inventory.Canonical) so that the
// two agree by plain comparison.
//
// Values written and their sources:
//   - cpu: numaid; affinity (the kernel's cpumap mask, 32-bit hex words,
//     most significant first) from host.numa_nodes[].cpu_list; arch and
//     vendor only when the inventory's descriptions name them (Grace →
//     arm64; Intel → x86_64/GenuineIntel; AMD → x86_64/AuthenticAMD):
//     attributes left out are filled by NCCL from the machine it runs on.
//   - pci: busid, class, link_speed ("32.0 GT/s PCIe"), link_width.
//   - gpu: dev (NVML index), sm (compute capability ×10), rank (= dev; NCCL
//     sets the real rank of the GPU's process), gdr="1".
//   - nvlink: one per remote device with the number of UP links: target a
//     GPU's bus id with tclass 0x030200, an NVSwitch's bus id (0000:00:00.0
//     for off-node switches) with tclass 0x068000.
//   - net: name (HCA), dev (index over the ACTIVE ports of all HCAs in name
//     order, as NCCL's IB plugin numbers them without NCCL_IB_HCA; NCCL
//     overwrites it with its own index), speed (Mb/s), port, latency 0,
//     guid (the HCA's node GUID), maxconn (131072 for Mellanox/NVIDIA HCAs,
//     left out otherwise), gdr="1".
func (t *Topology) NCCLTopo(inv *ginv1.NodeInventory) ([]byte, error) {
	if inv == nil {
		return nil, errNilInventory
	}
	inv, _ = inventory.Canonical(inv) // already canonical when it comes from the master
	node := inv.NodeName
	host, ok := t.Host(node)
	if !ok {
		return nil, fmt.Errorf("export: nccl topo: node %q is not in the graph", node)
	}
	x := newNCCLTree(inv)
	if err := x.gpus(host); err != nil {
		return nil, err
	}
	if err := x.hcas(host); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!-- NCCL_TOPO_FILE for node %s, written by GIN from its inventory -->\n", xmlComment(node))
	writeXML(&b, x.system(), 0)
	return b.Bytes(), nil
}

// ncclTree is one node's NCCL topology being built: its cpu elements by
// NUMA node and the PCIe switches written as pci elements, by bus id.
type ncclTree struct {
	inv        *ginv1.NodeInventory
	bridgeLink map[string]*ginv1.PcieLink
	cpus       map[int32]*xnode
	pcis       map[string]*xnode
}

func newNCCLTree(inv *ginv1.NodeInventory) *ncclTree {
	t := &ncclTree{inv: inv, bridgeLink: make(map[string]*ginv1.PcieLink, len(inv.PcieBridges)),
		cpus: map[int32]*xnode{}, pcis: map[string]*xnode{}}
	for _, b := range inv.PcieBridges {
		t.bridgeLink[b.Id] = b.Link
	}
	return t
}

// cpuOf is the cpu element of a NUMA node, created the first time.
func (t *ncclTree) cpuOf(numa int32) *xnode {
	if c := t.cpus[numa]; c != nil {
		return c
	}
	c := &xnode{name: "cpu", key: fmt.Sprintf("%011d", int64(numa)+1<<31)}
	if numa < 0 {
		c.key = "~"
	}
	t.cpus[numa] = c
	return c
}

// attach returns the element a device hangs under: the nearest bridge
// above it that NCCL writes as a pci element (a PCIe switch: NCCL folds
// a switch's downstream ports into it and leaves out root ports and
// host bridges), creating the chain of such bridges from the cpu of
// its NUMA node down.
func (t *ncclTree) attach(above []Bridge, numa int32) *xnode {
	up := t.cpuOf(numa)
	for i := len(above) - 1; i >= 0; i-- {
		b := above[i]
		if b.HostBridge || b.RootPort || b.DownstreamPort {
			continue
		}
		x := t.pcis[b.ID]
		if x == nil {
			x = &xnode{name: "pci", key: b.ID}
			x.attr("busid", b.ID)
			x.attr("class", ncclClassBridge)
			addLink(x, t.bridgeLink[b.ID])
			t.pcis[b.ID] = x
			up.children = append(up.children, x)
		}
		up = x
	}
	return up
}

// gpus adds the node's GPUs, by NVML index (the model's order).
func (t *ncclTree) gpus(host *Host) error {
	gpuByIndex := make(map[uint32]*ginv1.Gpu, len(t.inv.Gpus))
	for _, gp := range t.inv.Gpus {
		gpuByIndex[gp.Index] = gp
	}
	for _, gv := range host.GPUs {
		g := gpuByIndex[gv.Index]
		bus := gv.PCIBusID
		if bus == "" || g == nil {
			return fmt.Errorf("export: nccl topo: node %s: GPU%d has no PCI bus id (NCCL finds GPUs by bus id)", t.inv.NodeName, gv.Index)
		}
		x := &xnode{name: "pci", key: bus, hasDev: true}
		x.attr("busid", bus)
		x.attr("class", gpuClass(g.Model))
		addLink(x, g.PcieLink)
		gx := &xnode{name: "gpu"}
		gx.attr("dev", strconv.FormatUint(uint64(g.Index), 10))
		if sm := g.ComputeCapabilityMajor*10 + g.ComputeCapabilityMinor; sm > 0 {
			gx.attr("sm", strconv.FormatUint(uint64(sm), 10))
		}
		gx.attr("rank", strconv.FormatUint(uint64(g.Index), 10))
		gx.attr("gdr", "1")
		gx.children = nvlinkElems(g)
		if c := g.C2C; c != nil && c.LinksUp > 0 && c.LinkMbPerS > 0 {
			// NCCL's own element for a Grace GPU's C2C link: per-link MB/s.
			cx := &xnode{name: "c2c"}
			cx.attr("bw", strconv.FormatUint(c.LinkMbPerS, 10))
			cx.attr("count", strconv.FormatUint(uint64(c.LinksUp), 10))
			gx.children = append(gx.children, cx)
		}
		x.children = []*xnode{gx}
		up := t.attach(gv.PCIe, gv.NUMANode)
		up.children = append(up.children, x)
	}
	return nil
}

// hcas adds the node's HCAs, in natural name order (the model's), with
// their ACTIVE ports only, numbered over all HCAs as NCCL's IB plugin
// does.
func (t *ncclTree) hcas(host *Host) error {
	hcaByName := make(map[string]*ginv1.Hca, len(t.inv.Hcas))
	for _, h := range t.inv.Hcas {
		hcaByName[h.Name] = h
	}
	dev := 0
	for _, hv := range host.HCAs {
		h := hcaByName[hv.Name]
		if h == nil {
			return fmt.Errorf("export: nccl topo: node %s: HCA %s is in the graph, not in the inventory", t.inv.NodeName, hv.Name)
		}
		nets, ib := netElems(h, &dev)
		if len(nets) == 0 {
			continue
		}
		nic := &xnode{name: "nic", children: nets, hasDev: true}
		up := t.attach(hv.PCIe, hv.NUMANode)
		bus := h.PciBusId
		if bus == "" { // NCCL allows a nic directly under its cpu
			nic.key = "~nic:" + h.Name
			up.children = append(up.children, nic)
			continue
		}
		x := &xnode{name: "pci", key: bus, hasDev: true}
		x.attr("busid", bus)
		if ib {
			x.attr("class", ncclClassIB)
		} else {
			x.attr("class", ncclClassEthernet)
		}
		addLink(x, h.PcieLink)
		x.children = []*xnode{nic}
		up.children = append(up.children, x)
	}
	return nil
}

// netElems are an HCA's ACTIVE ports as net elements, numbered from *dev
// on; ib says whether one is InfiniBand.
func netElems(h *ginv1.Hca, dev *int) (nets []*xnode, ib bool) {
	for _, p := range h.Ports {
		if p.State != ginv1.PortState_PORT_STATE_ACTIVE {
			continue
		}
		if p.LinkLayer == ginv1.LinkLayer_LINK_LAYER_INFINIBAND {
			ib = true
		}
		nx := &xnode{name: "net"}
		nx.attr("name", h.Name)
		nx.attr("dev", strconv.Itoa(*dev))
		*dev++
		if p.RateGbps > 0 {
			nx.attr("speed", strconv.FormatUint(uint64(p.RateGbps)*1000, 10))
		}
		nx.attr("port", strconv.FormatUint(uint64(p.Port), 10))
		nx.attr("latency", "0.000000")
		if g, ok := devid.GUIDValue(h.NodeGuid); ok {
			nx.attr("guid", fmt.Sprintf("%#x", g))
		}
		if strings.HasPrefix(h.HcaType, "MT") {
			nx.attr("maxconn", strconv.Itoa(ncclConnectXMaxConn))
		}
		nx.attr("gdr", "1")
		nets = append(nets, nx)
	}
	return nets, ib
}

// system is the system element: the cpus that hold a device, in NUMA
// order, with their numaid, affinity, arch and vendor, pruned of bridges
// without devices.
func (t *ncclTree) system() *xnode {
	cpuList := map[int32]string{}
	maxCPU := -1
	if t.inv.Host != nil {
		for _, n := range t.inv.Host.NumaNodes {
			cpuList[int32(n.Id)] = n.CpuList
			if m := maxCPUOf(n.CpuList); m > maxCPU {
				maxCPU = m
			}
		}
	}
	arch, vendor := cpuArch(t.inv)
	numas := make([]int32, 0, len(t.cpus))
	for n := range t.cpus {
		numas = append(numas, n)
	}
	sort.Slice(numas, func(i, j int) bool { return t.cpus[numas[i]].key < t.cpus[numas[j]].key })
	sys := &xnode{name: "system"}
	sys.attr("version", "1")
	for _, n := range numas {
		c := t.cpus[n]
		markDevs(c)
		if !c.hasDev {
			continue
		}
		c.attrs = nil
		c.attr("numaid", strconv.Itoa(int(n)))
		if mask, ok := cpuMask(cpuList[n], maxCPU); ok && n >= 0 {
			c.attr("affinity", mask)
		}
		if arch != "" {
			c.attr("arch", arch)
		}
		if vendor != "" {
			c.attr("vendor", vendor)
		}
		prune(c)
		sys.children = append(sys.children, c)
	}
	return sys
}

// nvlinkElems groups a GPU's UP NVLinks by remote device.
func nvlinkElems(g *ginv1.Gpu) []*xnode {
	type key struct{ target, class string }
	count := map[key]int{}
	for _, l := range g.Nvlinks {
		if l == nil || l.State != ginv1.LinkState_LINK_STATE_UP {
			continue
		}
		var k key
		switch l.RemoteType {
		case ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_GPU:
			k = key{l.RemotePciBusId, ncclClassGPU}
		case ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_SWITCH:
			k = key{l.RemotePciBusId, ncclClassNVSwitch}
			if k.target == "" {
				k.target = ncclOffNodeNVSwitch
			}
		case ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_IBMNPU:
			k = key{l.RemotePciBusId, ncclClassCPU}
		default:
			continue
		}
		if k.target == "" {
			continue
		}
		count[k]++
	}
	keys := make([]key, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].target != keys[j].target {
			return keys[i].target < keys[j].target
		}
		return keys[i].class < keys[j].class
	})
	out := make([]*xnode, len(keys))
	for i, k := range keys {
		x := &xnode{name: "nvlink"}
		x.attr("target", k.target)
		x.attr("count", strconv.Itoa(count[k]))
		x.attr("tclass", k.class)
		out[i] = x
	}
	return out
}

// markDevs sets hasDev on every element with a GPU or NIC at or below it.
func markDevs(x *xnode) bool {
	for _, c := range x.children {
		if markDevs(c) {
			x.hasDev = true
		}
	}
	return x.hasDev
}

// prune drops bridges without devices and sorts children.
func prune(x *xnode) {
	kept := x.children[:0]
	for _, c := range x.children {
		if c.name == "pci" && !c.hasDev {
			continue
		}
		prune(c)
		kept = append(kept, c)
	}
	x.children = kept
	sort.SliceStable(x.children, func(i, j int) bool { return x.children[i].key < x.children[j].key })
}

func writeXML(b *bytes.Buffer, x *xnode, depth int) {
	ind := strings.Repeat("  ", depth)
	b.WriteString(ind + "<" + x.name)
	for _, a := range x.attrs {
		b.WriteString(" " + a[0] + `="`)
		_ = xml.EscapeText(b, []byte(a[1]))
		b.WriteString(`"`)
	}
	if len(x.children) == 0 {
		b.WriteString("/>\n")
		return
	}
	b.WriteString(">\n")
	for _, c := range x.children {
		writeXML(b, c, depth+1)
	}
	b.WriteString(ind + "</" + x.name + ">\n")
}

func addLink(x *xnode, l *ginv1.PcieLink) {
	if l == nil {
		return
	}
	if l.Generation > 0 && int(l.Generation) < len(pciGenSpeed) {
		x.attr("link_speed", pciGenSpeed[l.Generation])
	}
	if l.Width > 0 {
		x.attr("link_width", strconv.FormatUint(uint64(l.Width), 10))
	}
}

func gpuClass(model string) string {
	m := strings.ToLower(model)
	if strings.Contains(m, "geforce") || strings.Contains(m, "titan") {
		return ncclClassVGA
	}
	return ncclClassGPU
}

// cpuArch infers arch and vendor from what the inventory names; "" when
// it does not say (NCCL then reads them from the machine it runs on).
func cpuArch(inv *ginv1.NodeInventory) (arch, vendor string) {
	var texts []string
	if inv.Host != nil {
		texts = append(texts, inv.Host.SystemModel)
	}
	for _, b := range inv.PcieBridges {
		if b.Kind == ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_HOST_BRIDGE || b.ParentId == "" {
			texts = append(texts, b.Description)
		}
	}
	for _, g := range inv.Gpus {
		texts = append(texts, g.Model)
	}
	all := " " + strings.ToLower(strings.Join(texts, " ")) + " "
	switch {
	case strings.Contains(all, "grace") || strings.Contains(all, "gb200") || strings.Contains(all, "gh200") || strings.Contains(all, "gb300"):
		return "arm64", ""
	case strings.Contains(all, "intel"):
		return "x86_64", "GenuineIntel"
	case strings.Contains(all, " amd ") || strings.Contains(all, "amd epyc") || strings.Contains(all, "advanced micro devices") || strings.Contains(all, "(amd "):
		return "x86_64", "AuthenticAMD"
	}
	return "", ""
}

// cpuMask writes a kernel cpu list ("0-55,112-167") as the cpumap mask
// NCCL reads: 32-bit hex words, most significant first, wide enough for
// maxCPU.
func cpuMask(list string, maxCPU int) (string, bool) {
	list = strings.TrimSpace(list)
	if list == "" || maxCPU < 0 || maxCPU >= 1<<16 {
		return "", false
	}
	words := make([]uint32, maxCPU/32+1)
	for _, part := range strings.Split(list, ",") {
		lo, hi, ok := cpuRange(part)
		if !ok || hi > maxCPU {
			return "", false
		}
		for c := lo; c <= hi; c++ {
			words[c/32] |= 1 << (c % 32)
		}
	}
	parts := make([]string, len(words))
	for i := range words {
		parts[len(words)-1-i] = fmt.Sprintf("%08x", words[i])
	}
	return strings.Join(parts, ","), true
}

func maxCPUOf(list string) int {
	m := -1
	for _, part := range strings.Split(strings.TrimSpace(list), ",") {
		if _, hi, ok := cpuRange(part); ok && hi > m {
			m = hi
		}
	}
	return m
}

func cpuRange(part string) (int, int, bool) {
	part = strings.TrimSpace(part)
	a, b, isRange := strings.Cut(part, "-")
	lo, err := strconv.Atoi(a)
	if err != nil || lo < 0 {
		return 0, 0, false
	}
	hi := lo
	if isRange {
		if hi, err = strconv.Atoi(b); err != nil || hi < lo {
			return 0, 0, false
		}
	}
	if hi >= 1<<16 {
		return 0, 0, false
	}
	return lo, hi, true
}

// xmlComment keeps text safe inside an XML comment.
func xmlComment(s string) string { return strings.ReplaceAll(s, "--", "- -") }
