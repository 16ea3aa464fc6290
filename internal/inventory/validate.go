package inventory

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// Documented limits of one inventory (see api/proto/gin/v1/inventory.proto).
const (
	MaxGPUs           = 64
	MaxNVLinksPerGPU  = 64
	MaxC2CLinks       = 64
	MaxC2CLinkMBps    = 1_000_000 // MB/s per link, like an NVLink's bound
	MaxNVSwitches     = 64
	MaxPCIeBridges    = 1024
	MaxHCAs           = 64
	MaxPortsPerHCA    = 16
	MaxGIDsPerPort    = 256
	MaxAddrsPerNetdev = 64
	MaxQPSummaries    = 4096
	MaxNeighbors      = 1024
	MaxNUMANodes      = 64
	MaxStringLen      = 256
	// MaxXIDsPerGPU bounds the distinct XID codes a GPU reports.
	MaxXIDsPerGPU      = 32
	MaxNodeNameLen     = 253
	maxViolationsShown = 20
)

// Violation is one reason an inventory is rejected: the field path
// ("gpus[3].uuid") and what is wrong with it.
type Violation struct {
	Field       string
	Description string
}

// ValidationError lists every violation found (at most maxViolationsShown).
type ValidationError struct {
	Node       string
	Violations []Violation
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid inventory for node %q: ", e.Node)
	for i, v := range e.Violations {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", v.Field, v.Description)
	}
	return b.String()
}

var nodeNameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

// ValidNodeName reports whether name is acceptable as a node name: a host
// name of letters, digits, '.', '_' and '-', at most 253 bytes.
func ValidNodeName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("is empty")
	case len(name) > MaxNodeNameLen:
		return fmt.Errorf("is %d bytes, more than %d", len(name), MaxNodeNameLen)
	case !nodeNameRE.MatchString(name):
		return fmt.Errorf("%q has characters outside [A-Za-z0-9._-] or starts/ends with a separator", name)
	}
	return nil
}

type validator struct {
	violations []Violation
}

func (v *validator) add(field, format string, args ...any) {
	if len(v.violations) < maxViolationsShown {
		v.violations = append(v.violations, Violation{Field: field, Description: fmt.Sprintf(format, args...)})
	}
}

func (v *validator) str(field, s string) {
	if len(s) > MaxStringLen {
		v.add(field, "is %d bytes, more than %d", len(s), MaxStringLen)
		return
	}
	if err := CheckText(s); err != nil {
		v.add(field, "%v", err)
	}
}

// CheckText refuses what a terminal or a log would interpret rather than
// print: invalid UTF-8, C0 and C1 control characters (ESC, newline, tab,
// DEL...) and the Unicode bidirectional overrides and isolates (U+202A..E,
// U+2066..9) that make text display in another order than it is stored.
func CheckText(s string) error {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return fmt.Errorf("invalid UTF-8 at byte %d", i)
			}
		case r < 0x20, r >= 0x7f && r < 0xa0:
			return fmt.Errorf("control character %U at byte %d", r, i)
		case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return fmt.Errorf("bidirectional control %U at byte %d", r, i)
		}
	}
	return nil
}

func (v *validator) count(field string, n, limit int) bool {
	if n > limit {
		v.add(field, "has %d entries, more than the limit of %d", n, limit)
		return false
	}
	return true
}

// Validate checks an inventory's limits and self-consistency: unique GPU
// UUIDs, indexes and PCI bus ids, NVLinks that point at devices that exist,
// a PCIe tree without dangling parents or cycles, unique HCA names and ports,
// device identities that are identities and in canonical form (Canonical).
// It returns a *ValidationError naming every offending field, or nil.
func Validate(inv *ginv1.NodeInventory) error {
	v := &validator{}
	if inv == nil {
		v.add("inventory", "is missing")
		return &ValidationError{Violations: v.violations}
	}
	if err := ValidNodeName(inv.GetNodeName()); err != nil {
		v.add("node_name", "%v", err)
	}
	v.str("source", inv.GetSource())
	validateHost(v, inv.GetHost())
	c := &invCheck{v: v, inv: inv, pci: map[string]string{}, gpuByPCI: map[string]bool{}}
	c.bridges = validateBridges(v, inv.GetPcieBridges())
	c.nvswitches()
	c.gpus()
	c.nvlinks() // once every device is known
	c.hcas()
	c.rest()
	validateIDs(v, inv)

	if len(v.violations) > 0 {
		return &ValidationError{Node: inv.GetNodeName(), Violations: v.violations}
	}
	return nil
}

