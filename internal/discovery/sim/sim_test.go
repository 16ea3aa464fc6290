package sim

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

func newSrc(t *testing.T, profile, node string) *Source {
	t.Helper()
	s, err := NewSource(profile, NodeOptions{NodeName: node, Cluster: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func inv(t *testing.T, s *Source) *ginv1.NodeInventory {
	t.Helper()
	i, err := s.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func TestProfiles(t *testing.T) {
	want := []string{"dgx-a100", "dgx-h100", "gb200-nvl72", "hgx-b200", "pcie-8gpu", "rtx3090-nvlink-pair"}
	if got := Profiles(); !slices.Equal(got, want) {
		t.Fatalf("Profiles() = %v, want %v", got, want)
	}
	_, err := NewSource("dgx-h200", NodeOptions{NodeName: "n"})
	if err == nil || !strings.Contains(err.Error(), "dgx-h100, gb200-nvl72") {
		t.Errorf("unknown profile: %v", err)
	}
	if _, err := NewSource("dgx-h100", NodeOptions{}); err == nil {
		t.Error("empty node name accepted")
	}
}

var (
	uuidRE = regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	guidRE = regexp.MustCompile(`^0x[0-9a-f]{16}$`)
	busRE  = regexp.MustCompile(`^0000:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
)

func TestProfileShapes(t *testing.T) {
	tests := []struct {
		profile    string
		gpus       int
		model      string
		cc         [2]uint32
		links      int
		linkMBps   uint64
		nvswitches int
		hcas       int
		compute    int
		numa       int
	}{
		{"dgx-h100", 8, "NVIDIA H100 80GB HBM3", [2]uint32{9, 0}, 18, 25000, 4, 12, 8, 2},
		{"hgx-b200", 8, "NVIDIA B200", [2]uint32{10, 0}, 18, 50000, 2, 12, 8, 2},
		{"dgx-a100", 8, "NVIDIA A100-SXM4-80GB", [2]uint32{8, 0}, 12, 25000, 6, 12, 8, 8},
		{"gb200-nvl72", 4, "NVIDIA GB200", [2]uint32{10, 0}, 18, 50000, 0, 6, 4, 2},
		{"rtx3090-nvlink-pair", 2, "NVIDIA GeForce RTX 3090", [2]uint32{8, 6}, 4, 14062, 0, 0, 0, 1},
		{"pcie-8gpu", 8, "NVIDIA L40S", [2]uint32{8, 9}, 0, 0, 0, 2, 2, 2},
	}
	for _, tc := range tests {
		t.Run(tc.profile, func(t *testing.T) {
			i := inv(t, newSrc(t, tc.profile, "node007"))
			if i.NodeName != "node007" || i.Source != "sim:"+tc.profile || i.Generation != 0 || i.CollectedAt == nil {
				t.Errorf("header: %q %q %d %v", i.NodeName, i.Source, i.Generation, i.CollectedAt)
			}
			h := i.Host
			if h.Hostname != "node007" || h.MachineId == "" || h.KernelVersion != "6.8.0-sim" || h.DriverVersion != "570.124.06" || h.CudaDriverVersion != "12.8" || len(h.NumaNodes) != tc.numa {
				t.Errorf("host: %v", h)
			}
			if len(i.Gpus) != tc.gpus || len(i.Nvswitches) != tc.nvswitches || len(i.Hcas) != tc.hcas {
				t.Fatalf("%d GPUs %d switches %d HCAs", len(i.Gpus), len(i.Nvswitches), len(i.Hcas))
			}
			for k, g := range i.Gpus {
				if int(g.Index) != k || g.Model != tc.model || g.ComputeCapabilityMajor != tc.cc[0] || g.ComputeCapabilityMinor != tc.cc[1] ||
					!uuidRE.MatchString(g.Uuid) || !busRE.MatchString(g.PciBusId) || g.MemoryBytes == 0 || g.Architecture == "" || len(g.Nvlinks) != tc.links {
					t.Errorf("GPU%d: %v", k, g)
				}
				if (g.Serial == "") != (tc.profile == "rtx3090-nvlink-pair") {
					t.Errorf("GPU%d serial %q", k, g.Serial)
				}
				for _, l := range g.Nvlinks {
					if l.BandwidthMbPerS != tc.linkMBps || l.State != ginv1.LinkState_LINK_STATE_UP {
						t.Errorf("GPU%d link %d: %v", k, l.Index, l)
					}
				}
			}
			compute := 0
			for _, hca := range i.Hcas {
				if !guidRE.MatchString(hca.NodeGuid) || !busRE.MatchString(hca.PciBusId) {
					t.Errorf("%s: %v", hca.Name, hca)
				}
				if hca.Role == ginv1.HcaRole_HCA_ROLE_COMPUTE {
					compute++
				}
				for _, p := range hca.Ports {
					if p.Port != 1 || !guidRE.MatchString(p.PortGuid) || p.State != ginv1.PortState_PORT_STATE_ACTIVE ||
						p.PhysState != ginv1.PortPhysState_PORT_PHYS_STATE_LINK_UP || p.RateGbps == 0 || len(p.Gids) == 0 ||
						!strings.HasPrefix(p.Gids[0], "fe80:0000:0000:0000:") {
						t.Errorf("%s port: %v", hca.Name, p)
					}
					switch p.LinkLayer {
					case ginv1.LinkLayer_LINK_LAYER_INFINIBAND:
						if p.Lid == 0 || p.SmLid != 1 {
							t.Errorf("%s: IB LID %d SM LID %d", hca.Name, p.Lid, p.SmLid)
						}
					case ginv1.LinkLayer_LINK_LAYER_ETHERNET:
						if p.Netdev == nil || p.Netdev.Mac == "" || len(p.Netdev.Ipv4Addresses) == 0 || !strings.HasPrefix(p.Netdev.Ipv4Addresses[0], "10.") ||
							len(p.Netdev.Ipv6Addresses) == 0 || !strings.HasPrefix(p.Netdev.Ipv6Addresses[0], "fd") {
							t.Errorf("%s netdev: %v", hca.Name, p.Netdev)
						}
					default:
						t.Errorf("%s: link layer %v", hca.Name, p.LinkLayer)
					}
				}
			}
			if compute != tc.compute {
				t.Errorf("%d compute HCAs, want %d", compute, tc.compute)
			}
			if tc.compute > 0 && len(i.QpSummaries) == 0 {
				t.Error("no QP summaries")
			}
		})
	}
}

func TestIdentitiesDeterministicAndDistinct(t *testing.T) {
	a1, a2 := inv(t, newSrc(t, "dgx-h100", "a")), inv(t, newSrc(t, "dgx-h100", "a"))
	b := inv(t, newSrc(t, "dgx-h100", "b"))
	other, _ := NewSource("dgx-h100", NodeOptions{NodeName: "a", Cluster: "c2"})
	c := inv(t, other)
	if a1.Gpus[0].Uuid != a2.Gpus[0].Uuid || a1.Hcas[0].Ports[0].PortGuid != a2.Hcas[0].Ports[0].PortGuid {
		t.Error("identities not deterministic")
	}
	seen := map[string]bool{}
	for _, i := range []*ginv1.NodeInventory{a1, b, c} {
		for _, g := range i.Gpus {
			if seen[g.Uuid] {
				t.Errorf("UUID %s repeated", g.Uuid)
			}
			seen[g.Uuid] = true
		}
		for _, h := range i.Hcas {
			if seen[h.Ports[0].PortGuid] {
				t.Errorf("port GUID %s repeated", h.Ports[0].PortGuid)
			}
			seen[h.Ports[0].PortGuid] = true
		}
	}
	if got := a1.Hcas[0].Ports[0].PortGuid; got != PortGUID("c1", "a", "mlx5_0", 1) {
		t.Errorf("port GUID %s is not PortGUID()", got)
	}
}

func TestCollectReturnsCopies(t *testing.T) {
	s := newSrc(t, "dgx-h100", "n")
	i1 := inv(t, s)
	i1.Gpus[0].Nvlinks[0].State = ginv1.LinkState_LINK_STATE_DOWN
	i1.Hcas = nil
	i2 := inv(t, s)
	if i2.Gpus[0].Nvlinks[0].State != ginv1.LinkState_LINK_STATE_UP || len(i2.Hcas) != 12 {
		t.Error("Collect shares state between calls")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Collect(ctx); err == nil {
		t.Error("cancelled context ignored")
	}
}

func TestSetStates(t *testing.T) {
	s := newSrc(t, "rtx3090-nvlink-pair", "ws")
	if err := s.SetNVLinkState(0, 1, false); err != nil {
		t.Fatal(err)
	}
	i := inv(t, s)
	if i.Gpus[0].Nvlinks[1].State != ginv1.LinkState_LINK_STATE_DOWN || i.Gpus[1].Nvlinks[1].State != ginv1.LinkState_LINK_STATE_DOWN {
		t.Error("direct link not down at both ends")
	}
	if err := s.SetNVLinkState(0, 1, true); err != nil {
		t.Fatal(err)
	}
	if inv(t, s).Gpus[1].Nvlinks[1].State != ginv1.LinkState_LINK_STATE_UP {
		t.Error("link not back up")
	}
	for _, bad := range [][2]int{{2, 0}, {0, 4}} {
		if err := s.SetNVLinkState(bad[0], bad[1], false); err == nil {
			t.Errorf("GPU%d link %d accepted", bad[0], bad[1])
		}
	}

	h := newSrc(t, "dgx-h100", "n")
	if err := h.SetPortState("mlx5_0", 1, true, 200); err != nil {
		t.Fatal(err)
	}
	p := inv(t, h).Hcas[0].Ports[0]
	if p.RateGbps != 200 || p.RateText != "200 Gb/sec (2X NDR)" || p.State != ginv1.PortState_PORT_STATE_ACTIVE {
		t.Errorf("half rate: %v", p)
	}
	if err := h.SetPortState("mlx5_0", 1, false, 0); err != nil {
		t.Fatal(err)
	}
	p = inv(t, h).Hcas[0].Ports[0]
	if p.State != ginv1.PortState_PORT_STATE_DOWN || p.PhysState != ginv1.PortPhysState_PORT_PHYS_STATE_DISABLED || p.RateGbps != 200 {
		t.Errorf("down: %v", p)
	}
	if err := h.SetPortState("mlx5_99", 1, true, 0); err == nil {
		t.Error("unknown HCA accepted")
	}
	if err := h.SetPortState("mlx5_0", 2, true, 0); err == nil {
		t.Error("unknown port accepted")
	}
}

func TestGB200Racks(t *testing.T) {
	uuidOf := func(idx int) string {
		s, err := NewSource("gb200-nvl72", NodeOptions{NodeName: "t", Index: idx, Cluster: "c"})
		if err != nil {
			t.Fatal(err)
		}
		f := inv(t, s).Gpus[0].Fabric
		if f.CliqueId != 1 || f.State != ginv1.FabricState_FABRIC_STATE_COMPLETED || f.HealthMask != 0 {
			t.Errorf("fabric %v", f)
		}
		return f.ClusterUuid
	}
	if uuidOf(0) != uuidOf(17) || uuidOf(17) == uuidOf(18) {
		t.Error("rack = Index/18 not respected")
	}
}
