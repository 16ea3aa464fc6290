package calib

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/costmodel"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/nccltests"
)

func meas(id string, created uint64, a ginv1.Algorithm, pts ...[2]float64) *ginv1.Measurement {
	m := &ginv1.Measurement{Id: id, CreatedIndex: created, Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, Algorithm: a,
		Shape: &ginv1.PlacementShape{GpusPerNode: 8, NodeCount: 2, NicsPerNode: 8, NicGbps: 400, NvlinkDomainSize: 8, FabricTiers: 1},
		Nodes: []string{"a", "b"}}
	for _, p := range pts {
		m.Points = append(m.Points, &ginv1.MeasuredPoint{Bytes: uint64(p[0]), TimeUs: p[1]})
	}
	return m
}

func TestAt(t *testing.T) {
	m := meas("m", 1, 0, [2]float64{1 << 20, 100}, [2]float64{1 << 22, 250}, [2]float64{64 << 20, 2000})
	small := meas("s", 1, 0, [2]float64{1 << 10, 10}, [2]float64{1 << 12, 12})
	tests := []struct {
		m     *ginv1.Measurement
		bytes uint64
		us    float64
		how   string
		ok    bool
	}{
		{m, 1 << 20, 100, "measured", true},
		{m, 1<<20 + (1<<22-1<<20)/2, 175, "interpolated", true},
		{m, 128 << 20, 4000, "extrapolated", true},
		{m, 1 << 19, 0, "", false},
		{small, 1 << 20, 0, "", false}, // above a latency-bound largest size: not extrapolated
	}
	for _, tc := range tests {
		us, how, ok := At(tc.m, tc.bytes, nil)
		if us != tc.us || how != tc.how || ok != tc.ok {
			t.Errorf("At(%s, %d) = %v %q %v, want %v %q %v", tc.m.Id, tc.bytes, us, how, ok, tc.us, tc.how, tc.ok)
		}
	}
}

func TestSpreadAt(t *testing.T) {
	m := meas("m", 1, 0, [2]float64{1 << 20, 100}, [2]float64{1 << 22, 250}, [2]float64{64 << 20, 2000})
	m.Points[0].SlowerTimeUs = 110  // 10%
	m.Points[1].SlowerTimeUs = 0    // one cell: not known
	m.Points[2].SlowerTimeUs = 2100 // 5%
	tests := []struct {
		name  string
		bytes uint64
		want  float64
	}{
		{"measured", 1 << 20, 0.10},
		{"measured, one cell", 1 << 22, 0},
		{"between: the larger of the two", 2 << 20, 0.10},
		{"between, one side unknown", 8 << 20, 0.05},
		{"above the largest: the largest's", 1 << 30, 0.05},
		{"below the smallest", 1 << 10, 0},
	}
	for _, tc := range tests {
		if got := SpreadAt(m, tc.bytes); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: SpreadAt(%d) = %v, want %v", tc.name, tc.bytes, got, tc.want)
		}
	}
	if got := SpreadAt(&ginv1.Measurement{}, 1<<20); got != 0 {
		t.Errorf("no points: %v", got)
	}
	// Lookup carries it into the cell, and Apply into the evidence.
	cells := Lookup([]*ginv1.Measurement{m}, m.Shape, m.Collective, 1<<20, nil)
	if len(cells) != 1 || math.Abs(cells[0].Spread-0.10) > 1e-12 {
		t.Fatalf("cells %+v, want one with spread 0.10", cells)
	}
	p := &ginv1.Prediction{SizeBytes: 1 << 20, Collective: m.Collective, NRanks: 16}
	Apply(p, cells)
	if !strings.Contains(p.GetEvidence(), "its out-of-place and in-place cells differ by 10.0% there") {
		t.Errorf("evidence %q does not give the spread", p.GetEvidence())
	}
}

