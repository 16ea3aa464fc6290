package draw

import (
	"fmt"
	"io"
	"sort"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/natsort"
	"github.com/gin-topology/gin/internal/render"
)

// Bounds of a node's pictures (the inventory's own limits are larger):
// the matrix at most 160 devices a side, 64 NVLinks per GPU, 1024 PCIe
// rows.
const (
	maxMatrixDevices = 160
	maxNVLinks       = 64
	maxPCIeRows      = 1024
)

// classCSS is the class a topo -m cell is coloured by, and whether its text
// is drawn light on a dark fill.
func classCSS(c ginv1.PathClass) (string, bool) {
	switch c {
	case ginv1.PathClass_PATH_CLASS_SELF:
		return "c-self", false
	case ginv1.PathClass_PATH_CLASS_NVLINK:
		return "c-nv", true
	case ginv1.PathClass_PATH_CLASS_MNNVL:
		return "c-mnnvl", true
	case ginv1.PathClass_PATH_CLASS_PIX:
		return "c-pix", false
	case ginv1.PathClass_PATH_CLASS_PXB:
		return "c-pxb", false
	case ginv1.PathClass_PATH_CLASS_PHB:
		return "c-phb", false
	case ginv1.PathClass_PATH_CLASS_NODE:
		return "c-node", false
	case ginv1.PathClass_PATH_CLASS_SYS:
		return "c-sys", true
	case ginv1.PathClass_PATH_CLASS_NET:
		return "c-net", true
	}
	return "c-na", false
}

// Matrix draws a `topo -m` matrix as coloured cells: the same labels as
// `ginctl topo -m` (render.ClassLabel), one colour per class.
func Matrix(w io.Writer, m *ginv1.GetMatrixResponse) error {
	n := len(m.GetDevices())
	if len(m.GetCells()) != n*n {
		return fmt.Errorf("draw: matrix has %d devices but %d cells", n, len(m.GetCells()))
	}
	if n > maxMatrixDevices {
		return fmt.Errorf("draw: matrix of %d devices: at most %d drawn", n, maxMatrixDevices)
	}
	const cw, ch, head = 46, 20, 64
	label := func(d *ginv1.MatrixDevice) string {
		if n > 0 && m.Devices[0].GetNodeName() != d.GetNodeName() {
			return d.GetNodeName() + "/" + d.GetLabel()
		}
		return d.GetLabel()
	}
	multi := false
	for _, d := range m.GetDevices() {
		multi = multi || d.GetNodeName() != m.Devices[0].GetNodeName()
	}
	headW := head
	if multi {
		headW = 130
	}
	var s svg
	width, height := headW+n*cw+8, 24+n*ch+8
	s.start(width, height, "matrix", fmt.Sprintf("topo -m matrix of %d devices", n))
	for j, d := range m.GetDevices() {
		s.text(short(label(d), 8), "x", itoa(headW+j*cw+cw/2), "y", "18", "class", "mc")
	}
	for i, a := range m.GetDevices() {
		y := 24 + i*ch
		lab := label(a)
		if !multi {
			lab = a.GetLabel()
		}
		s.text(lab, "x", "4", "y", itoa(y+14), "class", "gl")
		for j, b := range m.GetDevices() {
			c := m.Cells[i*n+j]
			cls, dark := classCSS(c.GetClass())
			text := render.ClassLabel(c.GetClass(), c.GetCount())
			tip := fmt.Sprintf("%s → %s: %s", label(a), label(b), text)
			if bw := c.GetBottleneckMbPerS(); bw > 0 {
				tip += fmt.Sprintf(", %.1f GB/s", float64(bw)/1000)
			}
			x := headW + j*cw
			s.rect(x, y, cw-2, ch-2, tip, "class", cls)
			tc := "mc"
			if dark {
				tc = "mc dark"
			}
			s.text(text, "x", itoa(x+cw/2-1), "y", itoa(y+13), "class", tc)
		}
	}
	s.close("svg")
	_, err := w.Write(s.b.Bytes())
	return err
}