// invCheck is one Validate: the violations found so far and what the
// devices checked so far claimed.
type invCheck struct {
	v   *validator
	inv *ginv1.NodeInventory
	// pci maps every PCI bus id used by a device to the field that used
	// it first (for uniqueness and NVLink targets); gpuByPCI holds the
	// GPUs' bus ids, bridges the PCIe bridges' ids.
	pci      map[string]string
	gpuByPCI map[string]bool
	bridges  map[string]bool
}

// claimPCI records field's bus id, or says which device holds it already.
func (c *invCheck) claimPCI(field, id string) {
	if id == "" {
		return
	}
	if prev, ok := c.pci[id]; ok {
		c.v.add(field, "PCI bus id %q is already used by %s", id, prev)
		return
	}
	c.pci[id] = field
}

// parentOK checks that a device's PCIe parent is a listed bridge.
func (c *invCheck) parentOK(field, parent string) {
	if parent != "" && !c.bridges[parent] {
		c.v.add(field, "names PCIe bridge %q, which is not in pcie_bridges", parent)
	}
}

// nvswitches checks the NVSwitches: count, unique ids, strings, bus ids.
func (c *invCheck) nvswitches() {
	v, inv := c.v, c.inv
	if v.count("nvswitches", len(inv.GetNvswitches()), MaxNVSwitches) {
		ids := map[string]int{}
		for i, s := range inv.GetNvswitches() {
			f := fmt.Sprintf("nvswitches[%d]", i)
			if s.GetId() == "" {
				v.add(f+".id", "is empty")
			} else if j, ok := ids[s.GetId()]; ok {
				v.add(f+".id", "duplicate of nvswitches[%d].id %q", j, s.GetId())
			} else {
				ids[s.GetId()] = i
			}
			v.str(f+".id", s.GetId())
			v.str(f+".model", s.GetModel())
			c.claimPCI(f+".pci_bus_id", s.GetPciBusId())
		}
	}
}

// gpus checks the GPUs: count, unique UUIDs, indexes and bus ids,
// strings, PCIe links, C2C and NVLink bounds, health.
func (c *invCheck) gpus() {
	v, inv := c.v, c.inv
	if v.count("gpus", len(inv.GetGpus()), MaxGPUs) {
		uuids := map[string]int{}
		indexes := map[uint32]int{}
		for i, g := range inv.GetGpus() {
			f := fmt.Sprintf("gpus[%d]", i)
			switch {
			case g.GetUuid() == "":
				v.add(f+".uuid", "is empty")
			default:
				if j, ok := uuids[g.GetUuid()]; ok {
					v.add(f+".uuid", "duplicate of gpus[%d].uuid %q", j, g.GetUuid())
				} else {
					uuids[g.GetUuid()] = i
				}
			}
			if j, ok := indexes[g.GetIndex()]; ok {
				v.add(f+".index", "duplicate of gpus[%d].index %d", j, g.GetIndex())
			} else {
				indexes[g.GetIndex()] = i
			}
			v.str(f+".uuid", g.GetUuid())
			v.str(f+".model", g.GetModel())
			v.str(f+".serial", g.GetSerial())
			v.str(f+".architecture", g.GetArchitecture())
			c.claimPCI(f+".pci_bus_id", g.GetPciBusId())
			c.gpuByPCI[g.GetPciBusId()] = true
			c.parentOK(f+".pcie_parent_id", g.GetPcieParentId())
			validatePCIeLink(v, f+".pcie_link", g.GetPcieLink())
			if fb := g.GetFabric(); fb != nil {
				v.str(f+".fabric.cluster_uuid", fb.GetClusterUuid())
			}
			if c := g.GetC2C(); c != nil {
				if c.GetLinksUp() > MaxC2CLinks {
					v.add(f+".c2c.links_up", "%d, at most %d", c.GetLinksUp(), MaxC2CLinks)
				}
				if c.GetLinkMbPerS() > MaxC2CLinkMBps {
					v.add(f+".c2c.link_mb_per_s", "%d MB/s is beyond any C2C link", c.GetLinkMbPerS())
				}
			}
			v.count(f+".nvlinks", len(g.GetNvlinks()), MaxNVLinksPerGPU)
			v.str(f+".vbios_version", g.GetVbiosVersion())
			validateGPUHealth(v, f+".health", g.GetHealth())
		}
	}
}