func TestLookupTakesNewestPerCellAndMatchingShape(t *testing.T) {
	old := meas("old", 1, ginv1.Algorithm_ALGORITHM_TREE, [2]float64{1 << 20, 100})
	newer := meas("new", 5, ginv1.Algorithm_ALGORITHM_TREE, [2]float64{1 << 20, 90})
	ring := meas("ring", 2, ginv1.Algorithm_ALGORITHM_RING, [2]float64{1 << 20, 120})
	def := meas("def", 3, 0, [2]float64{1 << 20, 121})
	other := meas("other", 9, ginv1.Algorithm_ALGORITHM_TREE, [2]float64{1 << 20, 1})
	other.Shape.NodeCount = 4
	gather := meas("gather", 9, ginv1.Algorithm_ALGORITHM_TREE, [2]float64{1 << 20, 1})
	gather.Collective = ginv1.Collective_COLLECTIVE_ALL_GATHER
	cells := Lookup([]*ginv1.Measurement{old, newer, ring, def, other, gather}, newer.Shape, ginv1.Collective_COLLECTIVE_ALL_REDUCE, 1<<20, nil)
	var got []string
	for _, c := range cells {
		got = append(got, fmt.Sprintf("%s:%v:%v", c.ID, c.TimeUs, c.Default))
	}
	if strings.Join(got, " ") != "new:90:false ring:120:false def:121:true" {
		t.Errorf("cells %v", got)
	}
}

func TestForcedOf(t *testing.T) {
	tests := []struct {
		env         map[string]string
		algo, proto string
		want        Forced
		note        string
		err         bool
	}{
		{nil, "", "", Forced{By: "default"}, "", false},
		{map[string]string{"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"}, "", "", Forced{ginv1.Algorithm_ALGORITHM_TREE, ginv1.Protocol_PROTOCOL_SIMPLE, "log"}, "", false},
		{map[string]string{"NCCL_ALGO": "Tree"}, "ring", "", Forced{ginv1.Algorithm_ALGORITHM_RING, 0, "flag"}, "", false},
		{map[string]string{"NCCL_ALGO": "ring,tree"}, "", "", Forced{By: "default"}, "allows more than one", false},
		{map[string]string{"NCCL_ALGO": "^nvls"}, "", "ll128", Forced{0, ginv1.Protocol_PROTOCOL_LL128, "flag"}, "allows more than one", false},
		{nil, "bogus", "", Forced{}, "", true},
		{map[string]string{"NCCL_NVLS_ENABLE": "0"}, "", "", Forced{}, "", true},
		{map[string]string{"NCCL_NVLS_ENABLE": "0", "NCCL_ALGO": "Ring"}, "", "", Forced{ginv1.Algorithm_ALGORITHM_RING, 0, "log"}, "", false},
	}
	for i, tc := range tests {
		f, note, err := ForcedOf(&nccltests.Run{Env: tc.env}, tc.algo, tc.proto)
		if (err != nil) != tc.err || f != tc.want || !strings.Contains(note, tc.note) {
			t.Errorf("%d: %+v %q %v, want %+v %q err=%v", i, f, note, err, tc.want, tc.note, tc.err)
		}
	}
}

func simGraph(t *testing.T, profile string, n int) (*graph.Graph, []string) {
	t.Helper()
	c, err := sim.NewCluster("test", &sim.FabricSpec{LeafGroups: 1, Spines: 2, Oversubscription: 1}, sim.NodesOf(profile, "node", 1, n))
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

func TestKeyOf(t *testing.T) {
	model := func(string) string { return "GPU-X" }
	h100, hn := simGraph(t, "dgx-h100", 2)
	gb, gn := simGraph(t, "gb200-nvl72", 2)
	tests := []struct {
		name  string
		g     *graph.Graph
		nodes []string
		gpn   int
		want  string
	}{
		{"DGX H100 × 2", h100, hn, 0, "GPU-X dom 8 gpn 8 nics 8 @400 nodes 2 tiers 1"},
		{"DGX H100, 1 GPU per node", h100, hn, 1, "GPU-X dom 8 gpn 1 nics 1 @400 nodes 2 tiers 1"},
		{"one DGX H100", h100, hn[:1], 0, "GPU-X dom 8 gpn 8 nics 0 @0 nodes 1 tiers 0"},
		{"GB200 trays in one clique", gb, gn, 0, "GPU-X dom 8 gpn 4 nics 0 @0 nodes 2 tiers 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := KeyOf(tc.g, model, tc.nodes, tc.gpn, "2.21.5")
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprintf("%s dom %d gpn %d nics %d @%g nodes %d tiers %d", k.GetGpuModel(), k.GetNvlinkDomainSize(), k.GetGpusPerNode(),
				k.GetNicsPerNode(), k.GetNicGbps(), k.GetNodeCount(), k.GetFabricTiers())
			if got != tc.want || k.GetNcclVersion() != "2.21.5" {
				t.Errorf("key %s, want %s", got, tc.want)
			}
		})
	}
}