// linkClass is how an NVLink or port is drawn: l-up, l-deg (up but its
// error counters say degraded), l-down (down or failed).
func linkClass(up bool, h ginv1.LinkHealth) (string, string) {
	switch {
	case !up:
		return "l-down", "down"
	case h == ginv1.LinkHealth_LINK_HEALTH_FAILED:
		return "l-down", "failed (error counters)"
	case h == ginv1.LinkHealth_LINK_HEALTH_DEGRADED:
		return "l-deg", "degraded (error counters)"
	}
	return "l-up", "up"
}

// NVLinks draws a node's GPUs × NVLink grid: one cell per link, green up,
// amber degraded, red down or failed (with a dark frame so a fault shows
// in grey scale too). Every cell carries data-link="node/GPU<i>/nvlink<l>".
func NVLinks(w io.Writer, inv *ginv1.NodeInventory) error {
	gpus := append([]*ginv1.Gpu(nil), inv.GetGpus()...)
	sort.Slice(gpus, func(i, j int) bool { return gpus[i].GetIndex() < gpus[j].GetIndex() })
	links := 0
	for _, g := range gpus {
		for _, l := range g.GetNvlinks() {
			links = max(links, int(l.GetIndex())+1)
		}
	}
	if links > maxNVLinks {
		return fmt.Errorf("draw: NVLink index %d: at most %d drawn", links-1, maxNVLinks)
	}
	const cw, ch, head, tail = 22, 20, 64, 150
	var s svg
	width, height := head+max(links, 1)*cw+tail, 24+len(gpus)*ch+8
	s.start(width, height, "nvlinks", fmt.Sprintf("NVLinks of %d GPUs", len(gpus)))
	if links == 0 {
		s.text("No NVLinks.", "x", "4", "y", "18", "class", "note")
	}
	for l := range links {
		s.text(itoa(l), "x", itoa(head+l*cw+cw/2-1), "y", "18", "class", "mc")
	}
	node := inv.GetNodeName()
	for i, g := range gpus {
		y := 24 + i*ch
		s.text(fmt.Sprintf("GPU%d", g.GetIndex()), "x", "4", "y", itoa(y+14), "class", "gl")
		up := 0
		byIndex := map[uint32]*ginv1.NvLink{}
		for _, l := range g.GetNvlinks() {
			byIndex[l.GetIndex()] = l
		}
		for li := range links {
			x := head + li*cw
			l, ok := byIndex[uint32(li)]
			if !ok {
				s.rect(x, y, cw-2, ch-2, "", "class", "l-none")
				continue
			}
			isUp := l.GetState() == ginv1.LinkState_LINK_STATE_UP
			if isUp {
				up++
			}
			cls, word := linkClass(isUp, l.GetHealth())
			name := fmt.Sprintf("%s/GPU%d/nvlink%d", node, g.GetIndex(), li)
			tip := fmt.Sprintf("GPU%d NVLink %d: %s, NVLink%d %.0f GB/s", g.GetIndex(), li, word, l.GetVersion(), float64(l.GetBandwidthMbPerS())/1000)
			if r := l.GetRemotePciBusId(); r != "" {
				tip += fmt.Sprintf(", to %s %s", remoteWord(l.GetRemoteType()), r)
			}
			s.open("g", "data-link", name, "data-state", word)
			s.rect(x, y, cw-2, ch-2, tip, "class", cls)
			if cls != "l-up" {
				s.rect(x+2, y+2, cw-6, ch-6, "", "class", "l-mark")
			}
			s.close("g")
		}
		cls := "gs"
		if up < len(g.GetNvlinks()) {
			cls = "lbad"
		}
		s.text(fmt.Sprintf("%d/%d up", up, len(g.GetNvlinks())), "x", itoa(head+links*cw+8), "y", itoa(y+14), "class", cls)
	}
	s.close("svg")
	_, err := w.Write(s.b.Bytes())
	return err
}

func remoteWord(t ginv1.NvLinkRemoteType) string {
	switch t {
	case ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_GPU:
		return "GPU"
	case ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_SWITCH:
		return "NVSwitch"
	case ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_IBMNPU:
		return "NPU"
	}
	return "device"
}

