package graph

import (
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

func TestViewsSimCluster(t *testing.T) {
	invs, fab, _ := simCluster(t, "dgx-h100", 4, "leaf-groups=2,spines=2")
	g := mustBuild(t, invs, fab)

	sws := g.Switches()
	if len(sws) != 2*8+2 {
		t.Fatalf("%d switches, want 18", len(sws))
	}
	byGUID := map[string]SwitchView{}
	for _, s := range sws {
		byGUID[s.GUID] = s
	}
	for _, s := range sws {
		switch s.Tier {
		case 1:
			if len(s.Uplinks) != 2 || s.UpMBps == 0 || s.DownMBps == 0 {
				t.Errorf("leaf %s: %d uplinks, up %d, down %d", s.Description, len(s.Uplinks), s.UpMBps, s.DownMBps)
			}
			for _, u := range s.Uplinks {
				if byGUID[u.GUID].Tier != 2 || u.MBps != 400*125 {
					t.Errorf("leaf %s: uplink %+v", s.Description, u)
				}
			}
		case 2:
			if len(s.Uplinks) != 0 {
				t.Errorf("spine %s has uplinks", s.Description)
			}
		default:
			t.Errorf("switch %s: tier %d", s.Description, s.Tier)
		}
	}

	v, ok := g.NodeView("node000")
	if !ok {
		t.Fatal("NodeView(node000): not found")
	}
	if len(v.GPUs) != 8 || v.GPUs[0].NVSwitchLinksUp != 18 || len(v.GPUs[0].NVSwitches) != 4 || len(v.GPUs[0].Peers) != 7 {
		t.Fatalf("GPU0: %+v", v.GPUs[0])
	}
	if v.GPUs[0].NearestPort == "" || v.GPUs[0].NearestClass == ClassUnknown {
		t.Errorf("GPU0 nearest port %q class %v", v.GPUs[0].NearestPort, v.GPUs[0].NearestClass)
	}
	rails := 0
	for _, h := range v.HCAs {
		for _, p := range h.Ports {
			if p.Rail < 0 {
				if h.Role == ginv1.HcaRole_HCA_ROLE_COMPUTE {
					t.Errorf("%s/%d: compute port without a rail", h.Name, p.Port)
				}
				continue
			}
			rails++
			s, known := byGUID[p.Switch]
			if !p.SwitchInFabric || !known || s.Tier != 1 || p.LinkMBps != 400*125 || !strings.Contains(s.Description, "sg0-rail") {
				t.Errorf("%s/%d (rail %d): switch %q in fabric %v, link %d", h.Name, p.Port, p.Rail, p.Switch, p.SwitchInFabric, p.LinkMBps)
			}
		}
	}
	if rails != 8 {
		t.Errorf("%d compute ports, want 8", rails)
	}
	leaf, ok := g.NodeLeaf("node000")
	if !ok || byGUID[leaf].Description != v.Info.LeafSwitch {
		t.Errorf("NodeLeaf = %q, %v; LeafSwitch %q", leaf, ok, v.Info.LeafSwitch)
	}
	if _, ok := g.NodeView("nope"); ok {
		t.Error("NodeView(nope) found")
	}
	if _, ok := g.NodeLeaf("nope"); ok {
		t.Error("NodeLeaf(nope) found")
	}

	// Views are copies: changing one does not change the graph.
	v.GPUs[0].NVSwitches[0] = "changed"
	sws[0].Uplinks = nil
	if again, _ := g.NodeView("node000"); again.GPUs[0].NVSwitches[0] == "changed" {
		t.Error("NodeView shares memory with the graph")
	}
	if g.Switches()[0].Tier == 1 && len(g.Switches()[0].Uplinks) == 0 {
		t.Error("Switches shares memory with the graph")
	}

	// Without the fabric, ports still know their leaf from the inventory.
	nf := mustBuild(t, invs, nil)
	if nf.Switches() != nil {
		t.Error("Switches without a fabric: not nil")
	}
	v2, _ := nf.NodeView("node000")
	for _, h := range v2.HCAs {
		for _, p := range h.Ports {
			if p.Rail >= 0 && (p.Switch == "" || p.SwitchInFabric) {
				t.Errorf("no fabric: %s/%d switch %q in fabric %v", h.Name, p.Port, p.Switch, p.SwitchInFabric)
			}
		}
	}
	if leaf2, ok := nf.NodeLeaf("node000"); !ok || leaf2 != leaf {
		t.Errorf("NodeLeaf without fabric = %q, %v; want %q", leaf2, ok, leaf)
	}

	var zero Graph
	if zero.Switches() != nil {
		t.Error("zero Graph has switches")
	}
	if _, ok := zero.NodeView("x"); ok {
		t.Error("zero Graph has a node")
	}
}

// NodeView's PCIe lists are each device's bridges, nearest first, with the
// kind of each and the NUMA node of the host bridge above it.
func TestNodeViewPCIe(t *testing.T) {
	inv := &ginv1.NodeInventory{
		NodeName: "n1",
		PcieBridges: []*ginv1.PcieBridge{
			{Id: "pci0000:00", Kind: ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_HOST_BRIDGE, NumaNode: 1},
			{Id: "0000:00:01.0", Kind: ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_ROOT_PORT, ParentId: "pci0000:00"},
			{Id: "0000:01:00.0", Kind: ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH, ParentId: "0000:00:01.0"},
			{Id: "0000:02:00.0", Kind: ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH_DOWNSTREAM_PORT, ParentId: "0000:01:00.0"},
		},
		Gpus: []*ginv1.Gpu{{Uuid: "GPU-0", Index: 0, PciBusId: "0000:03:00.0", PcieParentId: "0000:02:00.0", NumaNode: -1}},
		Hcas: []*ginv1.Hca{{Name: "mlx5_0", PciBusId: "0000:04:00.0", NumaNode: 0}},
	}
	g := mustBuild(t, []*ginv1.NodeInventory{inv}, nil)
	v, ok := g.NodeView("n1")
	if !ok {
		t.Fatal("NodeView(n1): not found")
	}
	want := []PCIeBridgeView{
		{ID: "0000:02:00.0", DownstreamPort: true, NUMANode: 1},
		{ID: "0000:01:00.0", Switch: true, NUMANode: 1},
		{ID: "0000:00:01.0", RootPort: true, NUMANode: 1},
		{ID: "pci0000:00", HostBridge: true, NUMANode: 1},
	}
	got := v.GPUs[0].PCIe
	if len(got) != len(want) {
		t.Fatalf("GPU0 PCIe = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("GPU0 PCIe[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if v.GPUs[0].NUMANode != 1 {
		t.Errorf("GPU0 NUMA node %d, want its host bridge's (1)", v.GPUs[0].NUMANode)
	}
	if h := v.HCAs[0]; h.PCIe != nil || h.NUMANode != 0 {
		t.Errorf("unplaced HCA: PCIe %+v, NUMA %d; want none and its own NUMA node", h.PCIe, h.NUMANode)
	}
}
