package costmodel

import (
	"context"
	"fmt"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/graph"
)

func simGraph(t testing.TB, profile string, count int) (*graph.Graph, []string) {
	t.Helper()
	spec := sim.DefaultFabricSpec()
	c, err := sim.NewCluster("test", &spec, sim.NodesOf(profile, "node", 0, count))
	if err != nil {
		t.Fatal(err)
	}
	invs, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build(invs, c.Fabric)
	if err != nil {
		t.Fatal(err)
	}
	return g, c.Names()
}

func TestShapeOf(t *testing.T) {
	for _, tc := range []struct {
		profile string
		nodes   int
		ppn     int
		want    Shape
	}{
		{"dgx-h100", 2, 0, Shape{NRanks: 16, NNodes: 2, CompCap: 90, IntraNVLink: true, IntraGBps: 450, NVSwitch: true, NICsPerNode: 8, NICGbps: 400, InterHops: 3, Oversubscription: 1, Nominal: Nominal{8, 400, 450}}},
		{"dgx-h100", 1, 4, Shape{NRanks: 4, NNodes: 1, CompCap: 90, IntraNVLink: true, IntraGBps: 450, NVSwitch: true, Nominal: Nominal{IntraGBps: 450}}},
		{"dgx-a100", 2, 8, Shape{NRanks: 16, NNodes: 2, CompCap: 80, IntraNVLink: true, IntraGBps: 300, NVSwitch: true, NICsPerNode: 8, NICGbps: 200, InterHops: 3, Oversubscription: 1, Nominal: Nominal{8, 200, 300}}},
		{"hgx-b200", 1, 8, Shape{NRanks: 8, NNodes: 1, CompCap: 100, IntraNVLink: true, IntraGBps: 900, NVSwitch: true, Nominal: Nominal{IntraGBps: 900}}},
		{"gb200-nvl72", 2, 4, Shape{NRanks: 8, NNodes: 2, CompCap: 100, IntraNVLink: true, IntraGBps: 900, NVSwitch: true, MNNVL: true, NICsPerNode: 4, Nominal: Nominal{NICsPerNode: 4, IntraGBps: 900}}},
		{"rtx3090-nvlink-pair", 1, 2, Shape{NRanks: 2, NNodes: 1, CompCap: 86, IntraNVLink: true, IntraGBps: 56.248, Nominal: Nominal{IntraGBps: 56.248}}},
		{"pcie-8gpu", 1, 8, Shape{NRanks: 8, NNodes: 1, CompCap: 89, IntraGBps: 31.508, Ethernet: true}},
	} {
		t.Run(fmt.Sprintf("%s-%d", tc.profile, tc.nodes), func(t *testing.T) {
			g, names := simGraph(t, tc.profile, tc.nodes)
			got, err := ShapeOf(g, names, tc.ppn)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestShapeOfErrors(t *testing.T) {
	g, names := simGraph(t, "dgx-h100", 2)
	for _, tc := range []struct {
		nodes []string
		ppn   int
	}{{nil, 8}, {[]string{"x"}, 8}, {names, 9}, {names, -1}, {[]string{names[0], names[0]}, 8}} {
		if _, err := ShapeOf(g, tc.nodes, tc.ppn); err == nil {
			t.Errorf("%v/%d: no error", tc.nodes, tc.ppn)
		}
	}
	if _, err := ShapeOf(nil, names, 8); err == nil {
		t.Error("nil graph")
	}
}

func TestBusFactor(t *testing.T) {
	for _, tc := range []struct {
		c    ginv1.Collective
		n    int
		want float64
	}{
		{ar, 8, 1.75}, {ar, 2, 1}, {ar, 1, 0},
		{ginv1.Collective_COLLECTIVE_ALL_GATHER, 8, 0.875}, {ginv1.Collective_COLLECTIVE_REDUCE_SCATTER, 4, 0.75},
		{ginv1.Collective_COLLECTIVE_BROADCAST, 8, 1}, {ginv1.Collective_COLLECTIVE_REDUCE, 8, 1},
	} {
		if got := BusFactor(tc.c, tc.n); got != tc.want {
			t.Errorf("%v n=%d: %v, want %v", tc.c, tc.n, got, tc.want)
		}
	}
}

func TestCells(t *testing.T) {
	h2 := multi(dgxH100, 2, 8, 400)
	pcie := Shape{NRanks: 8, NNodes: 1, CompCap: 80, IntraGBps: 31.5}
	one := Shape{NRanks: 1, NNodes: 1, CompCap: 90}
	for _, tc := range []struct {
		name  string
		s     Shape
		coll  ginv1.Collective
		algo  ginv1.Algorithm
		proto ginv1.Protocol
		ok    bool
	}{
		{"nvls single node", dgxH100, ar, nvls, simp, true},
		{"nvls not LL", dgxH100, ar, nvls, ll, false},
		{"nvls not on A100", dgxA100, ar, nvls, simp, false},
		// NCCL >= 2.28.7 (ncclNvlsInit: gpuCount < 2) offers NVLS from 2 GPUs.
		{"nvls on 4 GPUs", ranks(dgxH100, 4), ar, nvls, simp, true},
		{"nvls on 2 GPUs", ranks(dgxH100, 2), ar, nvls, simp, true},
		{"nvls not on 1 GPU", ranks(dgxH100, 1), ar, nvls, simp, false},
		{"nvls tree on 2 GPUs per node", multi(ranks(dgxH100, 2), 2, 2, 400), ar, ginv1.Algorithm_ALGORITHM_NVLS_TREE, simp, true},
		{"nvls tree not on 1 GPU per node", onePerNode(2, 400), ar, ginv1.Algorithm_ALGORITHM_NVLS_TREE, simp, false},
		{"nvls multi-node needs collnet", h2, ar, nvls, simp, false},
		{"nvls tree multi-node", h2, ar, ginv1.Algorithm_ALGORITHM_NVLS_TREE, simp, true},
		{"nvls tree not single node", dgxH100, ar, ginv1.Algorithm_ALGORITHM_NVLS_TREE, simp, false},
		{"tree only all_reduce", h2, ginv1.Collective_COLLECTIVE_ALL_GATHER, ginv1.Algorithm_ALGORITHM_TREE, simp, false},
		{"pat 1 GPU/node", onePerNode(4, 400), ginv1.Collective_COLLECTIVE_ALL_GATHER, ginv1.Algorithm_ALGORITHM_PAT, simp, true},
		{"pat not 8 GPU/node", h2, ginv1.Collective_COLLECTIVE_ALL_GATHER, ginv1.Algorithm_ALGORITHM_PAT, simp, false},
		{"pat not all_reduce", onePerNode(4, 400), ar, ginv1.Algorithm_ALGORITHM_PAT, simp, false},
		{"no LL128 over PCIe", pcie, ar, ring, ginv1.Protocol_PROTOCOL_LL128, false},
		{"collnet off", h2, ar, ginv1.Algorithm_ALGORITHM_COLLNET_DIRECT, simp, false},
		{"one rank ring/simple", one, ar, ring, simp, true},
		{"one rank nothing else", one, ar, ring, ll, false},
		{"bad algorithm", dgxH100, ar, 0, simp, false},
		{"bad collective", dgxH100, 0, ring, simp, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ok := Cost(tc.s, tc.coll, tc.algo, tc.proto, 1<<20)
			_, okN := CostNCCL(tc.s, tc.coll, tc.algo, tc.proto, 1<<20)
			if ok != tc.ok || okN != tc.ok {
				t.Fatalf("ok %v/%v, want %v", ok, okN, tc.ok)
			}
		})
	}
}

func TestPredict(t *testing.T) {
	p, err := Predict(dgxH100, ar, 1<<30)
	if err != nil || p.Algorithm != nvls {
		t.Fatalf("%+v %v", p, err)
	}
	if want := float64(1<<30) / p.TimeUs / 1000; p.AlgBWGBps != want || p.BusBWGBps != want*1.75 {
		t.Fatalf("bandwidths %+v", p)
	}
	// Ties and the cheapest cell: Predict equals the min over Cost.
	for _, b := range []uint64{0, 8, 1 << 16, 1 << 24, 1 << 34} {
		p, _ := Predict(multi(dgxA100, 4, 8, 200), ar, b)
		for _, a := range Algorithms {
			for _, pr := range Protocols {
				if us, ok := Cost(multi(dgxA100, 4, 8, 200), ar, a, pr, b); ok && us < p.TimeUs {
					t.Fatalf("%d B: %v/%v %.2f < predicted %.2f", b, a, pr, us, p.TimeUs)
				}
			}
		}
	}
	if _, err := Predict(Shape{NRanks: 3, NNodes: 2}, ar, 8); err == nil {
		t.Fatal("bad shape accepted")
	}
	if _, err := Predict(Shape{NRanks: 4, NNodes: 2, CompCap: 90}, ar, 8); err == nil {
		t.Fatal("multi-node without NICs accepted")
	}
	// Oversubscription and hops only affect GIN's model.
	over := multi(dgxH100, 4, 8, 400)
	over.InterHops, over.Oversubscription = 3, 2
	g0, _ := Predict(multi(dgxH100, 4, 8, 400), ar, 1<<30)
	g1, _ := Predict(over, ar, 1<<30)
	n0, _ := PredictNCCL(multi(dgxH100, 4, 8, 400), ar, 1<<30)
	n1, _ := PredictNCCL(over, ar, 1<<30)
	if !(g1.TimeUs > g0.TimeUs) || n0.TimeUs != n1.TimeUs {
		t.Fatalf("gin %v→%v nccl %v→%v", g0.TimeUs, g1.TimeUs, n0.TimeUs, n1.TimeUs)
	}
	eth := multi(dgxH100, 2, 8, 400)
	l0, _ := Predict(eth, ar, 8)
	eth.Ethernet = true
	l1, _ := Predict(eth, ar, 8)
	if !(l1.TimeUs > l0.TimeUs) {
		t.Fatalf("ethernet latency %v → %v", l0.TimeUs, l1.TimeUs)
	}
}

func BenchmarkPredict(b *testing.B) {
	s := multi(dgxH100, 128, 8, 400)
	for b.Loop() {
		if _, err := Predict(s, ar, 1<<26); err != nil {
			b.Fatal(err)
		}
	}
}

// TestNICPath: how each simulated profile's GPUs reach their NICs across
// nodes, and what it changes. GB200 trays in two racks (no shared NVLink
// domain) go GPU→C2C→Grace→PCIe→NIC: `topo -m` prints SYS, but NCCL's
// P2C keeps GPUDirect RDMA and LL128, and the NIC is bound by its port, not
// by a cross-socket path. The same trays without the C2C report (an agent
// that does not read it) reach the NIC through the host: LL128 is off
// across nodes, and the model's small-message times rise.
func TestNICPath(t *testing.T) {
	build := func(t *testing.T, nodes []sim.FabricNode, dropC2C bool) (*graph.Graph, []string) {
		t.Helper()
		spec := sim.DefaultFabricSpec()
		c, err := sim.NewCluster("test", &spec, nodes)
		if err != nil {
			t.Fatal(err)
		}
		invs, err := c.Collect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if dropC2C {
			for _, inv := range invs {
				for _, gp := range inv.Gpus {
					gp.C2C = nil
				}
			}
		}
		g, err := graph.Build(invs, c.Fabric)
		if err != nil {
			t.Fatal(err)
		}
		return g, c.Names()
	}
	racks := []sim.FabricNode{{Name: "tray-a", Profile: "gb200-nvl72", Index: 0}, {Name: "tray-b", Profile: "gb200-nvl72", Index: sim.TraysPerRack}}
	for _, tc := range []struct {
		name    string
		nodes   []sim.FabricNode
		dropC2C bool
		want    NICPath
		ll128   bool
	}{
		{"dgx-h100", sim.NodesOf("dgx-h100", "n", 0, 2), false, NICPathSwitch, true},
		{"dgx-a100", sim.NodesOf("dgx-a100", "n", 0, 2), false, NICPathSwitch, true},
		{"hgx-b200", sim.NodesOf("hgx-b200", "n", 0, 2), false, NICPathSwitch, true},
		{"gb200 two racks", racks, false, NICPathC2C, true},
		{"gb200 two racks, no C2C report", racks, true, NICPathHost, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, names := build(t, tc.nodes, tc.dropC2C)
			s, err := ShapeOf(g, names, 0)
			if err != nil {
				t.Fatal(err)
			}
			if s.NICPath != tc.want || s.MNNVL || s.NICGbps <= 0 {
				t.Fatalf("shape %+v: NIC path %v, want %v (not MNNVL, a NIC rate)", s, s.NICPath, tc.want)
			}
			_, ok := Cost(s, ginv1.Collective_COLLECTIVE_ALL_REDUCE, ginv1.Algorithm_ALGORITHM_RING, ginv1.Protocol_PROTOCOL_LL128, 1<<20)
			_, okNCCL := CostNCCL(s, ginv1.Collective_COLLECTIVE_ALL_REDUCE, ginv1.Algorithm_ALGORITHM_RING, ginv1.Protocol_PROTOCOL_LL128, 1<<20)
			if ok != tc.ll128 || okNCCL != tc.ll128 {
				t.Errorf("ring/LL128 offered: GIN %v, NCCL %v, want %v", ok, okNCCL, tc.ll128)
			}
		})
	}
	// The C2C tray: 400 Gb/s per NIC (the port; C2C and PCIe Gen5 x16 are
	// wider), 4 NICs, and at 1 MiB the C2C shape is faster than the same
	// trays seen through the host (LL128 kept).
	gc, nc := build(t, racks, false)
	gh, nh := build(t, racks, true)
	sc, _ := ShapeOf(gc, nc, 0)
	sh, _ := ShapeOf(gh, nh, 0)
	if sc.NICGbps != 400 || sc.NICsPerNode != 4 {
		t.Errorf("C2C tray: %d NICs at %g Gb/s, want 4 at 400", sc.NICsPerNode, sc.NICGbps)
	}
	pc, err := Predict(sc, ginv1.Collective_COLLECTIVE_ALL_REDUCE, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	ph, err := Predict(sh, ginv1.Collective_COLLECTIVE_ALL_REDUCE, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if pc.TimeUs >= ph.TimeUs || pc.Protocol != ginv1.Protocol_PROTOCOL_LL128 {
		t.Errorf("1 MiB all_reduce: C2C %v/%v %.1f µs, through the host %v/%v %.1f µs; want C2C faster on LL128",
			pc.Algorithm, pc.Protocol, pc.TimeUs, ph.Algorithm, ph.Protocol, ph.TimeUs)
	}
	t.Logf("1 MiB all_reduce, 2 GB200 trays in 2 racks: C2C %v/%v %.1f µs; through the host %v/%v %.1f µs",
		pc.Algorithm, pc.Protocol, pc.TimeUs, ph.Algorithm, ph.Protocol, ph.TimeUs)
}