// HCAs draws a node's HCA ports, one row each: a state mark
// (data-link="node/hca/port"), the HCA and its role, the rate, the logical
// and physical state, the link layer and the health verdict.
func HCAs(w io.Writer, inv *ginv1.NodeInventory) error {
	hcas := append([]*ginv1.Hca(nil), inv.GetHcas()...)
	sort.Slice(hcas, func(i, j int) bool { return natsort.Less(hcas[i].GetName(), hcas[j].GetName()) })
	rows := 0
	for _, h := range hcas {
		rows += len(h.GetPorts())
	}
	const rh = 20
	var s svg
	width, height := 760, 24+max(rows, 1)*rh+8
	s.start(width, height, "hcas", fmt.Sprintf("%d HCA ports", rows))
	cols := []struct {
		x    int
		head string
	}{{28, "port"}, {130, "role"}, {200, "rate"}, {380, "state"}, {520, "link"}, {620, "health"}}
	for _, c := range cols {
		s.text(c.head, "x", itoa(c.x), "y", "16", "class", "gl")
	}
	if rows == 0 {
		s.text("No HCAs.", "x", "4", "y", "38", "class", "note")
	}
	y := 24
	for _, h := range hcas {
		for _, p := range h.GetPorts() {
			cls, word := linkClass(portActive(p), p.GetHealth())
			name := fmt.Sprintf("%s/%s/%d", inv.GetNodeName(), h.GetName(), p.GetPort())
			s.open("g", "data-link", name, "data-state", word)
			s.rect(4, y+2, 16, 14, name+": "+word, "class", cls)
			if cls != "l-up" {
				s.rect(6, y+4, 12, 10, "", "class", "l-mark")
			}
			s.close("g")
			rate := p.GetRateText()
			if rate == "" {
				rate = fmt.Sprintf("%d Gb/s", p.GetRateGbps())
			}
			for i, t := range []string{fmt.Sprintf("%s/%d", h.GetName(), p.GetPort()), roleWord(h.GetRole()), rate,
				portStateWord(p.GetState()) + " / " + physWord(p.GetPhysState()), layerWord(p.GetLinkLayer()), healthWord(p.GetHealth())} {
				tc := "gs"
				if i == 0 {
					tc = ""
				}
				bad := p.GetHealth() == ginv1.LinkHealth_LINK_HEALTH_DEGRADED || p.GetHealth() == ginv1.LinkHealth_LINK_HEALTH_FAILED
				if (i == 3 && !portActive(p)) || (i == 5 && bad) {
					tc = "lbad"
				}
				s.text(t, "x", itoa(cols[i].x), "y", itoa(y+14), "class", tc)
			}
			y += rh
		}
	}
	s.close("svg")
	_, err := w.Write(s.b.Bytes())
	return err
}

func physWord(p ginv1.PortPhysState) string {
	w := strings.TrimPrefix(strings.ToLower(p.String()), "port_phys_state_")
	return strings.ReplaceAll(w, "_", " ")
}

func layerWord(l ginv1.LinkLayer) string {
	switch l {
	case ginv1.LinkLayer_LINK_LAYER_INFINIBAND:
		return "InfiniBand"
	case ginv1.LinkLayer_LINK_LAYER_ETHERNET:
		return "Ethernet"
	}
	return "unknown"
}

func healthWord(h ginv1.LinkHealth) string {
	switch h {
	case ginv1.LinkHealth_LINK_HEALTH_HEALTHY:
		return "healthy"
	case ginv1.LinkHealth_LINK_HEALTH_DEGRADED:
		return "degraded"
	case ginv1.LinkHealth_LINK_HEALTH_FAILED:
		return "failed"
	}
	return "no verdict"
}

// pcieRow is one line of the PCIe tree.
type pcieRow struct {
	depth int
	text  string
	cls   string
}

