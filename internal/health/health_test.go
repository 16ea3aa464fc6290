package health

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
)

// simNode is a simulated node's inventory, healthy as the profile builds it.
func simNode(t testing.TB, profile, name string) *ginv1.NodeInventory {
	t.Helper()
	src, err := sim.NewSource(profile, sim.NodeOptions{NodeName: name})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := src.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func up(name string, inv *ginv1.NodeInventory) Node {
	return Node{Name: name, State: ginv1.NodeState_NODE_STATE_UP, Inventory: inv}
}

// checks lists a verdict's findings as "severity check subject".
func checks(v *ginv1.NodeVerdict) []string {
	var out []string
	for _, f := range v.GetFindings() {
		out = append(out, fmt.Sprintf("%s %s %s", Label(f.GetSeverity()), f.GetCheck(), f.GetSubject()))
	}
	return out
}

func TestHealthySimulatedNodesPass(t *testing.T) {
	for _, p := range sim.Profiles() {
		v := Evaluate([]Node{up("n1", simNode(t, p, "n1"))}, Thresholds{})["n1"]
		if v.GetVerdict() != ginv1.Verdict_VERDICT_PASS || len(v.GetFindings()) != 0 || v.GetReason() != "" {
			t.Errorf("%s: verdict %v, findings %q, reason %q; want pass without findings", p, v.GetVerdict(), checks(v), v.GetReason())
		}
	}
}

// TestNodeRules breaks one thing at a time on a DGX H100 and checks the
// one finding it must cause, with its severity and subject.
func TestNodeRules(t *testing.T) {
	gpu := func(inv *ginv1.NodeInventory, i int) *ginv1.Gpu { return inv.Gpus[i] }
	hca := func(inv *ginv1.NodeInventory, name string) *ginv1.Hca {
		for _, h := range inv.Hcas {
			if h.Name == name {
				return h
			}
		}
		t.Fatalf("no HCA %s", name)
		return nil
	}
	// nicBridge is the switch downstream port above GPU0's nearest NIC.
	nicBridge := func(inv *ginv1.NodeInventory) *ginv1.PcieBridge {
		tr := treeOf(inv)
		nic, path, sw := nearestNIC(tr, inv.Gpus[0], inv.Hcas)
		if nic == nil || !sw || len(path) == 0 {
			t.Fatalf("GPU0 has no NIC under a common switch (nic %v, path %d)", nic, len(path))
		}
		return path[0]
	}
	for _, tc := range []struct {
		name   string
		state  ginv1.NodeState
		break_ func(inv *ginv1.NodeInventory)
		want   string // "severity check subject"
	}{
		{"nvlink down", 0, func(inv *ginv1.NodeInventory) {
			gpu(inv, 3).Nvlinks[7].State = ginv1.LinkState_LINK_STATE_DOWN
		}, "fail nvlink-down GPU3/nvlink7"},
		{"nvlink degraded", 0, func(inv *ginv1.NodeInventory) {
			gpu(inv, 1).Nvlinks[2].Health = ginv1.LinkHealth_LINK_HEALTH_DEGRADED
		}, "warn nvlink-errors GPU1/nvlink2"},
		{"compute port down", 0, func(inv *ginv1.NodeInventory) {
			hca(inv, "mlx5_0").Ports[0].State = ginv1.PortState_PORT_STATE_DOWN
		}, "fail ib-port-down mlx5_0:1"},
		{"GPU link width", 0, func(inv *ginv1.NodeInventory) {
			gpu(inv, 5).PcieLink = &ginv1.PcieLink{Generation: 3, Width: 8, MaxGeneration: 5, MaxWidth: 16}
		}, "fail pcie-width-downtrained GPU5"},
		{"GPU link speed alone is power saving", 0, func(inv *ginv1.NodeInventory) {
			gpu(inv, 5).PcieLink = &ginv1.PcieLink{Generation: 1, Width: 16, MaxGeneration: 5, MaxWidth: 16}
		}, ""},
		{"NIC link speed", 0, func(inv *ginv1.NodeInventory) {
			hca(inv, "mlx5_0").PcieLink = &ginv1.PcieLink{Generation: 4, Width: 16, MaxGeneration: 5, MaxWidth: 16}
		}, "warn pcie-speed-downtrained mlx5_0"},
		{"ACS redirect between GPU and NIC", 0, func(inv *ginv1.NodeInventory) {
			nicBridge(inv).Acs = &ginv1.PcieAcs{Capability: 0x5f, Control: 0x1d}
		}, "warn acs-redirect "},
		{"ACS source validation only", 0, func(inv *ginv1.NodeInventory) {
			nicBridge(inv).Acs = &ginv1.PcieAcs{Capability: 0x5f, Control: 0x1}
		}, ""},
		{"IOMMU translating", 0, func(inv *ginv1.NodeInventory) {
			inv.Host.Iommu = &ginv1.Iommu{Mode: ginv1.IommuMode_IOMMU_MODE_TRANSLATED, GroupCount: 120, Cmdline: "intel_iommu=on"}
		}, "warn iommu-translated iommu"},
		{"IOMMU passthrough", 0, func(inv *ginv1.NodeInventory) {
			inv.Host.Iommu = &ginv1.Iommu{Mode: ginv1.IommuMode_IOMMU_MODE_PASSTHROUGH, GroupCount: 120, Cmdline: "iommu=pt"}
		}, ""},
		{"no GPUDirect RDMA", 0, func(inv *ginv1.NodeInventory) {
			inv.Host.GpudirectRdma = &ginv1.GpuDirectRdma{}
		}, "warn gpudirect-rdma-missing gpudirect"},
		{"dma-buf is enough", 0, func(inv *ginv1.NodeInventory) {
			inv.Host.GpudirectRdma = &ginv1.GpuDirectRdma{Dmabuf: true}
		}, ""},
		{"fatal XID", 0, func(inv *ginv1.NodeInventory) {
			gpu(inv, 2).Health = &ginv1.GpuHealth{Xids: []*ginv1.XidEvent{{Xid: 79}}}
		}, "fail xid GPU2/xid79"},
		{"other XID", 0, func(inv *ginv1.NodeInventory) {
			gpu(inv, 2).Health = &ginv1.GpuHealth{Xids: []*ginv1.XidEvent{{Xid: 94}}}
		}, "warn xid GPU2/xid94"},
		{"application XID", 0, func(inv *ginv1.NodeInventory) {
			gpu(inv, 2).Health = &ginv1.GpuHealth{Xids: []*ginv1.XidEvent{{Xid: 13}}}
		}, ""},
		{"uncorrected ECC", 0, func(inv *ginv1.NodeInventory) {
			gpu(inv, 0).Health = &ginv1.GpuHealth{EccUncorrectedVolatile: 2}
		}, "fail ecc-uncorrected GPU0"},
		{"row remap failed", 0, func(inv *ginv1.NodeInventory) {
			gpu(inv, 0).Health = &ginv1.GpuHealth{RowRemapFailed: true, RemappedRowsUncorrectable: 8}
		}, "fail row-remap GPU0"},
		{"row remap pending", 0, func(inv *ginv1.NodeInventory) {
			gpu(inv, 0).Health = &ginv1.GpuHealth{RowRemapPending: true}
		}, "warn row-remap GPU0"},
		{"thermal throttle", 0, func(inv *ginv1.NodeInventory) {
			gpu(inv, 6).Health = &ginv1.GpuHealth{ClockEventReasons: 0x40}
		}, "warn clock-throttle GPU6"},
		{"agent silent", ginv1.NodeState_NODE_STATE_DOWN, func(*ginv1.NodeInventory) {}, "fail node-down "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := simNode(t, "dgx-h100", "n1")
			tc.break_(inv)
			n := up("n1", inv)
			if tc.state != 0 {
				n.State = tc.state
			}
			v := Evaluate([]Node{n}, Thresholds{})["n1"]
			got := checks(v)
			if tc.want == "" {
				if len(got) != 0 || v.GetVerdict() != ginv1.Verdict_VERDICT_PASS {
					t.Fatalf("findings %q, verdict %v; want pass", got, v.GetVerdict())
				}
				return
			}
			if len(got) != 1 || !strings.HasPrefix(got[0], tc.want) {
				t.Fatalf("findings %q; want one %q", got, tc.want)
			}
			f := v.GetFindings()[0]
			if v.GetVerdict() != f.GetSeverity() || f.GetSeen() == "" || f.GetImpact() == "" || f.GetFix() == "" {
				t.Errorf("verdict %v, finding %v: want the finding's severity and seen/impact/fix all written", v.GetVerdict(), f)
			}
			if !strings.HasPrefix(v.GetReason(), f.GetCheck()) {
				t.Errorf("reason %q does not start with the check %q", v.GetReason(), f.GetCheck())
			}
		})
	}
}

