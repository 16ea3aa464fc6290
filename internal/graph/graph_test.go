package graph

import (
	"fmt"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"google.golang.org/protobuf/proto"
)

func TestIntraNodePaths(t *testing.T) {
	tests := []struct {
		profile  string
		a, b     int
		label    string
		mbps     uint64
		nvlinks  int
		hopKinds string
	}{
		{"dgx-h100", 0, 1, "NV18", 18 * 25000, 18, "gpu nvswitch gpu"},
		{"dgx-h100", 3, 7, "NV18", 18 * 25000, 18, "gpu nvswitch gpu"},
		{"dgx-a100", 0, 7, "NV12", 12 * 25000, 12, "gpu nvswitch gpu"},
		{"hgx-b200", 0, 5, "NV18", 18 * 50000, 18, "gpu nvswitch gpu"},
		{"gb200-nvl72", 0, 3, "NV18", 18 * 50000, 18, "gpu nvswitch gpu"},
		{"rtx3090-nvlink-pair", 0, 1, "NV4", 4 * 14062, 4, "gpu gpu"},
		{"pcie-8gpu", 0, 1, "PIX", 31508, 0, "gpu pcie gpu"},
		{"pcie-8gpu", 0, 2, "NODE", 31508, 0, "gpu pcie host-bridge host-bridge pcie gpu"},
		{"pcie-8gpu", 0, 4, "SYS", 31508, 0, "gpu pcie host-bridge cpu cpu host-bridge pcie gpu"},
		{"pcie-8gpu", 5, 5, "X", 0, 0, "gpu"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/GPU%d-GPU%d", tc.profile, tc.a, tc.b), func(t *testing.T) {
			g := mustBuild(t, []*ginv1.NodeInventory{collect(t, simNode(t, tc.profile, "n1", 0, nil))}, nil)
			p := mustPath(t, g, fmt.Sprintf("n1/GPU%d", tc.a), fmt.Sprintf("n1/%d", tc.b))
			if p.Label() != tc.label || p.BottleneckMBps != tc.mbps || p.NVLinks != tc.nvlinks {
				t.Errorf("got %s %d MB/s %d links, want %s %d MB/s %d links", p.Label(), p.BottleneckMBps, p.NVLinks, tc.label, tc.mbps, tc.nvlinks)
			}
			var kinds []string
			for _, h := range p.Hops {
				kinds = append(kinds, h.Kind)
			}
			if got := strings.Join(kinds, " "); got != tc.hopKinds {
				t.Errorf("hops %q, want %q", got, tc.hopKinds)
			}
		})
	}
}

