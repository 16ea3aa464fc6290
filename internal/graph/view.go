package graph

import (
	"sort"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// This file holds read-only views of the graph's structure for exporters
// (internal/export): plain values copied out of the graph, so a caller can
// never change a *Graph through them.

// SwitchView is one switch of the graph's fabric index.
type SwitchView struct {
	// GUID is the switch's node GUID normalised to 16 lower-case hex digits
	// (other identities, such as LLDP chassis ids, lower-cased).
	GUID        string
	Description string
	// Tier: 1 leaf, 2 spine, 3 core; derived when the fabric did not say,
	// 0 when no HCA or tiered switch reaches the switch.
	Tier uint32
	// Uplinks are the switches one or more tiers up that this switch is
	// cabled to, sorted by GUID, each with the narrowest cable to it.
	Uplinks []UplinkView
	// DownMBps and UpMBps are the capacities towards the hosts (or lower
	// tiers) and towards higher tiers, MB/s.
	DownMBps, UpMBps uint64
}

// UplinkView is a switch's cabling to one higher-tier switch.
type UplinkView struct {
	GUID string
	// MBps is the narrowest cable between the two switches (MB/s).
	MBps uint64
}

// Switches returns the fabric's switches in the order the fabric listed
// them; nil without a fabric.
func (g *Graph) Switches() []SwitchView {
	if g.fabric == nil || len(g.fabric.switches) == 0 {
		return nil
	}
	out := make([]SwitchView, len(g.fabric.switches))
	for i := range g.fabric.switches {
		s := &g.fabric.switches[i]
		v := SwitchView{GUID: s.guid, Description: s.desc, Tier: s.tier, DownMBps: s.downMBps, UpMBps: s.upMBps}
		for j, p := range s.parents {
			v.Uplinks = append(v.Uplinks, UplinkView{GUID: g.fabric.switches[p].guid, MBps: s.parentMBps[j]})
		}
		sort.Slice(v.Uplinks, func(a, b int) bool { return v.Uplinks[a].GUID < v.Uplinks[b].GUID })
		out[i] = v
	}
	return out
}

// NodeView is one node's structure as the graph holds it.
type NodeView struct {
	Name string
	// Info is NodeInfo(Name).
	Info NodeInfo
	// GPUs by NVML index.
	GPUs []GPUView
	// HCAs in natural name order (mlx5_2 before mlx5_10).
	HCAs []HCAView
}

// GPUView is one GPU of a node.
type GPUView struct {
	Index    uint32
	UUID     string
	PCIBusID string // normalised, lower case
	// NUMANode is the GPU's NUMA node (its host bridge's when known), -1 unknown.
	NUMANode int32
	// NVLinkDomain is "<cluster_uuid>.<clique_id>" when the GPU is in a
	// COMPLETED MNNVL clique.
	NVLinkDomain string
	// NVSwitchLinksUp counts the GPU's UP NVLinks to NVSwitches (local or
	// off-node); NVSwitches are the switches they reach: local switches by
	// PCI bus id, off-node ones as "nvlink-domain:<domain>".
	NVSwitchLinksUp int
	NVSwitches      []string
	// NVLinkMBps is the smallest per-link bandwidth of its UP NVLinks (MB/s).
	NVLinkMBps uint64
	// Peers are the other GPUs of the node it reaches over NVLink, by index.
	Peers []NVLinkPeerView
	// NearestPort is the nearest compute port ("mlx5_0/1"), "" none, and
	// NearestClass its PCIe class.
	NearestPort  string
	NearestClass Class
	// NearestC2C: the GPU reaches that port over its C2C link and its CPU's
	// PCIe (NCCL's P2C); NearestClass is then SYS, as nvidia-smi prints it.
	NearestC2C bool
	// PCIe is the GPU's way up the node's PCIe tree: its parent bridge
	// first, its host bridge last; nil when the inventory does not place it.
	PCIe []PCIeBridgeView
}

// PCIeBridgeView is one bridge of a node's PCIe tree. Exactly one of
// HostBridge, RootPort, Switch and DownstreamPort is set, or none for a
// bridge whose kind the inventory does not say.
type PCIeBridgeView struct {
	// ID is the bridge's id as the inventory has it: a canonical PCI bus id
	// ("0000:15:00.0"), or a host bridge's name ("pci0000:15").
	ID string
	// HostBridge: the CPU's root complex, the top of the tree.
	HostBridge bool
	// RootPort: a root port of the host bridge (part of it).
	RootPort bool
	// Switch: a PCIe switch (or its upstream port).
	Switch bool
	// DownstreamPort: a downstream port of the switch above it (part of it).
	DownstreamPort bool
	// NUMANode is the NUMA node of the host bridge above it, -1 unknown.
	NUMANode int32
}

// NVLinkPeerView is the NVLink connection of a GPU to another GPU of its node.
type NVLinkPeerView struct {
	GPU   uint32 // the peer's NVML index
	Count int    // bonded UP links, direct plus through a shared NVSwitch
	// ViaSwitch is the NVSwitch both reach ("" for direct links only).
	ViaSwitch string
	MBps      uint64
}

// HCAView is one HCA (PCI function) of a node.
type HCAView struct {
	Name     string
	Role     ginv1.HcaRole
	NUMANode int32 // -1 unknown
	Ports    []PortView
	// PCIe is the HCA's way up the PCIe tree, as GPUView.PCIe.
	PCIe []PCIeBridgeView
}

// PortView is one HCA port and where it meets the fabric.
type PortView struct {
	Port uint32
	// GUID is the port GUID normalised to 16 lower-case hex digits.
	GUID     string
	Active   bool
	RateMBps uint64
	// Rail is the port's position among the node's compute ports (rail
	// order), -1 when it is not a compute port.
	Rail int
	// Switch is the GUID (normalised) of the switch the port is cabled to:
	// from the fabric by port GUID, else from the inventory's fabric
	// neighbours; "" unknown. SwitchInFabric says whether the fabric knows
	// that switch.
	Switch         string
	SwitchInFabric bool
	// LinkMBps is the cable's rate (MB/s), 0 unknown.
	LinkMBps uint64
}

// NodeView returns the named node's structure.
func (g *Graph) NodeView(name string) (NodeView, bool) {
	n, ok := g.nodes.get(name)
	if !ok {
		return NodeView{}, false
	}
	info, _ := g.NodeInfo(name)
	v := NodeView{Name: name, Info: info, GPUs: make([]GPUView, len(n.gpus)), HCAs: make([]HCAView, len(n.hcas))}
	for i := range n.gpus {
		gp := &n.gpus[i]
		gv := GPUView{
			Index: gp.index, UUID: gp.uuid, PCIBusID: gp.pci.String(), NUMANode: gp.dev.numa, NVLinkDomain: gp.domain.String(),
			NVSwitchLinksUp: int(gp.swUp), NVSwitches: n.switchKeys(gp), NVLinkMBps: gp.linkMBps,
			NearestClass: gp.nearCls, NearestC2C: gp.nearP2C, PCIe: n.pcieAbove(gp.dev),
		}
		if gp.near >= 0 {
			gv.NearestPort = n.ports[gp.near].id.String()
		}
		for j := range n.gpus {
			if j == i {
				continue
			}
			if p := n.nvlink(i, j); p.count > 0 {
				gv.Peers = append(gv.Peers, NVLinkPeerView{GPU: n.gpus[j].index, Count: p.count, ViaSwitch: p.viaSwitch, MBps: p.mbps})
			}
		}
		v.GPUs[i] = gv
	}
	rail := make(map[int]int, len(n.computePort))
	for r, pi := range n.computePort {
		rail[int(pi)] = r
	}
	for i := range n.hcas {
		h := &n.hcas[i]
		hv := HCAView{Name: h.name.String(), Role: h.role, NUMANode: h.dev.numa, Ports: make([]PortView, h.numPorts), PCIe: n.pcieAbove(h.dev)}
		for j, pi := range h.portIndices() {
			p := &n.ports[pi]
			pv := PortView{Port: p.num, GUID: p.guidString(), Active: p.active(), RateMBps: p.rateMBps(), Rail: -1}
			if r, ok := rail[pi]; ok {
				pv.Rail = r
			}
			a := g.attachment(p)
			pv.LinkMBps = a.mbps
			switch {
			case a.sw >= 0:
				pv.Switch, pv.SwitchInFabric = g.fabric.switches[a.sw].guid, true
			case a.key != "":
				pv.Switch = a.key
			}
			hv.Ports[j] = pv
		}
		v.HCAs[i] = hv
	}
	return v, true
}

// NodeLeaf returns the GUID (normalised) of the switch the node's first
// compute port (rail 0) is cabled to, as NodeInfo.LeafSwitch names it; ok is
// false when the node is unknown or that switch is.
func (g *Graph) NodeLeaf(name string) (guid string, ok bool) {
	n, found := g.nodes.get(name)
	if !found || len(n.computePort) == 0 {
		return "", false
	}
	a := g.attachment(&n.ports[n.computePort[0]])
	switch {
	case a.sw >= 0:
		return g.fabric.switches[a.sw].guid, true
	case a.key != "":
		return a.key, true
	}
	return "", false
}