func TestPCIeImpactNamesTheBandwidth(t *testing.T) {
	inv := simNode(t, "dgx-h100", "n1")
	inv.Gpus[5].PcieLink = &ginv1.PcieLink{Generation: 3, Width: 8, MaxGeneration: 5, MaxWidth: 16}
	f := Evaluate([]Node{up("n1", inv)}, Thresholds{})["n1"].GetFindings()[0]
	if !strings.Contains(f.GetSeen(), "Gen3 x8, capable of Gen5 x16") || !strings.Contains(f.GetImpact(), "limited to 8 GB/s per direction instead of 63") {
		t.Errorf("seen %q, impact %q", f.GetSeen(), f.GetImpact())
	}
}

func TestFabricHealthMask(t *testing.T) {
	for _, tc := range []struct {
		mask uint32
		want string
	}{
		{0, ""},
		{2 | 2<<2 | 2<<4 | 2<<6 | 1<<8 | 1<<12 | 1<<14, ""}, // every field "false"/"none"/"connected"
		{1, "warn"},       // degraded bandwidth
		{1 << 4, "fail"},  // route unhealthy
		{5 << 8, "fail"},  // insufficient NVLinks
		{2 << 14, "fail"}, // fabric manager disconnected
	} {
		inv := simNode(t, "gb200-nvl72", "n1")
		inv.Gpus[0].Fabric.HealthMask = tc.mask
		v := Evaluate([]Node{up("n1", inv)}, Thresholds{})["n1"]
		got := ""
		if len(v.GetFindings()) > 0 {
			got = Label(v.GetFindings()[0].GetSeverity())
		}
		if got != tc.want || len(v.GetFindings()) > 1 {
			t.Errorf("mask 0x%x: findings %q; want %q", tc.mask, checks(v), tc.want)
		}
	}
	inv := simNode(t, "gb200-nvl72", "n1")
	inv.Gpus[1].Fabric.State = ginv1.FabricState_FABRIC_STATE_IN_PROGRESS
	if got := checks(Evaluate([]Node{up("n1", inv)}, Thresholds{})["n1"]); len(got) != 1 || got[0] != "fail mnnvl-fabric GPU1" {
		t.Errorf("fabric in progress: %q", got)
	}
}