// TestModelInputsNICPath: a modelled estimate's evidence names how the GPUs
// reach their NICs when it is not a PCIe switch: GB200 trays in two racks
// over Grace C2C (GPUDirect kept), the same trays without the C2C report
// through the host; a DGX H100 pair says nothing of it.
func TestModelInputsNICPath(t *testing.T) {
	racks := []sim.FabricNode{{Name: "tray-a", Profile: "gb200-nvl72", Index: 0}, {Name: "tray-b", Profile: "gb200-nvl72", Index: sim.TraysPerRack}}
	for _, tc := range []struct {
		name          string
		nodes         []sim.FabricNode
		dropC2C       bool
		want, notWant string
	}{
		{"gb200 C2C", racks, false, "GPU→NIC over Grace C2C + PCIe (NCCL P2C, GPUDirect RDMA kept)", "through the host"},
		{"gb200 without C2C report", racks, true, "GPU→NIC through the host (no GPUDirect RDMA", "C2C"},
		{"dgx-h100", sim.NodesOf("dgx-h100", "n", 0, 2), false, "slowest 400 Gb/s", "GPU→NIC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := sim.NewCluster("test", &sim.FabricSpec{LeafGroups: 2, Spines: 2, Oversubscription: 1}, tc.nodes)
			if err != nil {
				t.Fatal(err)
			}
			invs, err := c.Collect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, inv := range invs {
				for _, gp := range inv.Gpus {
					if tc.dropC2C {
						gp.C2C = nil
					}
				}
			}
			// Two racks: not one NVLink domain, so the NICs carry it.
			g, err := graph.Build(invs, c.Fabric)
			if err != nil {
				t.Fatal(err)
			}
			s, err := costmodel.ShapeOf(g, c.Names(), 0)
			if err != nil {
				t.Fatal(err)
			}
			got := ModelInputs(s)
			if !strings.Contains(got, tc.want) || strings.Contains(got, tc.notWant) {
				t.Errorf("evidence %q: want %q, not %q", got, tc.want, tc.notWant)
			}
		})
	}
}

// TestAtWithModel: between two measured sizes At returns the model's time
// calibrated by the measured/model ratio interpolated in log-size, above
// the largest (≥ ExtrapolateFrom) the model times the largest size's
// ratio, and linear in size where the model has no time.
func TestAtWithModel(t *testing.T) {
	model := Curve(func(b uint64) float64 { return 10 + float64(b)/1e4 })
	none := Curve(func(uint64) float64 { return 0 })
	at := func(b uint64, ratio float64) [2]float64 { return [2]float64{float64(b), model(b) * ratio} }
	flat := meas("flat", 1, 0, at(1<<20, 1.2), at(4<<20, 1.2))
	ramp := meas("ramp", 1, 0, at(1<<20, 1.0), at(4<<20, 1.21))
	big := meas("big", 1, 0, at(32<<20, 1.0), at(64<<20, 0.9))
	tests := []struct {
		name  string
		m     *ginv1.Measurement
		model Curve
		bytes uint64
		want  float64
		how   string
	}{
		{"constant ratio", flat, model, 2 << 20, model(2<<20) * 1.2, "interpolated"},
		{"ratio halfway in log-size", ramp, model, 2 << 20, model(2<<20) * 1.1, "interpolated"},
		{"measured size", ramp, model, 4 << 20, model(4<<20) * 1.21, "measured"},
		{"above the largest", big, model, 256 << 20, model(256<<20) * 0.9, "extrapolated"},
		{"no model time: linear", flat, none, 2 << 20, model(1<<20)*1.2 + (model(4<<20)-model(1<<20))*1.2/3, "interpolated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			us, how, ok := At(tc.m, tc.bytes, tc.model)
			if !ok || how != tc.how || math.Abs(us-tc.want) > 1e-9*tc.want {
				t.Errorf("At = %v %q %v, want %v %q", us, how, ok, tc.want, tc.how)
			}
		})
	}
}
