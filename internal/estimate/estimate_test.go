package estimate

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/graph"
)

const (
	allReduce = ginv1.Collective_COLLECTIVE_ALL_REDUCE
	allGather = ginv1.Collective_COLLECTIVE_ALL_GATHER
	broadcast = ginv1.Collective_COLLECTIVE_BROADCAST
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestForPlacement(t *testing.T) {
	g := simGraph(t, "leaf-groups=2,spines=4", simPart{profile: "dgx-h100", count: 4})
	for _, tc := range []struct {
		name          string
		nodes         []string
		gpusPerNode   int
		coll          ginv1.Collective
		bytes         uint64
		ranks, nNodes uint32
		factor        float64 // busbw / algbw
	}{
		{"one node all_reduce", []string{"node000"}, 0, allReduce, 1 << 30, 8, 1, 2 * 7.0 / 8},
		{"two nodes all_reduce", []string{"node000", "node001"}, 0, allReduce, 1 << 30, 16, 2, 2 * 15.0 / 16},
		{"four nodes, 4 GPUs each", []string{"node003", "node000", "node002", "node001"}, 4, allReduce, 256 << 20, 16, 4, 2 * 15.0 / 16},
		{"all_gather", []string{"node000", "node002"}, 0, allGather, 64 << 20, 16, 2, 15.0 / 16},
		{"broadcast", []string{"node000", "node002"}, 2, broadcast, 1 << 20, 4, 2, 1},
		{"small all_reduce", []string{"node000"}, 2, allReduce, 8, 2, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ForPlacement(g, tc.nodes, tc.gpusPerNode, tc.coll, tc.bytes)
			if err != nil {
				t.Fatal(err)
			}
			if p.Collective != tc.coll || p.SizeBytes != tc.bytes || p.NRanks != tc.ranks || p.NNodes != tc.nNodes {
				t.Errorf("prediction %v: want %v of %d bytes on %d ranks, %d nodes", p, tc.coll, tc.bytes, tc.ranks, tc.nNodes)
			}
			if p.TimeUs <= 0 || p.Algorithm == ginv1.Algorithm_ALGORITHM_UNSPECIFIED || p.Protocol == ginv1.Protocol_PROTOCOL_UNSPECIFIED {
				t.Errorf("prediction %v: no time, algorithm or protocol", p)
			}
			if algbw := float64(tc.bytes) / (p.TimeUs * 1e-6) / 1e9; !near(p.AlgbwGbps, algbw) {
				t.Errorf("algbw %g GB/s, want size/time = %g", p.AlgbwGbps, algbw)
			}
			if !near(p.BusbwGbps, p.AlgbwGbps*tc.factor) {
				t.Errorf("busbw %g GB/s, want algbw × %g = %g", p.BusbwGbps, tc.factor, p.AlgbwGbps*tc.factor)
			}
		})
	}
}