func TestClusterRules(t *testing.T) {
	var nodes []Node
	for i := range 5 {
		name := fmt.Sprintf("node%03d", i+1)
		inv := simNode(t, "dgx-h100", name)
		for _, g := range inv.Gpus {
			g.VbiosVersion = "96.00.89.00.01"
		}
		nodes = append(nodes, up(name, inv))
	}
	nodes[1].Inventory.Host.DriverVersion = "550.54.15"
	nodes[2].Inventory.Gpus[4].VbiosVersion = "96.00.61.00.01"
	nodes[3].Inventory.Hcas[0].FirmwareVersion = "28.36.1010"
	for _, n := range nodes {
		n.Inventory.FabricNeighbors = nil
		for _, h := range n.Inventory.Hcas {
			n.Inventory.FabricNeighbors = append(n.Inventory.FabricNeighbors, &ginv1.FabricNeighbor{Hca: h.Name, Port: 1, SwitchGuid: "0xleaf1"})
		}
	}
	nodes[4].Inventory.Hcas[3].Ports[0].RateGbps = 200
	vs := Evaluate(nodes, Thresholds{})
	want := map[string]string{
		"node001": "",
		"node002": "warn driver-mismatch driver",
		"node003": "warn vbios-mismatch GPU4",
		"node004": "warn nic-firmware-mismatch " + nodes[3].Inventory.Hcas[0].Name,
		"node005": "warn nic-slower-than-leaf " + nodes[4].Inventory.Hcas[3].Name + ":1",
	}
	for name, w := range want {
		got := checks(vs[name])
		if w == "" {
			if len(got) != 0 {
				t.Errorf("%s: %q, want none", name, got)
			}
			continue
		}
		if len(got) != 1 || got[0] != w {
			t.Errorf("%s: %q, want [%q]", name, got, w)
		}
	}
	if s := vs["node002"].GetFindings()[0].GetSeen(); !strings.Contains(s, "550.54.15") || !strings.Contains(s, "4 of 5") {
		t.Errorf("driver finding seen %q: want the odd version and the majority count", s)
	}
	// Two nodes are too few to call a majority.
	if got := checks(Evaluate(nodes[:2], Thresholds{})["node002"]); len(got) != 0 {
		t.Errorf("two nodes: %q, want none", got)
	}
}