// nvlinks checks every GPU's NVLinks: unique indexes, known generations,
// bandwidth bounds, and remote ends that are devices of this node.
func (c *invCheck) nvlinks() {
	v, inv := c.v, c.inv
	for i, g := range inv.GetGpus() {
		if i >= MaxGPUs || len(g.GetNvlinks()) > MaxNVLinksPerGPU {
			break
		}
		links := map[uint32]int{}
		for j, l := range g.GetNvlinks() {
			f := fmt.Sprintf("gpus[%d].nvlinks[%d]", i, j)
			if k, ok := links[l.GetIndex()]; ok {
				v.add(f+".index", "duplicate of nvlinks[%d].index %d", k, l.GetIndex())
			} else {
				links[l.GetIndex()] = j
			}
			if l.GetVersion() > 10 {
				v.add(f+".version", "NVLink version %d is not a known generation", l.GetVersion())
			}
			if l.GetBandwidthMbPerS() > 1_000_000 {
				v.add(f+".bandwidth_mb_per_s", "%d MB/s is beyond any NVLink", l.GetBandwidthMbPerS())
			}
			remote := l.GetRemotePciBusId()
			switch l.GetRemoteType() {
			case ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_GPU:
				switch {
				case remote == "":
					v.add(f+".remote_pci_bus_id", "is empty for a GPU-to-GPU link")
				case remote == g.GetPciBusId():
					v.add(f+".remote_pci_bus_id", "points at the GPU itself")
				case !c.gpuByPCI[remote]:
					v.add(f+".remote_pci_bus_id", "points at GPU %q, which does not exist on this node", remote)
				}
			case ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_SWITCH:
				// An empty remote is an NVSwitch outside the node (MNNVL rack switches).
				if remote != "" && !hasSwitch(inv, remote) {
					v.add(f+".remote_pci_bus_id", "points at NVSwitch %q, which is not in nvswitches", remote)
				}
			}
		}
	}
}

