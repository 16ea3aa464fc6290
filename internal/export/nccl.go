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
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/natsort"
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

// NCCLTopo writes an NCCL_TOPO_FILE for one node (nccl-plugin.md §5): the
// system root, one cpu per NUMA node, the PCIe switches as pci bridges
// (NCCL collapses a switch's upstream and downstream ports into one pci
// element and leaves out root ports; so does this), each GPU as a pci
// element holding a gpu with its NVLinks, and each HCA as a pci element
// holding a nic with one net per ACTIVE port.
//
// The graph keeps only the structure it derives, not the PCI addresses,
// link generations, compute capabilities and GUIDs NCCL needs, so NCCLTopo
// reads the node's inventory (the master stores it beside the graph). The
// inventory is validated as graph.Build does.
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
func NCCLTopo(inv *ginv1.NodeInventory) ([]byte, error) {
	if inv == nil {
		return nil, errors.New("export: nccl topo: nil inventory")
	}
	if _, err := graph.Build([]*ginv1.NodeInventory{inv}, nil); err != nil {
		return nil, fmt.Errorf("export: nccl topo: %w", err)
	}
	node := inv.NodeName

	// PCIe bridges: which become pci elements, and the host bridge above each.
	type bridge struct {
		b    *ginv1.PcieBridge
		emit bool
	}
	bridges := map[string]*bridge{}
	for _, b := range inv.PcieBridges {
		k := normBus(b.Id)
		emit := b.ParentId != "" && (b.Kind == ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH || b.Kind == ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_UNSPECIFIED)
		bridges[k] = &bridge{b: b, emit: emit}
	}
	// place returns the nearest emitted bridge above a parent id ("" none)
	// and the NUMA node of the host bridge at the top (-1 unknown).
	place := func(parent string) (string, int32) {
		emitted, numa := "", int32(-1)
		for p, steps := normBus(parent), 0; p != "" && steps <= len(bridges); steps++ {
			br := bridges[p]
			if br == nil {
				break
			}
			if br.emit && emitted == "" {
				emitted = p
			}
			if br.b.ParentId == "" {
				numa = br.b.NumaNode
				break
			}
			p = normBus(br.b.ParentId)
		}
		return emitted, numa
	}

	cpus := map[int32]*xnode{}
	pcis := map[string]*xnode{}
	cpuOf := func(numa int32) *xnode {
		if c := cpus[numa]; c != nil {
			return c
		}
		c := &xnode{name: "cpu", key: fmt.Sprintf("%011d", int64(numa)+1<<31)}
		if numa < 0 {
			c.key = "~"
		}
		cpus[numa] = c
		return c
	}
	var attach func(parent string, devNUMA int32) *xnode
	attach = func(parent string, devNUMA int32) *xnode {
		emitted, numa := place(parent)
		if numa < 0 {
			numa = devNUMA
		}
		if emitted == "" {
			return cpuOf(numa)
		}
		if x := pcis[emitted]; x != nil {
			return x
		}
		br := bridges[emitted].b
		x := &xnode{name: "pci", key: emitted}
		x.attr("busid", emitted)
		x.attr("class", ncclClassBridge)
		addLink(x, br.Link)
		pcis[emitted] = x
		up := attach(br.ParentId, numa)
		up.children = append(up.children, x)
		return x
	}

	// GPUs.
	gpus := append([]*ginv1.Gpu(nil), inv.Gpus...)
	sort.Slice(gpus, func(i, j int) bool { return gpus[i].Index < gpus[j].Index })
	for _, g := range gpus {
		bus := normBus(g.PciBusId)
		if bus == "" {
			return nil, fmt.Errorf("export: nccl topo: node %s: GPU%d has no PCI bus id (NCCL finds GPUs by bus id)", node, g.Index)
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
		up := attach(g.PcieParentId, g.NumaNode)
		up.children = append(up.children, x)
	}

	// HCAs, in natural name order, ACTIVE ports only.
	hcas := append([]*ginv1.Hca(nil), inv.Hcas...)
	sort.SliceStable(hcas, func(i, j int) bool { return natsort.Less(hcas[i].Name, hcas[j].Name) })
	dev := 0
	for _, h := range hcas {
		var nets []*xnode
		ib := false
		for _, p := range h.Ports {
			if p.State != ginv1.PortState_PORT_STATE_ACTIVE {
				continue
			}
			if p.LinkLayer == ginv1.LinkLayer_LINK_LAYER_INFINIBAND {
				ib = true
			}
			nx := &xnode{name: "net"}
			nx.attr("name", h.Name)
			nx.attr("dev", strconv.Itoa(dev))
			dev++
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
		if len(nets) == 0 {
			continue
		}
		nic := &xnode{name: "nic", children: nets, hasDev: true}
		up := attach(h.PcieParentId, h.NumaNode)
		bus := normBus(h.PciBusId)
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

	// CPUs.
	cpuList := map[int32]string{}
	maxCPU := -1
	if inv.Host != nil {
		for _, n := range inv.Host.NumaNodes {
			cpuList[int32(n.Id)] = n.CpuList
			if m := maxCPUOf(n.CpuList); m > maxCPU {
				maxCPU = m
			}
		}
	}
	arch, vendor := cpuArch(inv)
	numas := make([]int32, 0, len(cpus))
	for n := range cpus {
		numas = append(numas, n)
	}
	sort.Slice(numas, func(i, j int) bool { return cpus[numas[i]].key < cpus[numas[j]].key })
	sys := &xnode{name: "system"}
	sys.attr("version", "1")
	for _, n := range numas {
		c := cpus[n]
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

	var b bytes.Buffer
	fmt.Fprintf(&b, "<!-- NCCL_TOPO_FILE for node %s, written by GIN from its inventory -->\n", xmlComment(node))
	writeXML(&b, sys, 0)
	return b.Bytes(), nil
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
			k = key{normBus(l.RemotePciBusId), ncclClassGPU}
		case ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_SWITCH:
			k = key{normBus(l.RemotePciBusId), ncclClassNVSwitch}
			if k.target == "" {
				k.target = ncclOffNodeNVSwitch
			}
		case ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_IBMNPU:
			k = key{normBus(l.RemotePciBusId), ncclClassCPU}
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

// normBus writes a PCI bus id in its canonical form (internal/devid); a
// string that is not one is compared trimmed and lower-cased.
func normBus(s string) string {
	if id, ok := devid.PCIBusID(s); ok {
		return id
	}
	return strings.ToLower(strings.TrimSpace(s))
}

// xmlComment keeps text safe inside an XML comment.
func xmlComment(s string) string { return strings.ReplaceAll(s, "--", "- -") }