func TestThresholds(t *testing.T) {
	inv := simNode(t, "dgx-h100", "n1")
	inv.Host.Iommu = &ginv1.Iommu{Mode: ginv1.IommuMode_IOMMU_MODE_TRANSLATED}
	inv.Gpus[0].Health = &ginv1.GpuHealth{Xids: []*ginv1.XidEvent{{Xid: 13}, {Xid: 79}}}
	var th Thresholds
	for _, kv := range []string{"iommu-translated=fail", "xid-ignore=79", "xid-fatal=13"} {
		if err := th.Set(kv); err != nil {
			t.Fatal(err)
		}
	}
	got := checks(Evaluate([]Node{up("n1", proto.Clone(inv).(*ginv1.NodeInventory))}, th)["n1"])
	if want := []string{"fail iommu-translated iommu", "fail xid GPU0/xid13"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
	if err := th.Set("iommu-translated=pass"); err != nil {
		t.Fatal(err)
	}
	if got := checks(Evaluate([]Node{up("n1", inv)}, th)["n1"]); len(got) != 1 {
		t.Errorf("iommu off: %q", got)
	}
	for _, bad := range []string{"", "nope=fail", "acs-redirect=maybe", "xid-fatal=x", "min-peers=1", "novalue"} {
		if err := (&Thresholds{}).Set(bad); err == nil {
			t.Errorf("Set(%q) = nil, want an error", bad)
		}
	}
}

func TestReasonIsBoundedAndPlain(t *testing.T) {
	inv := simNode(t, "dgx-h100", "n1")
	for _, g := range inv.Gpus {
		for _, l := range g.Nvlinks {
			l.State = ginv1.LinkState_LINK_STATE_DOWN
		}
	}
	inv.Hcas[0].Name = "mlx5_0\"; rm -rf /"
	v := Evaluate([]Node{up("n1", inv)}, Thresholds{})["n1"]
	if len(v.GetReason()) > MaxReasonLen || !strings.HasSuffix(v.GetReason(), " ...") || !strings.HasPrefix(v.GetReason(), "nvlink-down GPU0/nvlink0; ") {
		t.Errorf("reason %q (%d bytes)", v.GetReason(), len(v.GetReason()))
	}
	if strings.ContainsAny(sanitize("a\"b'c\n`d\\"), "\"'\n`\\") {
		t.Error("sanitize kept a quote or control character")
	}
}

func simNodeTB(tb testing.TB) *ginv1.NodeInventory {
	inv := simNode(tb, "dgx-h100", "n1")
	for _, g := range inv.Gpus {
		g.VbiosVersion = "96.00.89.00.01"
	}
	return inv
}