// PCIeTree draws a node's PCIe tree as an indented tree: host bridges (with
// their NUMA node), switches and ports, then the GPUs, HCAs and NVSwitches
// under them with their links (generation and width).
func PCIeTree(w io.Writer, inv *ginv1.NodeInventory) error {
	children := map[string][]pcieRow{}
	kids := map[string][]string{}
	var roots []string
	bridges := map[string]*ginv1.PcieBridge{}
	for _, b := range inv.GetPcieBridges() {
		bridges[b.GetId()] = b
	}
	for _, b := range inv.GetPcieBridges() {
		if p := b.GetParentId(); p != "" && bridges[p] != nil {
			kids[p] = append(kids[p], b.GetId())
		} else {
			roots = append(roots, b.GetId())
		}
	}
	var orphans []pcieRow
	dev := func(parent, text, cls string) {
		r := pcieRow{text: text, cls: cls}
		if bridges[parent] == nil {
			orphans = append(orphans, r)
			return
		}
		children[parent] = append(children[parent], r)
	}
	for _, g := range inv.GetGpus() {
		dev(g.GetPcieParentId(), fmt.Sprintf("GPU%d %s %s %s", g.GetIndex(), g.GetPciBusId(), linkWord(g.GetPcieLink()), g.GetModel()), "gl")
	}
	for _, h := range inv.GetHcas() {
		dev(h.GetPcieParentId(), fmt.Sprintf("%s %s %s %s (%s)", h.GetName(), h.GetPciBusId(), linkWord(h.GetPcieLink()), h.GetHcaType(), roleWord(h.GetRole())), "gl")
	}
	natsortStrings(roots)
	var rows []pcieRow
	var walk func(id string, depth int)
	walk = func(id string, depth int) {
		if len(rows) >= maxPCIeRows {
			return
		}
		b := bridges[id]
		text := id + " " + bridgeWord(b)
		if b.GetKind() == ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_HOST_BRIDGE {
			text += fmt.Sprintf(", NUMA %d", b.GetNumaNode())
		} else {
			text += " " + linkWord(b.GetLink())
		}
		if d := b.GetDescription(); d != "" {
			text += " " + d
		}
		rows = append(rows, pcieRow{depth: depth, text: text, cls: "gs"})
		cs := kids[id]
		natsortStrings(cs)
		for _, c := range cs {
			walk(c, depth+1)
		}
		ds := children[id]
		sort.SliceStable(ds, func(i, j int) bool { return natsort.Less(ds[i].text, ds[j].text) })
		for _, d := range ds {
			d.depth = depth + 1
			rows = append(rows, d)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	for _, o := range orphans {
		o.text += " (parent bridge not in the inventory)"
		rows = append(rows, o)
	}
	rows = rows[:min(len(rows), maxPCIeRows)]
	const rh, indent = 18, 18
	var s svg
	maxDepth := 0
	for _, r := range rows {
		maxDepth = max(maxDepth, r.depth)
	}
	width, height := 720+maxDepth*indent, 8+max(len(rows), 1)*rh
	s.start(width, height, "pcie", fmt.Sprintf("PCIe tree of %d rows", len(rows)))
	if len(rows) == 0 {
		s.text("No PCIe tree in the inventory.", "x", "4", "y", "18", "class", "note")
	}
	// Each row hangs from the last row above it one level up.
	lastAt := map[int]int{}
	for i, r := range rows {
		y := 4 + i*rh
		x := 8 + r.depth*indent
		if r.depth > 0 {
			if py, ok := lastAt[r.depth-1]; ok {
				px := 8 + (r.depth-1)*indent + 4
				s.empty("path", "d", fmt.Sprintf("M%d %dV%dH%d", px, py+14, y+9, x-2), "class", "tree")
			}
		}
		lastAt[r.depth] = y
		s.text(r.text, "x", itoa(x), "y", itoa(y+13), "class", r.cls)
	}
	s.close("svg")
	_, err := w.Write(s.b.Bytes())
	return err
}

func bridgeWord(b *ginv1.PcieBridge) string {
	switch b.GetKind() {
	case ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_HOST_BRIDGE:
		return "host bridge"
	case ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH:
		return "PCIe switch"
	case ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_ROOT_PORT:
		return "root port"
	case ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH_DOWNSTREAM_PORT:
		return "downstream port"
	}
	return "bridge"
}

func linkWord(l *ginv1.PcieLink) string {
	if l == nil || (l.GetGeneration() == 0 && l.GetWidth() == 0) {
		return "(link unknown)"
	}
	return fmt.Sprintf("Gen%d x%d", l.GetGeneration(), l.GetWidth())
}