// hcas checks the HCAs and their ports: count, unique names and port
// numbers, strings, bus ids, PCIe links, rates, GIDs, netdevs.
func (c *invCheck) hcas() {
	v, inv := c.v, c.inv
	if v.count("hcas", len(inv.GetHcas()), MaxHCAs) {
		names := map[string]int{}
		for i, h := range inv.GetHcas() {
			f := fmt.Sprintf("hcas[%d]", i)
			if h.GetName() == "" {
				v.add(f+".name", "is empty")
			} else if j, ok := names[h.GetName()]; ok {
				v.add(f+".name", "duplicate of hcas[%d].name %q", j, h.GetName())
			} else {
				names[h.GetName()] = i
			}
			for _, s := range []struct{ f, s string }{{".name", h.GetName()}, {".node_guid", h.GetNodeGuid()}, {".sys_image_guid", h.GetSysImageGuid()}, {".hca_type", h.GetHcaType()}, {".board_id", h.GetBoardId()}, {".firmware_version", h.GetFirmwareVersion()}} {
				v.str(f+s.f, s.s)
			}
			c.claimPCI(f+".pci_bus_id", h.GetPciBusId())
			c.parentOK(f+".pcie_parent_id", h.GetPcieParentId())
			validatePCIeLink(v, f+".pcie_link", h.GetPcieLink())
			if !v.count(f+".ports", len(h.GetPorts()), MaxPortsPerHCA) {
				continue
			}
			ports := map[uint32]int{}
			for j, p := range h.GetPorts() {
				pf := fmt.Sprintf("%s.ports[%d]", f, j)
				if p.GetPort() == 0 {
					v.add(pf+".port", "is 0; ports are numbered from 1")
				} else if k, ok := ports[p.GetPort()]; ok {
					v.add(pf+".port", "duplicate of ports[%d].port %d", k, p.GetPort())
				} else {
					ports[p.GetPort()] = j
				}
				v.str(pf+".port_guid", p.GetPortGuid())
				v.str(pf+".rate_text", p.GetRateText())
				if p.GetRateGbps() > 100_000 {
					v.add(pf+".rate_gbps", "%d Gb/s is beyond any port", p.GetRateGbps())
				}
				if v.count(pf+".gids", len(p.GetGids()), MaxGIDsPerPort) {
					for k, gid := range p.GetGids() {
						v.str(fmt.Sprintf("%s.gids[%d]", pf, k), gid)
					}
				}
				if nd := p.GetNetdev(); nd != nil {
					v.str(pf+".netdev.name", nd.GetName())
					v.str(pf+".netdev.mac", nd.GetMac())
					v.count(pf+".netdev.ipv4_addresses", len(nd.GetIpv4Addresses()), MaxAddrsPerNetdev)
					v.count(pf+".netdev.ipv6_addresses", len(nd.GetIpv6Addresses()), MaxAddrsPerNetdev)
				}
			}
		}
	}
}

// rest checks the QP summaries' count and the fabric neighbours.
func (c *invCheck) rest() {
	v, inv := c.v, c.inv
	v.count("qp_summaries", len(inv.GetQpSummaries()), MaxQPSummaries)
	if v.count("fabric_neighbors", len(inv.GetFabricNeighbors()), MaxNeighbors) {
		for i, n := range inv.GetFabricNeighbors() {
			f := fmt.Sprintf("fabric_neighbors[%d]", i)
			v.str(f+".switch_guid", n.GetSwitchGuid())
			v.str(f+".switch_description", n.GetSwitchDescription())
			if n.GetHca() == "" {
				v.add(f+".hca", "is empty")
			}
		}
	}
}

func hasSwitch(inv *ginv1.NodeInventory, pci string) bool {
	for _, s := range inv.GetNvswitches() {
		if s.GetPciBusId() == pci || s.GetId() == pci {
			return true
		}
	}
	return false
}

func validateHost(v *validator, h *ginv1.Host) {
	if h == nil {
		return
	}
	for _, s := range []struct{ f, s string }{{"host.hostname", h.GetHostname()}, {"host.machine_id", h.GetMachineId()}, {"host.system_model", h.GetSystemModel()}, {"host.kernel_version", h.GetKernelVersion()}, {"host.driver_version", h.GetDriverVersion()}, {"host.cuda_driver_version", h.GetCudaDriverVersion()}} {
		v.str(s.f, s.s)
	}
	if io := h.GetIommu(); io != nil {
		v.str("host.iommu.cmdline", io.GetCmdline())
		if _, ok := ginv1.IommuMode_name[int32(io.GetMode())]; !ok {
			v.add("host.iommu.mode", "unknown IOMMU mode %d", io.GetMode())
		}
	}
	if !v.count("host.numa_nodes", len(h.GetNumaNodes()), MaxNUMANodes) {
		return
	}
	seen := map[uint32]int{}
	for i, n := range h.GetNumaNodes() {
		f := fmt.Sprintf("host.numa_nodes[%d]", i)
		if j, ok := seen[n.GetId()]; ok {
			v.add(f+".id", "duplicate of host.numa_nodes[%d].id %d", j, n.GetId())
		}
		seen[n.GetId()] = i
		v.str(f+".cpu_list", n.GetCpuList())
	}
}