func TestPCIe8GPUNICs(t *testing.T) {
	g := mustBuild(t, []*ginv1.NodeInventory{collect(t, simNode(t, "pcie-8gpu", "n1", 0, nil))}, nil)
	m, err := g.Matrix(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	idx := map[string]int{}
	for i, d := range m.Devices {
		idx[d.Label] = i
	}
	for _, tc := range []struct{ a, b, want string }{
		{"GPU0", "NIC0", "PIX"}, {"GPU1", "NIC0", "PIX"}, {"GPU2", "NIC0", "NODE"},
		{"GPU4", "NIC1", "PIX"}, {"GPU0", "NIC1", "SYS"}, {"NIC0", "NIC1", "SYS"},
	} {
		if got := m.At(idx[tc.a], idx[tc.b]).Label(); got != tc.want {
			t.Errorf("%s-%s: got %s, want %s", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestGB200TrayPCIe(t *testing.T) {
	g := mustBuild(t, []*ginv1.NodeInventory{collect(t, simNode(t, "gb200-nvl72", "tray", 0, nil))}, nil)
	m, err := g.Matrix(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	// Devices: GPU0-3, NIC0-5 (mlx5_0-3 compute, mlx5_4-5 BlueField-3
	// storage). A real tray (sgl-project/sglang#11208) prints NV18 between
	// every GPU pair and SYS for every GPU↔NIC cell, even on the GPU's own
	// Grace; the bandwidth of a same-Grace cell is the NIC's PCIe Gen5 x16
	// link (the C2C link is wider), not a cross-socket figure.
	for _, tc := range []struct {
		i, j int
		want string
		mbps uint64
	}{
		{0, 4, "SYS", 63015}, {0, 5, "SYS", 63015}, {1, 4, "SYS", 63015}, {0, 6, "SYS", 63015},
		{3, 7, "SYS", 63015}, {2, 4, "SYS", 63015}, {0, 8, "SYS", 63015}, {0, 9, "SYS", 63015},
		{0, 1, "NV18", 0}, {2, 3, "NV18", 0},
	} {
		c := m.At(tc.i, tc.j)
		if got := c.Label(); got != tc.want || tc.mbps != 0 && c.BottleneckMBps != tc.mbps {
			t.Errorf("%s-%s: %s %d MB/s, want %s %d", m.Devices[tc.i].Label, m.Devices[tc.j].Label, got, c.BottleneckMBps, tc.want, tc.mbps)
		}
	}
	for i, want := range []struct {
		cpus string
		numa int
	}{{"0-71", 0}, {"0-71", 0}, {"72-143", 1}, {"72-143", 1}} {
		if d := m.Devices[i]; d.CPUAffinity != want.cpus || d.NUMANode != want.numa {
			t.Errorf("%s: CPU affinity %q NUMA %d, want %q %d", d.Label, d.CPUAffinity, d.NUMANode, want.cpus, want.numa)
		}
	}
	// Nearest compute NIC: over C2C to a NIC of the GPU's own Grace (NCCL's
	// P2C), one NIC per GPU: GPU0 mlx5_0, GPU1 mlx5_1, GPU2 mlx5_2, GPU3 mlx5_3.
	v, _ := g.NodeView("tray")
	for i, gv := range v.GPUs {
		if want := fmt.Sprintf("mlx5_%d/1", i); gv.NearestPort != want || !gv.NearestC2C || gv.NearestClass != ClassSYS {
			t.Errorf("GPU%d nearest %s (C2C %v, %v), want %s over C2C, SYS", i, gv.NearestPort, gv.NearestC2C, gv.NearestClass, want)
		}
	}
}

// TestGB200C2CPath: two trays in different racks (no shared NVLink domain)
// talk over the NICs; the path is GPU→C2C→Grace→PCIe→NIC at each end, so
// GPUDirect RDMA is kept and the bottleneck is the 400G port, not a
// cross-socket PCIe path. Without the C2C report (an inventory that does
// not carry it) the same GPUs reach the NIC through the host: no GPUDirect.
func TestGB200C2CPath(t *testing.T) {
	a := collect(t, simNode(t, "gb200-nvl72", "tray-a", 0, nil))
	b := collect(t, simNode(t, "gb200-nvl72", "tray-b", 18, nil)) // the next rack
	for _, tc := range []struct {
		name     string
		c2c      bool
		gdr, via bool
	}{{"with C2C", true, true, true}, {"without C2C", false, false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			ia, ib := proto.Clone(a).(*ginv1.NodeInventory), proto.Clone(b).(*ginv1.NodeInventory)
			if !tc.c2c {
				for _, inv := range []*ginv1.NodeInventory{ia, ib} {
					for _, gp := range inv.Gpus {
						gp.C2C = nil
					}
				}
			}
			g := mustBuild(t, []*ginv1.NodeInventory{ia, ib}, nil)
			p, err := g.Path(GPURef{Node: "tray-a", Index: 1}, GPURef{Node: "tray-b", Index: 1})
			if err != nil {
				t.Fatal(err)
			}
			if p.Class != ClassNET || p.GPUDirect != tc.gdr || p.C2C != tc.via {
				t.Fatalf("path %s GPUDirect %v C2C %v, want NET %v %v", p.Label(), p.GPUDirect, p.C2C, tc.gdr, tc.via)
			}
			if tc.c2c && (p.FromNIC != "tray-a/mlx5_1" || p.ToNIC != "tray-b/mlx5_1") {
				t.Errorf("NICs %s → %s, want each tray's mlx5_1 (GPU1's own Grace)", p.FromNIC, p.ToNIC)
			}
			// With C2C the route names the Grace crossed at each end, and
			// the port's PCIe side (the C2C link is wider) bounds nothing
			// below the 400G port.
			var cpus []string
			for _, h := range p.Hops {
				if h.Kind == "cpu" {
					cpus = append(cpus, h.Node+"/"+h.ID)
				}
			}
			wantCPUs := "tray-a/numa0 (C2C),tray-b/numa0 (C2C)"
			if !tc.c2c {
				wantCPUs = ""
			}
			if got := strings.Join(cpus, ","); got != wantCPUs || p.BottleneckMBps != 50000 {
				t.Errorf("CPU hops %q bottleneck %d MB/s, want %q 50000", got, p.BottleneckMBps, wantCPUs)
			}
		})
	}
}

func TestSYSCappedByInterSocket(t *testing.T) {
	g := mustBuild(t, []*ginv1.NodeInventory{collect(t, simNode(t, "dgx-h100", "n1", 0, nil))}, nil)
	m, err := g.Matrix([]string{"n1"}, true)
	if err != nil {
		t.Fatal(err)
	}
	// GPU0 (socket 0) to mlx5_6 (NIC6, socket 1): Gen5 x16 capped by 62400 MB/s UPI.
	if c := m.At(0, 8+6); c.Class != ClassSYS || c.BottleneckMBps != 62400 {
		t.Errorf("GPU0-NIC6: %s %d, want SYS 62400", c.Label(), c.BottleneckMBps)
	}
	if c := m.At(0, 8); c.Class != ClassPXB || c.BottleneckMBps != 63015 {
		t.Errorf("GPU0-NIC0: %s %d, want PXB 63015", c.Label(), c.BottleneckMBps)
	}
}

func TestNVLinkDown(t *testing.T) {
	t.Run("dgx-h100 NV18 to NV17", func(t *testing.T) {
		src := simNode(t, "dgx-h100", "n1", 0, nil)
		if err := src.SetNVLinkState(0, 0, false); err != nil {
			t.Fatal(err)
		}
		g := mustBuild(t, []*ginv1.NodeInventory{collect(t, src)}, nil)
		if p := mustPath(t, g, "n1/GPU0", "n1/GPU1"); p.Label() != "NV17" || p.BottleneckMBps != 17*25000 {
			t.Errorf("GPU0-GPU1: %s %d, want NV17 425000", p.Label(), p.BottleneckMBps)
		}
		if p := mustPath(t, g, "n1/GPU1", "n1/GPU2"); p.Label() != "NV18" {
			t.Errorf("GPU1-GPU2: %s, want NV18", p.Label())
		}
		info, _ := g.NodeInfo("n1")
		if info.NVLinksUp != 143 || info.NVLinksTotal != 144 {
			t.Errorf("NodeInfo NVLinks %d/%d, want 143/144", info.NVLinksUp, info.NVLinksTotal)
		}
	})
	t.Run("rtx3090 NV4 to NV3 to PHB", func(t *testing.T) {
		src := simNode(t, "rtx3090-nvlink-pair", "ws", 0, nil)
		if err := src.SetNVLinkState(1, 2, false); err != nil {
			t.Fatal(err)
		}
		g := mustBuild(t, []*ginv1.NodeInventory{collect(t, src)}, nil)
		if p := mustPath(t, g, "ws/GPU0", "ws/GPU1"); p.Label() != "NV3" {
			t.Errorf("one link down: %s, want NV3", p.Label())
		}
		for l := range 4 {
			if err := src.SetNVLinkState(0, l, false); err != nil {
				t.Fatal(err)
			}
		}
		g = mustBuild(t, []*ginv1.NodeInventory{collect(t, src)}, nil)
		if p := mustPath(t, g, "ws/GPU0", "ws/GPU1"); p.Label() != "PHB" || p.BottleneckMBps != 31508 {
			t.Errorf("all links down: %s %d, want PHB 31508", p.Label(), p.BottleneckMBps)
		}
	})
}

func TestMNNVL(t *testing.T) {
	var invs []*ginv1.NodeInventory
	for _, idx := range []int{0, 1, 18} {
		invs = append(invs, collect(t, simNode(t, "gb200-nvl72", fmt.Sprintf("tray%02d", idx), idx, nil)))
	}
	g := mustBuild(t, invs, nil)
	p := mustPath(t, g, "tray00/GPU0", "tray01/GPU3")
	if p.Class != ClassMNNVL || p.Label() != "MNNVL" || p.NVLinks != 18 || p.BottleneckMBps != 18*50000 {
		t.Errorf("same rack: %s %d links %d MB/s, want MNNVL 18 900000", p.Label(), p.NVLinks, p.BottleneckMBps)
	}
	p = mustPath(t, g, "tray00/GPU0", "tray18/GPU0")
	if p.Class != ClassNET || p.SwitchHops != 0 || p.Note == "" {
		t.Errorf("other rack without fabric: %s hops %d note %q, want NET 0 with a note", p.Label(), p.SwitchHops, p.Note)
	}
	i0, _ := g.NodeInfo("tray00")
	i1, _ := g.NodeInfo("tray01")
	i18, _ := g.NodeInfo("tray18")
	if i0.NVLinkDomain == "" || i0.NVLinkDomain != i1.NVLinkDomain || i0.NVLinkDomain == i18.NVLinkDomain {
		t.Errorf("NVLink domains %q %q %q: want the first two equal, the third different", i0.NVLinkDomain, i1.NVLinkDomain, i18.NVLinkDomain)
	}
	if !strings.HasSuffix(i0.NVLinkDomain, ".1") {
		t.Errorf("domain %q: want <cluster_uuid>.1", i0.NVLinkDomain)
	}
}

func TestNETPaths(t *testing.T) {
	tests := []struct {
		name, profile, spec string
		nodes               int
		a, b                string
		label               string
		mbps                uint64
		oversub             float64
		gpuDirect           bool
	}{
		{"same leaf", "dgx-h100", "leaf-groups=2,spines=4,oversub=1", 4, "node000/GPU0", "node001/GPU0", "NET1", 50000, 1, true},
		{"cross spine", "dgx-h100", "leaf-groups=2,spines=4,oversub=1", 4, "node000/GPU0", "node002/GPU0", "NET3", 50000, 1, true},
		{"cross rail same group", "dgx-h100", "leaf-groups=2,spines=4,oversub=1", 4, "node000/GPU0", "node001/GPU5", "NET3", 50000, 1, true},
		{"oversubscribed", "dgx-h100", "leaf-groups=2,spines=4,oversub=2", 8, "node000/GPU3", "node007/GPU3", "NET3", 50000, 2, true},
		{"a100 HDR", "dgx-a100", "leaf-groups=1,spines=2", 2, "node000/GPU1", "node001/GPU1", "NET1", 25000, 1, true},
		{"roce pcie-8gpu", "pcie-8gpu", "leaf-groups=2,spines=2", 4, "node000/GPU2", "node003/GPU6", "NET3", 12500, 1, false},
		{"gb200 cross rack", "gb200-nvl72", "leaf-groups=2,spines=4", 36, "node000/GPU0", "node035/GPU0", "NET3", 50000, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			invs, fab, _ := simCluster(t, tc.profile, tc.nodes, tc.spec)
			g := mustBuild(t, invs, fab)
			p := mustPath(t, g, tc.a, tc.b)
			if p.Label() != tc.label || p.BottleneckMBps != tc.mbps || p.Oversubscription != tc.oversub || p.GPUDirect != tc.gpuDirect {
				t.Errorf("got %s %d MB/s oversub %g gpudirect %v (note %q), want %s %d %g %v",
					p.Label(), p.BottleneckMBps, p.Oversubscription, p.GPUDirect, p.Note, tc.label, tc.mbps, tc.oversub, tc.gpuDirect)
			}
			if p.FromNIC == "" || p.ToNIC == "" || p.Note != "" {
				t.Errorf("NICs %q %q note %q", p.FromNIC, p.ToNIC, p.Note)
			}
			// Hops: gpu, port, SwitchHops switches, port, gpu; plus the
			// Grace crossed at each end over C2C.
			want := p.SwitchHops + 4
			if tc.profile == "gb200-nvl72" {
				want += 2
			}
			if len(p.Hops) != want {
				t.Errorf("%d hops for %d switches: %+v", len(p.Hops), p.SwitchHops, p.Hops)
			}
		})
	}
}

func TestNETUsesNearestNIC(t *testing.T) {
	invs, fab, _ := simCluster(t, "dgx-h100", 2, "leaf-groups=1")
	g := mustBuild(t, invs, fab)
	// GPU1's NIC is mlx5_3 on the DGX H100 (fixture: GPU1-NIC3 PXB).
	p := mustPath(t, g, "node000/GPU1", "node001/GPU7")
	if p.FromNIC != "node000/mlx5_3" || p.ToNIC != "node001/mlx5_11" {
		t.Errorf("NICs %s → %s, want node000/mlx5_3 → node001/mlx5_11", p.FromNIC, p.ToNIC)
	}
}

func TestPortDegraded(t *testing.T) {
	invs, fab, srcs := simCluster(t, "dgx-h100", 4, "leaf-groups=2,spines=4")
	g := mustBuild(t, invs, fab)
	if p := mustPath(t, g, "node000/GPU0", "node002/GPU0"); p.BottleneckMBps != 50000 {
		t.Fatalf("healthy: %d MB/s, want 50000", p.BottleneckMBps)
	}
	if err := srcs[0].SetPortState("mlx5_0", 1, true, 200); err != nil {
		t.Fatal(err)
	}
	g2, err := g.WithNode(collect(t, srcs[0]))
	if err != nil {
		t.Fatal(err)
	}
	if p := mustPath(t, g2, "node000/GPU0", "node002/GPU0"); p.BottleneckMBps != 25000 || p.Label() != "NET3" {
		t.Errorf("half rate: %s %d MB/s, want NET3 25000", p.Label(), p.BottleneckMBps)
	}
	// The old graph is unchanged.
	if p := mustPath(t, g, "node000/GPU0", "node002/GPU0"); p.BottleneckMBps != 50000 {
		t.Errorf("old graph changed: %d MB/s", p.BottleneckMBps)
	}
	// A port down: GPU0 moves to the next-best ACTIVE port (same socket, NODE).
	if err := srcs[0].SetPortState("mlx5_0", 1, false, 0); err != nil {
		t.Fatal(err)
	}
	g3, err := g.WithNode(collect(t, srcs[0]))
	if err != nil {
		t.Fatal(err)
	}
	p := mustPath(t, g3, "node000/GPU0", "node002/GPU0")
	if p.FromNIC != "node000/mlx5_3" || p.GPUDirect {
		t.Errorf("port down: from %s gpudirect %v, want node000/mlx5_3 without GPUDirect", p.FromNIC, p.GPUDirect)
	}
	info, _ := g3.NodeInfo("node000")
	if info.ComputePortsUp != 7 || info.ComputePortsTotal != 8 {
		t.Errorf("compute ports %d/%d, want 7/8", info.ComputePortsUp, info.ComputePortsTotal)
	}
}

func TestFabricFromNeighborsOnly(t *testing.T) {
	invs, _, _ := simCluster(t, "dgx-h100", 4, "leaf-groups=2")
	g := mustBuild(t, invs, nil) // inventories carry fabric_neighbors, no scan
	if p := mustPath(t, g, "node000/GPU0", "node001/GPU0"); p.Label() != "NET1" {
		t.Errorf("same leaf from neighbours: %s (%s), want NET1", p.Label(), p.Note)
	}
	if p := mustPath(t, g, "node000/GPU0", "node002/GPU0"); p.Label() != "NET" || p.Note == "" {
		t.Errorf("different leaves without a scan: %s note %q, want NET with a note", p.Label(), p.Note)
	}
	info, _ := g.NodeInfo("node000")
	if info.LeafSwitch == "" {
		t.Error("LeafSwitch empty with fabric neighbours")
	}
}

func TestNodeInfo(t *testing.T) {
	invs, fab, _ := simCluster(t, "dgx-h100", 2, "leaf-groups=1")
	g := mustBuild(t, invs, fab)
	info, ok := g.NodeInfo("node001")
	want := NodeInfo{LeafSwitch: "sim sg0-rail0-leaf", NVLinksUp: 144, NVLinksTotal: 144, ComputePortsUp: 8, ComputePortsTotal: 8}
	if !ok || info != want {
		t.Errorf("got %+v, want %+v", info, want)
	}
	if _, ok := g.NodeInfo("nope"); ok {
		t.Error("unknown node found")
	}
	if got := g.Nodes(); strings.Join(got, ",") != "node000,node001" {
		t.Errorf("Nodes() = %v", got)
	}
}

func TestResolveGPU(t *testing.T) {
	inv := collect(t, simNode(t, "dgx-h100", "n1", 0, nil))
	g := mustBuild(t, []*ginv1.NodeInventory{inv}, nil)
	uuid := inv.Gpus[3].Uuid
	for _, ref := range []string{"n1/GPU3", "n1/3", uuid} {
		r, err := g.ResolveGPU(ref)
		if err != nil || r.Node != "n1" || r.Index != 3 || r.UUID != uuid {
			t.Errorf("%s: %+v %v", ref, r, err)
		}
	}
	for _, ref := range []string{"n2/GPU0", "n1/GPU9", "n1/x", "GPU-nope", ""} {
		if _, err := g.ResolveGPU(ref); err == nil {
			t.Errorf("%q resolved", ref)
		}
	}
	if _, err := g.Path(GPURef{Node: "n1", Index: 0}, GPURef{Node: "n1", Index: 99}); err == nil {
		t.Error("path to a missing GPU")
	}
}

func TestCopyOnWrite(t *testing.T) {
	invs, fab, _ := simCluster(t, "dgx-h100", 3, "leaf-groups=1")
	g := mustBuild(t, invs[:2], fab)
	g2, err := g.WithNode(invs[2])
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Nodes()) != 2 || len(g2.Nodes()) != 3 {
		t.Fatalf("nodes %v / %v", g.Nodes(), g2.Nodes())
	}
	if _, err := g.ResolveGPU(invs[2].Gpus[0].Uuid); err == nil {
		t.Error("old graph resolves the new node's GPU")
	}
	if _, err := g2.ResolveGPU(invs[2].Gpus[0].Uuid); err != nil {
		t.Error(err)
	}
	g3 := g2.WithoutNode("node001")
	if strings.Join(g3.Nodes(), ",") != "node000,node002" || len(g2.Nodes()) != 3 {
		t.Errorf("WithoutNode: %v (before %v)", g3.Nodes(), g2.Nodes())
	}
	if _, err := g3.ResolveGPU(invs[1].Gpus[0].Uuid); err == nil {
		t.Error("removed node's GPU still resolves")
	}
	if g3.WithoutNode("nope") != g3 {
		t.Error("removing an unknown node made a new graph")
	}
	g4, err := g3.WithFabric(nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := mustPath(t, g4, "node000/GPU0", "node002/GPU0"); p.Label() != "NET1" {
		t.Errorf("fabric removed, neighbours remain: %s", p.Label())
	}
	if p := mustPath(t, g3, "node000/GPU0", "node002/GPU0"); p.Label() != "NET1" || p.Oversubscription != 1 {
		t.Errorf("with fabric: %s", p.Label())
	}
	// A GPU UUID may belong to one node only.
	dup := collect(t, simNode(t, "dgx-h100", "other", 0, nil))
	dup.Gpus[0].Uuid = invs[0].Gpus[0].Uuid
	if _, err := g.WithNode(dup); err == nil || !strings.Contains(err.Error(), "uuid") {
		t.Errorf("duplicate UUID accepted: %v", err)
	}
}

func TestZeroGraph(t *testing.T) {
	var g Graph
	if len(g.Nodes()) != 0 {
		t.Fatal("zero graph has nodes")
	}
	g2, err := g.WithNode(collect(t, simNode(t, "dgx-h100", "n1", 0, nil)))
	if err != nil {
		t.Fatal(err)
	}
	g3, err := g2.WithNode(collect(t, simNode(t, "dgx-h100", "n2", 1, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if p := mustPath(t, g3, "n1/GPU0", "n2/GPU0"); p.Label() != "NET" {
		t.Errorf("no fabric: %s", p.Label())
	}
	if _, err := g3.Matrix(nil, true); err != nil {
		t.Fatal(err)
	}
	if _, ok := g3.NodeInfo("n1"); !ok {
		t.Error("n1 missing")
	}
}

func TestMatrixAcrossNodes(t *testing.T) {
	invs, fab, _ := simCluster(t, "dgx-h100", 4, "leaf-groups=2")
	g := mustBuild(t, invs, fab)
	m, err := g.Matrix([]string{"node000", "node002"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Devices) != 40 || len(m.Cells) != 1600 {
		t.Fatalf("%d devices %d cells", len(m.Devices), len(m.Cells))
	}
	at := func(a, b string) Cell {
		find := func(s string) int {
			for i, d := range m.Devices {
				if d.Node+"/"+d.Label == s {
					return i
				}
			}
			t.Fatalf("no device %s", s)
			return 0
		}
		return m.At(find(a), find(b))
	}
	for _, tc := range []struct{ a, b, want string }{
		{"node000/GPU0", "node002/GPU0", "NET3"},
		{"node000/GPU0", "node000/GPU1", "NV18"},
		{"node000/NIC0", "node002/NIC0", "NET3"},
		{"node000/GPU0", "node002/NIC0", "NET3"},
		{"node000/NIC1", "node002/NIC1", "NET"}, // storage: not in the compute fabric
		{"node002/NIC0", "node002/GPU0", "PXB"},
	} {
		if got := at(tc.a, tc.b).Label(); got != tc.want {
			t.Errorf("%s-%s: %s, want %s", tc.a, tc.b, got, tc.want)
		}
	}
	if _, err := g.Matrix([]string{"node000", "ghost"}, false); err == nil || !strings.Contains(err.Error(), "ghost") {
		t.Errorf("unknown node: %v", err)
	}
}

func TestMatrixLimit(t *testing.T) {
	var invs []*ginv1.NodeInventory
	for i := range 26 { // 26 × 20 devices = 520
		invs = append(invs, collect(t, simNode(t, "dgx-h100", fmt.Sprintf("n%02d", i), i, nil)))
	}
	g := mustBuild(t, invs, nil)
	if _, err := g.Matrix(nil, true); err == nil || !strings.Contains(err.Error(), "--nodes") {
		t.Errorf("520 devices: %v", err)
	}
	if m, err := g.Matrix(nil, false); err != nil || len(m.Devices) != 208 {
		t.Errorf("208 GPUs: %v", err)
	}
}

func TestBuildRejectsInconsistentInput(t *testing.T) {
	base := func() *ginv1.NodeInventory { return collect(t, simNode(t, "dgx-h100", "n1", 0, nil)) }
	tests := []struct {
		name   string
		break_ func(*ginv1.NodeInventory)
		field  string
	}{
		{"no name", func(i *ginv1.NodeInventory) { i.NodeName = "" }, "node_name"},
		{"unknown bridge parent", func(i *ginv1.NodeInventory) { i.PcieBridges[1].ParentId = "0000:ff:00.0" }, "pcie_bridges[1].parent_id"},
		{"bridge cycle", func(i *ginv1.NodeInventory) {
			i.PcieBridges[0].Kind = ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH
			i.PcieBridges[0].ParentId = i.PcieBridges[2].Id
		}, "cycle"},
		{"duplicate bridge", func(i *ginv1.NodeInventory) { i.PcieBridges[1].Id = i.PcieBridges[2].Id }, "pcie_bridges[2].id"},
		{"unknown GPU parent", func(i *ginv1.NodeInventory) { i.Gpus[2].PcieParentId = "nope" }, "gpus[2].pcie_parent_id"},
		{"duplicate GPU index", func(i *ginv1.NodeInventory) { i.Gpus[1].Index = 0 }, "gpus[1].index"},
		{"duplicate GPU bus", func(i *ginv1.NodeInventory) { i.Gpus[1].PciBusId = i.Gpus[0].PciBusId }, "gpus[1].pci_bus_id"},
		{"NVLink to nowhere", func(i *ginv1.NodeInventory) {
			i.Gpus[0].Nvlinks[0].RemoteType = ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_GPU
			i.Gpus[0].Nvlinks[0].RemotePciBusId = "0000:99:00.0"
		}, "nvlinks[0].remote_pci_bus_id"},
		{"duplicate HCA", func(i *ginv1.NodeInventory) { i.Hcas[1].Name = "mlx5_0" }, "hcas[1].name"},
		{"HCA parent", func(i *ginv1.NodeInventory) { i.Hcas[0].PcieParentId = "x" }, "hcas[0].pcie_parent_id"},
		{"too many GPUs", func(i *ginv1.NodeInventory) {
			for range 60 {
				i.Gpus = append(i.Gpus, &ginv1.Gpu{Index: uint32(len(i.Gpus))})
			}
		}, "gpus: 68"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv := base()
			tc.break_(inv)
			_, err := Build([]*ginv1.NodeInventory{inv}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %v, want one naming %q", err, tc.field)
			}
		})
	}
	inv := base()
	if _, err := Build([]*ginv1.NodeInventory{inv, inv}, nil); err == nil {
		t.Error("a node listed twice was accepted")
	}
}

func TestBuildRejectsBadFabric(t *testing.T) {
	_, fab, _ := simCluster(t, "dgx-h100", 2, "leaf-groups=1")
	fab.Links[0].B.Guid = "0xdeadbeef"
	if _, err := Build(nil, fab); err == nil || !strings.Contains(err.Error(), "links[0].b.guid") {
		t.Errorf("unknown switch: %v", err)
	}
	_, fab, _ = simCluster(t, "dgx-h100", 2, "leaf-groups=1")
	fab.Switches[1].Guid = fab.Switches[0].Guid
	if _, err := Build(nil, fab); err == nil || !strings.Contains(err.Error(), "switches[1].guid") {
		t.Errorf("duplicate switch: %v", err)
	}
}

func TestUnknownTiersAreDerived(t *testing.T) {
	invs, fab, _ := simCluster(t, "dgx-h100", 4, "leaf-groups=2")
	for _, s := range fab.Switches {
		s.Tier = 0 // as an ibnetdiscover import without tier hints
	}
	g := mustBuild(t, invs, fab)
	if p := mustPath(t, g, "node000/GPU0", "node003/GPU0"); p.Label() != "NET3" {
		t.Errorf("derived tiers: %s (%s)", p.Label(), p.Note)
	}
}

func TestProtoConversion(t *testing.T) {
	invs, fab, _ := simCluster(t, "dgx-h100", 4, "leaf-groups=2")
	g := mustBuild(t, invs, fab)
	pp := PathToProto(mustPath(t, g, "node000/GPU0", "node003/GPU0"))
	if pp.Class != ginv1.PathClass_PATH_CLASS_NET || pp.Label != "NET3" || pp.SwitchHops != 3 || pp.BottleneckMbPerS != 50000 || len(pp.Hops) != 7 || !pp.Gpudirect {
		t.Errorf("path proto %v", pp)
	}
	m, err := g.Matrix([]string{"node000"}, true)
	if err != nil {
		t.Fatal(err)
	}
	devs, cells := MatrixToProto(m)
	if len(devs) != 20 || len(cells) != 400 {
		t.Fatalf("%d devices %d cells", len(devs), len(cells))
	}
	if devs[0].Label != "GPU0" || devs[0].Kind != ginv1.MatrixDeviceKind_MATRIX_DEVICE_KIND_GPU || devs[0].CpuAffinity != "0-55,112-167" {
		t.Errorf("device 0: %v", devs[0])
	}
	if c := cells[1]; c.Class != ginv1.PathClass_PATH_CLASS_NVLINK || c.Count != 18 || c.BottleneckMbPerS != 450000 {
		t.Errorf("cell GPU0-GPU1: %v", c)
	}
	if ClassToProto(ClassSelf) != ginv1.PathClass_PATH_CLASS_SELF || ClassToProto(ClassNET) != ginv1.PathClass_PATH_CLASS_NET {
		t.Error("class numbering")
	}
}

func TestClassString(t *testing.T) {
	want := []string{"UNKNOWN", "X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS", "MNNVL", "NET"}
	for c := ClassUnknown; c <= ClassNET; c++ {
		if c.String() != want[c] {
			t.Errorf("%d: %s", c, c)
		}
	}
	if (Path{Class: ClassNET, SwitchHops: 3}).Label() != "NET3" || (Path{Class: ClassNVLink, NVLinks: 18}).Label() != "NV18" {
		t.Error("labels")
	}
	for _, tc := range []struct {
		gen, width uint32
		want       uint64
	}{{4, 16, 31508}, {5, 16, 63015}, {3, 16, 15754}, {2, 8, 4000}, {1, 1, 250}, {0, 16, 0}, {7, 16, 0}} {
		if got := pcieMBps(tc.gen, tc.width); got != tc.want {
			t.Errorf("Gen%d x%d: %d, want %d", tc.gen, tc.width, got, tc.want)
		}
	}
}

var _ = sim.Profiles

// CheckNode answers what WithNode would, and changes nothing.
func TestCheckNodeAgreesWithWithNode(t *testing.T) {
	invs, fab, _ := simCluster(t, "dgx-h100", 3, "leaf-groups=1")
	g := mustBuild(t, invs[:2], fab)
	otherOwner := collect(t, simNode(t, "dgx-h100", "other", 5, nil))
	otherOwner.Gpus[0].Uuid = invs[0].Gpus[0].Uuid
	twice := collect(t, simNode(t, "dgx-h100", "twice", 6, nil))
	twice.Gpus[1].Uuid = twice.Gpus[0].Uuid
	unnamed := collect(t, simNode(t, "dgx-h100", "unnamed", 7, nil))
	unnamed.NodeName = ""
	tests := []struct {
		name    string
		inv     *ginv1.NodeInventory
		wantErr string // "" for none
	}{
		{"new node", invs[2], ""},
		{"replaced node", invs[0], ""},
		{"another node's GPU", otherOwner, "is also a GPU of node"},
		{"a GPU twice", twice, "used twice"},
		{"no name", unnamed, "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, werr := g.WithNode(tt.inv)
			cerr := g.CheckNode(tt.inv)
			if (werr == nil) != (cerr == nil) || werr != nil && werr.Error() != cerr.Error() {
				t.Fatalf("CheckNode: %v, WithNode: %v", cerr, werr)
			}
			if tt.wantErr == "" && cerr != nil || tt.wantErr != "" && (cerr == nil || !strings.Contains(cerr.Error(), tt.wantErr)) {
				t.Errorf("CheckNode: %v, want an error with %q", cerr, tt.wantErr)
			}
			if g.Len() != 2 {
				t.Errorf("the graph has %d nodes after the checks, want 2", g.Len())
			}
		})
	}
}