func TestForPlacementErrors(t *testing.T) {
	g := simGraph(t, "", simPart{profile: "dgx-h100", count: 2})
	for _, tc := range []struct {
		name  string
		g     *graph.Graph
		nodes []string
		gpn   int
		coll  ginv1.Collective
		want  string
	}{
		{"nil graph", nil, []string{"node000"}, 0, allReduce, "no graph"},
		{"no nodes", g, nil, 0, allReduce, "no nodes"},
		{"unknown node", g, []string{"node000", "node404"}, 0, allReduce, `"node404"`},
		{"duplicate", g, []string{"node001", "node001"}, 0, allReduce, "node001 is listed twice"},
		{"negative gpus per node", g, []string{"node000"}, -1, allReduce, "gpus per node -1"},
		{"no collective", g, []string{"node000"}, 0, ginv1.Collective_COLLECTIVE_UNSPECIFIED, "collective"},
		{"too many gpus per node", g, []string{"node000"}, 9, allReduce, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ForPlacement(tc.g, tc.nodes, tc.gpn, tc.coll, 1<<20)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// byClass indexes placement estimates, checking the fixed class order.
func byClass(t *testing.T, pes []*ginv1.PlacementEstimate) map[string]*ginv1.PlacementEstimate {
	t.Helper()
	want := []string{PlacementNVLinkDomain, PlacementNodePCIe, PlacementOneLeaf, PlacementSpine, PlacementEthernet}
	var got []string
	out := map[string]*ginv1.PlacementEstimate{}
	for _, pe := range pes {
		got = append(got, pe.Placement)
		out[pe.Placement] = pe
	}
	if !slices.Equal(got, want) {
		t.Fatalf("placements %v, want %v", got, want)
	}
	return out
}

func gpusOf(node string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, gpuName(node, i))
	}
	return out
}

// check is what a test expects of one placement class.
type check struct {
	available bool
	gpus      []string // nil: not checked
	reason    string   // substring of the reason when not available
}

func TestForGPUCount(t *testing.T) {
	h100 := simGraph(t, "leaf-groups=2,spines=4,oversub=1", simPart{profile: "dgx-h100", count: 8})
	h100Over := simGraph(t, "leaf-groups=2,spines=2,oversub=4", simPart{profile: "dgx-h100", count: 8})
	gb200 := simGraph(t, "leaf-groups=2,spines=2", simPart{profile: "gb200-nvl72", count: 8})
	mixed, mixedInvs := simGraphHook(t, "leaf-groups=2,spines=2", nil,
		simPart{profile: "dgx-h100", count: 4}, simPart{profile: "pcie-8gpu", count: 4, prefix: "pcie"})
	ethernet := EthernetFromInventories(mixedInvs)
	nvpair := simGraph(t, "none", simPart{profile: "rtx3090-nvlink-pair", count: 2, prefix: "ws"})
	dp := &ginv1.Workload{Preset: ginv1.WorkloadPreset_WORKLOAD_PRESET_DATA_PARALLEL_TRAINING}
	tp := &ginv1.Workload{Preset: ginv1.WorkloadPreset_WORKLOAD_PRESET_TENSOR_PARALLEL_INFERENCE}
	two := func(a string, na int, b string, nb int) []string {
		return append(gpusOf(a, 0, na), gpusOf(b, 0, nb)...)
	}
	for _, tc := range []struct {
		name string
		g    *graph.Graph
		n    int
		busy map[string]bool
		w    *ginv1.Workload
		eth  func(string) bool
		want map[string]check
		// bestBusBW: the class with the highest busbw of the available ones.
		bestBusBW string
		// faster: pairs (a, b) where a's prediction must beat b's.
		faster [][2]string
	}{
		{
			name: "8 GPUs on DGX H100", g: h100, n: 8, w: dp,
			want: map[string]check{
				PlacementNVLinkDomain: {available: true, gpus: gpusOf("node000", 0, 8)},
				PlacementNodePCIe:     {reason: "every node connects its GPUs with NVLink"},
				PlacementOneLeaf:      {available: true, gpus: two("node000", 4, "node001", 4)},
				PlacementSpine:        {available: true, gpus: two("node000", 4, "node004", 4)},
				PlacementEthernet:     {reason: "no node has Ethernet (RoCE) compute ports"},
			},
			bestBusBW: PlacementNVLinkDomain,
			faster:    [][2]string{{PlacementNVLinkDomain, PlacementOneLeaf}},
		},
		{
			name: "16 GPUs on DGX H100", g: h100, n: 16, w: dp,
			want: map[string]check{
				PlacementNVLinkDomain: {reason: "has 8 GPUs; 16 GPUs span more than one"},
				PlacementNodePCIe:     {reason: "every node"},
				PlacementOneLeaf:      {available: true, gpus: two("node000", 8, "node001", 8)},
				PlacementSpine:        {available: true, gpus: two("node000", 8, "node004", 8)},
				PlacementEthernet:     {reason: "Ethernet"},
			},
		},
		{
			name: "16 GPUs on GB200 NVL72", g: gb200, n: 16, w: dp,
			want: map[string]check{
				PlacementNVLinkDomain: {available: true, gpus: slices.Concat(gpusOf("node000", 0, 4), gpusOf("node001", 0, 4), gpusOf("node002", 0, 4), gpusOf("node003", 0, 4))},
				PlacementNodePCIe:     {reason: "every node"},
				PlacementOneLeaf:      {reason: "all in one MNNVL clique"},
				PlacementSpine:        {reason: "all in one MNNVL clique"},
				PlacementEthernet:     {reason: "Ethernet"},
			},
			bestBusBW: PlacementNVLinkDomain,
		},
		{
			name: "32 GPUs, oversubscribed spine", g: h100Over, n: 32, w: dp,
			want: map[string]check{
				PlacementNVLinkDomain: {reason: "8 GPUs"},
				PlacementOneLeaf:      {available: true, gpus: slices.Concat(gpusOf("node000", 0, 8), gpusOf("node001", 0, 8), gpusOf("node002", 0, 8), gpusOf("node003", 0, 8))},
				PlacementSpine:        {available: true, gpus: slices.Concat(gpusOf("node000", 0, 8), gpusOf("node004", 0, 8), gpusOf("node001", 0, 8), gpusOf("node005", 0, 8))},
			},
			faster: [][2]string{{PlacementOneLeaf, PlacementSpine}},
		},
		{
			name: "busy nodes are skipped", g: h100, n: 8, w: dp,
			busy: map[string]bool{"node000": true, "node001": true, "node004": true, "not-in-graph": true},
			want: map[string]check{
				PlacementNVLinkDomain: {available: true, gpus: gpusOf("node002", 0, 8)},
				PlacementOneLeaf:      {available: true, gpus: two("node002", 4, "node003", 4)},
				PlacementSpine:        {available: true, gpus: two("node002", 4, "node005", 4)},
			},
		},
		{
			name: "everything busy", g: h100, n: 8, w: dp,
			busy: map[string]bool{"node000": true, "node001": true, "node002": true, "node003": true, "node004": true, "node005": true, "node006": true, "node007": true},
			want: map[string]check{
				PlacementNVLinkDomain: {reason: "no NVLink domain has 8 free GPUs"},
				PlacementOneLeaf:      {reason: "no InfiniBand node is free"},
				PlacementSpine:        {reason: "no InfiniBand node is free"},
			},
		},
		{
			name: "one leaf left", g: h100, n: 24, w: dp,
			busy: map[string]bool{"node000": true, "node001": true, "node002": true},
			want: map[string]check{
				PlacementOneLeaf: {available: true, gpus: slices.Concat(gpusOf("node004", 0, 8), gpusOf("node005", 0, 8), gpusOf("node006", 0, 8))},
				PlacementSpine:   {available: true, gpus: slices.Concat(gpusOf("node003", 0, 8), gpusOf("node004", 0, 8), gpusOf("node005", 0, 8))},
			},
		},
		{
			name: "too few free under one leaf", g: h100, n: 40, w: dp,
			want: map[string]check{
				PlacementOneLeaf: {reason: "no leaf switch has 40 free GPUs on two or more nodes (most: 32 under"},
				PlacementSpine:   {available: true},
			},
		},
		{
			name: "ethernet cluster", g: mixed, n: 16, w: dp, eth: ethernet,
			want: map[string]check{
				PlacementNVLinkDomain: {reason: "8 GPUs"},
				PlacementNodePCIe:     {reason: "the largest node without NVLink has 8 GPUs"},
				PlacementOneLeaf:      {available: true, gpus: two("node000", 8, "node001", 8)},
				PlacementEthernet:     {available: true, gpus: two("pcie004", 8, "pcie005", 8)},
			},
			faster: [][2]string{{PlacementOneLeaf, PlacementEthernet}},
		},
		{
			name: "8 GPUs on a PCIe node", g: mixed, n: 8, w: dp, eth: ethernet,
			want: map[string]check{
				PlacementNVLinkDomain: {available: true, gpus: gpusOf("node000", 0, 8)},
				PlacementNodePCIe:     {available: true, gpus: gpusOf("pcie004", 0, 8)},
				PlacementEthernet:     {available: true, gpus: two("pcie004", 4, "pcie005", 4)},
			},
			bestBusBW: PlacementNVLinkDomain,
			faster:    [][2]string{{PlacementNVLinkDomain, PlacementNodePCIe}},
		},
		{
			name: "tensor parallel inference", g: h100, n: 8, w: tp,
			want: map[string]check{
				PlacementNVLinkDomain: {available: true, gpus: gpusOf("node000", 0, 8)},
				PlacementSpine:        {available: true},
			},
			faster: [][2]string{{PlacementNVLinkDomain, PlacementSpine}},
		},
		{
			name: "one GPU", g: h100, n: 1, w: dp,
			want: map[string]check{
				PlacementNVLinkDomain: {available: true, gpus: []string{"node000/GPU0"}},
				PlacementOneLeaf:      {reason: "1 GPU needs no second node"},
				PlacementSpine:        {reason: "1 GPU"},
				PlacementEthernet:     {reason: "1 GPU"},
			},
		},
		{
			name: "NVLink pair, no fabric", g: nvpair, n: 2, w: dp,
			want: map[string]check{
				PlacementNVLinkDomain: {available: true, gpus: gpusOf("ws000", 0, 2)},
				PlacementOneLeaf:      {reason: "no node has InfiniBand compute ports"},
				PlacementEthernet:     {reason: "Ethernet"},
			},
		},
		{
			name: "4 GPUs over NVLink pairs", g: nvpair, n: 4, w: dp,
			want: map[string]check{
				PlacementNVLinkDomain: {reason: "the largest NVLink domain (one node) has 2 GPUs"},
				PlacementNodePCIe:     {reason: "every node"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pes, err := ForGPUCountWith(tc.g, tc.n, tc.busy, tc.w, Options{Ethernet: tc.eth})
			if err != nil {
				t.Fatal(err)
			}
			got := byClass(t, pes)
			for class, want := range tc.want {
				pe := got[class]
				if pe.Available != want.available {
					t.Errorf("%s: available %v (%q), want %v", class, pe.Available, pe.Reason, want.available)
					continue
				}
				if !want.available {
					if !strings.Contains(pe.Reason, want.reason) {
						t.Errorf("%s: reason %q, want one containing %q", class, pe.Reason, want.reason)
					}
					continue
				}
				if want.gpus != nil && !slices.Equal(pe.Gpus, want.gpus) {
					t.Errorf("%s: gpus %v, want %v", class, pe.Gpus, want.gpus)
				}
			}
			for _, pe := range pes {
				checkEstimate(t, pe, tc.n)
			}
			if tc.bestBusBW != "" {
				best := got[tc.bestBusBW].GetPrediction().GetBusbwGbps()
				for _, pe := range pes {
					if pe.Available && pe.Placement != tc.bestBusBW && pe.Prediction.BusbwGbps >= best {
						t.Errorf("%s: busbw %.1f GB/s ≥ %s's %.1f", pe.Placement, pe.Prediction.BusbwGbps, tc.bestBusBW, best)
					}
				}
			}
			for _, f := range tc.faster {
				a, b := got[f[0]], got[f[1]]
				if !a.Available || !b.Available {
					t.Errorf("%s vs %s: not both available", f[0], f[1])
					continue
				}
				if a.Prediction.TimeUs >= b.Prediction.TimeUs || a.Speedup <= b.Speedup {
					t.Errorf("%s (%.1f µs, speedup %.2f) is not faster than %s (%.1f µs, speedup %.2f)",
						f[0], a.Prediction.TimeUs, a.Speedup, f[1], b.Prediction.TimeUs, b.Speedup)
				}
			}
			// Deterministic.
			again, err := ForGPUCountWith(tc.g, tc.n, tc.busy, tc.w, Options{Ethernet: tc.eth})
			if err != nil {
				t.Fatal(err)
			}
			for i := range pes {
				if !proto.Equal(pes[i], again[i]) {
					t.Errorf("second call differs: %v vs %v", pes[i], again[i])
				}
			}
		})
	}
}

// checkEstimate checks what holds for every placement estimate.
func checkEstimate(t *testing.T, pe *ginv1.PlacementEstimate, n int) {
	t.Helper()
	if !pe.Available {
		if pe.Reason == "" || pe.Prediction != nil || len(pe.Gpus) != 0 {
			t.Errorf("%s: unavailable with reason %q, prediction %v, gpus %v", pe.Placement, pe.Reason, pe.Prediction, pe.Gpus)
		}
		return
	}
	if pe.Reason != "" || len(pe.Gpus) != n || pe.Prediction == nil || pe.Description == "" {
		t.Fatalf("%s: available with reason %q, %d GPUs (want %d), prediction %v, description %q", pe.Placement, pe.Reason, len(pe.Gpus), n, pe.Prediction, pe.Description)
	}
	seen := map[string]bool{}
	nodes := map[string]bool{}
	for _, g := range pe.Gpus {
		if seen[g] {
			t.Errorf("%s: GPU %s picked twice", pe.Placement, g)
		}
		seen[g] = true
		node, _, _ := strings.Cut(g, "/")
		nodes[node] = true
	}
	p := pe.Prediction
	if p.NRanks != uint32(n) || p.NNodes != uint32(len(nodes)) {
		t.Errorf("%s: prediction on %d ranks, %d nodes; want %d, %d", pe.Placement, p.NRanks, p.NNodes, n, len(nodes))
	}
	if n == 1 {
		if p.TimeUs != 0 || pe.Speedup != 1 || pe.Efficiency != 1 {
			t.Errorf("%s: one GPU: time %g, speedup %g, efficiency %g", pe.Placement, p.TimeUs, pe.Speedup, pe.Efficiency)
		}
		return
	}
	if p.TimeUs <= 0 || !near(p.AlgbwGbps, float64(p.SizeBytes)/(p.TimeUs*1e3)) {
		t.Errorf("%s: time %g µs, algbw %g", pe.Placement, p.TimeUs, p.AlgbwGbps)
	}
	if pe.Speedup <= 0 || pe.Efficiency <= 0 || pe.Efficiency > 1 || !near(pe.Efficiency, pe.Speedup/float64(n)) {
		t.Errorf("%s: speedup %g, efficiency %g", pe.Placement, pe.Speedup, pe.Efficiency)
	}
}

func TestForGPUCountSpeedupFormula(t *testing.T) {
	g := simGraph(t, "", simPart{profile: "dgx-h100", count: 4})
	w := &ginv1.Workload{Collective: allReduce, BytesPerStep: 1 << 30, ComputeSecondsPerStep: 0.25}
	pes, err := ForGPUCount(g, 16, nil, w)
	if err != nil {
		t.Fatal(err)
	}
	pe := byClass(t, pes)[PlacementOneLeaf]
	fixed, err := ForPlacement(g, []string{"node000", "node001"}, 0, allReduce, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(pe.Prediction, fixed) {
		t.Errorf("one-leaf prediction %v, fixed placement %v", pe.Prediction, fixed)
	}
	want := 16 * 0.25 / (0.25 + fixed.TimeUs*1e-6)
	if !near(pe.Speedup, want) || !near(pe.Efficiency, want/16) {
		t.Errorf("speedup %g, efficiency %g; want %g, %g", pe.Speedup, pe.Efficiency, want, want/16)
	}
}

func TestForGPUCountErrors(t *testing.T) {
	g := simGraph(t, "", simPart{profile: "dgx-h100", count: 2})
	for _, tc := range []struct {
		name string
		g    *graph.Graph
		n    int
		w    *ginv1.Workload
		want string
	}{
		{"nil graph", nil, 8, nil, "no graph"},
		{"zero GPUs", g, 0, nil, "0 GPUs: want at least 1"},
		{"negative GPUs", g, -3, nil, "-3 GPUs"},
		{"more than the cluster", g, 17, nil, "17 GPUs: the cluster has 16"},
		{"unknown preset", g, 8, &ginv1.Workload{Preset: 7}, "unknown preset"},
		{"zero compute", g, 8, &ginv1.Workload{Collective: allReduce, BytesPerStep: 1 << 20}, "compute_seconds_per_step"},
		{"negative compute", g, 8, &ginv1.Workload{Collective: allReduce, BytesPerStep: 1 << 20, ComputeSecondsPerStep: -0.1}, "compute_seconds_per_step"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ForGPUCount(tc.g, tc.n, nil, tc.w)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func BenchmarkForGPUCount1kNodes(b *testing.B) {
	g := simGraph(b, "leaf-groups=8,spines=8,oversub=2", simPart{profile: "dgx-h100", count: 1000})
	busy := map[string]bool{}
	for i := range 500 {
		busy[fmt.Sprintf("node%03d", i*2)] = true
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ForGPUCount(g, 64, busy, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func TestEthernetFromInventories(t *testing.T) {
	g, invs := simGraphHook(t, "", nil, simPart{profile: "dgx-h100", count: 1}, simPart{profile: "pcie-8gpu", count: 1, prefix: "pcie"},
		simPart{profile: "rtx3090-nvlink-pair", count: 1, prefix: "ws"})
	eth := EthernetFromInventories(invs)
	for node, want := range map[string]bool{"node000": false, "pcie001": true, "ws002": false, "nowhere": false} {
		if got := eth(node); got != want {
			t.Errorf("ethernet(%s) = %v, want %v", node, got, want)
		}
	}
	// Without the inventories the graph cannot tell RoCE from InfiniBand:
	// the RoCE nodes then count as InfiniBand nodes.
	pes, err := ForGPUCount(g, 16, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pe := byClass(t, pes)[PlacementEthernet]; pe.Available {
		t.Errorf("ethernet available without link-layer information: %v", pe)
	}
}