func validatePCIeLink(v *validator, field string, l *ginv1.PcieLink) {
	if l == nil {
		return
	}
	if l.GetGeneration() > 7 {
		v.add(field+".generation", "PCIe generation %d does not exist", l.GetGeneration())
	}
	if l.GetMaxGeneration() > 7 {
		v.add(field+".max_generation", "PCIe generation %d does not exist", l.GetMaxGeneration())
	}
	for _, w := range []struct {
		f string
		w uint32
	}{{".width", l.GetWidth()}, {".max_width", l.GetMaxWidth()}} {
		switch w.w {
		case 0, 1, 2, 4, 8, 12, 16, 32:
		default:
			v.add(field+w.f, "x%d is not a PCIe link width", w.w)
		}
	}
}

// validateGPUHealth bounds a GPU's error state: the XID list, and values
// that fit the registers NVML reads them from.
func validateGPUHealth(v *validator, field string, h *ginv1.GpuHealth) {
	if h == nil {
		return
	}
	if h.GetClockEventReasons() > 0xffffffff {
		v.add(field+".clock_event_reasons", "0x%x is wider than NVML's reason mask", h.GetClockEventReasons())
	}
	if !v.count(field+".xids", len(h.GetXids()), MaxXIDsPerGPU) {
		return
	}
	seen := map[uint32]int{}
	for i, x := range h.GetXids() {
		f := fmt.Sprintf("%s.xids[%d]", field, i)
		if x.GetXid() == 0 || x.GetXid() > 0xffff {
			v.add(f+".xid", "XID %d is not an XID code", x.GetXid())
		}
		if j, ok := seen[x.GetXid()]; ok {
			v.add(f+".xid", "duplicate of xids[%d].xid %d", j, x.GetXid())
		}
		seen[x.GetXid()] = i
	}
}

// validateBridges checks the PCIe tree and returns the set of bridge ids.
func validateBridges(v *validator, bs []*ginv1.PcieBridge) map[string]bool {
	ids := map[string]bool{}
	if !v.count("pcie_bridges", len(bs), MaxPCIeBridges) {
		return ids
	}
	parent := map[string]string{}
	for i, b := range bs {
		f := fmt.Sprintf("pcie_bridges[%d]", i)
		v.str(f+".id", b.GetId())
		v.str(f+".description", b.GetDescription())
		switch {
		case b.GetId() == "":
			v.add(f+".id", "is empty")
			continue
		case ids[b.GetId()]:
			v.add(f+".id", "duplicate bridge id %q", b.GetId())
			continue
		}
		ids[b.GetId()] = true
		parent[b.GetId()] = b.GetParentId()
		if b.GetKind() == ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_HOST_BRIDGE && b.GetParentId() != "" {
			v.add(f+".parent_id", "a host bridge has no parent, got %q", b.GetParentId())
		}
		validatePCIeLink(v, f+".link", b.GetLink())
		if a := b.GetAcs(); a != nil && (a.GetCapability() > 0xffff || a.GetControl() > 0xffff) {
			v.add(f+".acs", "ACS registers are 16 bits, got capability 0x%x control 0x%x", a.GetCapability(), a.GetControl())
		}
	}
	for i, b := range bs {
		p := b.GetParentId()
		if p != "" && !ids[p] {
			v.add(fmt.Sprintf("pcie_bridges[%d].parent_id", i), "names bridge %q, which is not in pcie_bridges", p)
		}
	}
	// Cycle check: walking up from any bridge must end within len(bs) steps.
	for i, b := range bs {
		cur, steps := b.GetId(), 0
		for cur != "" && steps <= len(bs) {
			cur = parent[cur]
			steps++
		}
		if cur != "" {
			v.add(fmt.Sprintf("pcie_bridges[%d].parent_id", i), "bridge %q is part of a parent cycle", b.GetId())
			break
		}
	}
	return ids
}
