package main

import (
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

func TestOlderRelease(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"2.21.5", "2.23.4", true},
		{"2.23.4", "2.21.5", false},
		{"2.9.9", "2.10.3", true},
		{"2.27", "2.27.1", true},
		{"2.27.3", "2.27.3+cuda12.9", false},
		{"2.27.3", "2.27.3", false},
		{"", "2.27.3", false},
		{"dev", "2.27.3", false},
	}
	for _, tc := range tests {
		if got := olderRelease(tc.a, tc.b); got != tc.want {
			t.Errorf("olderRelease(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// cmpMeas is a measurement of all_reduce on 2 × 8 H100 at version v; pts
// are (bytes, time_us).
func cmpMeas(id, v string, a ginv1.Algorithm, p ginv1.Protocol, pts ...[2]float64) *ginv1.Measurement {
	m := &ginv1.Measurement{Id: id, Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, Algorithm: a, Protocol: p, ForcedBy: "flag",
		Shape: &ginv1.PlacementShape{GpuModel: "NVIDIA H100 80GB HBM3", NvlinkDomainSize: 8, GpusPerNode: 8, NicsPerNode: 8, NicGbps: 400, NodeCount: 2, FabricTiers: 1, NcclVersion: v}}
	if a == 0 && p == 0 {
		m.ForcedBy = "default"
	}
	for _, x := range pts {
		m.Points = append(m.Points, &ginv1.MeasuredPoint{Bytes: uint64(x[0]), TimeUs: x[1]})
	}
	return m
}

// TestCompareReleases: NCCL's default regresses 40% at one size and
// improves at another; the regression names B's fastest forced cell at
// that size (not the slower one, not a cell measured at other sizes),
// a forced cell that regresses with nothing faster on B says so, and cells
// measured on one release only are listed.
func TestCompareReleases(t *testing.T) {
	const mib = 1 << 20
	ring, tree, nvls := ginv1.Algorithm_ALGORITHM_RING, ginv1.Algorithm_ALGORITHM_TREE, ginv1.Algorithm_ALGORITHM_NVLS_TREE
	simple := ginv1.Protocol_PROTOCOL_SIMPLE
	defA := cmpMeas("a-default", "2.21.5", 0, 0, [2]float64{mib, 100}, [2]float64{64 * mib, 1000}, [2]float64{256 * mib, 4000})
	defA.Points[1].NcclAlgorithm, defA.Points[1].NcclProtocol = nvls, simple
	defB := cmpMeas("b-default", "2.23.4", 0, 0, [2]float64{mib, 105}, [2]float64{64 * mib, 1400}, [2]float64{256 * mib, 3000})
	defB.Points[1].NcclAlgorithm, defB.Points[1].NcclProtocol = ginv1.Algorithm_ALGORITHM_RING, simple
	ms := []*ginv1.Measurement{
		defA, defB,
		cmpMeas("a-tree", "2.21.5", tree, simple, [2]float64{64 * mib, 1100}),
		cmpMeas("b-tree", "2.23.4", tree, simple, [2]float64{64 * mib, 1300}), // slower than A's tree, faster than B's default
		cmpMeas("b-ring", "2.23.4", ring, simple, [2]float64{64 * mib, 1150}), // B's fastest forced cell at 64 MiB
		cmpMeas("b-nvls", "2.23.4", nvls, simple, [2]float64{32 * mib, 100}),  // another size only
		cmpMeas("a-nvls", "2.21.5", nvls, 0, [2]float64{64 * mib, 900}),       // on A only
		cmpMeas("c-default", "2.19.3", 0, 0, [2]float64{64 * mib, 10}),        // another release
	}
	r := compareReleases(ms, "2.21.5", "2.23.4", 10)
	if r.Regressions != 2 || r.Improvements != 1 || r.SizesCompared != 4 || len(r.Shapes) != 1 {
		t.Fatalf("%d regressions, %d improvements, %d sizes, %d shapes; want 2, 1, 4, 1", r.Regressions, r.Improvements, r.SizesCompared, len(r.Shapes))
	}
	sh := r.Shapes[0]
	if sh.Shape.GetNcclVersion() != "" || strings.Join(sh.OnlyFrom, ";") != "all_reduce nvls_tree/*" || strings.Join(sh.OnlyTo, ";") != "all_reduce nvls_tree/simple;all_reduce ring/simple" {
		t.Errorf("shape %v, only from %v, only to %v", sh.Shape, sh.OnlyFrom, sh.OnlyTo)
	}
	def, tr := sh.Regressions[0], sh.Regressions[1]
	if def.Algorithm != "unspecified" || def.SizeBytes != 64*mib || def.SlowerPercent != 40 || def.From.TimeUs != 1000 || def.To.TimeUs != 1400 ||
		def.From.NcclAlgorithm != "nvls_tree" || def.To.NcclAlgorithm != "ring" || def.From.BusbwGbps <= def.To.BusbwGbps {
		t.Errorf("default: %+v", def)
	}
	if f := def.Force; f == nil || f.Algorithm != "ring" || f.Protocol != "simple" || f.Measurement != "b-ring" || f.SlowerPercent != 15 {
		t.Errorf("default's force: %+v", def.Force)
	}
	if got := ranLabel(def.cell.algo, def.cell.proto, def.From.NcclAlgorithm, def.From.NcclProtocol); got != "default(nvls_tree/simple)" {
		t.Errorf("ran %q", got)
	}
	if tr.Algorithm != "tree" || tr.Force == nil || tr.Force.Measurement != "b-ring" {
		t.Errorf("tree: %+v %+v", tr, tr.Force)
	}
	// Without B's ring run: B's tree is what beats B's default at 64 MiB,
	// and nothing forced beats B's tree (B's own default, faster or not,
	// cannot be forced).
	r = compareReleases(append(ms[:4:4], ms[5:]...), "2.21.5", "2.23.4", 10)
	if regs := r.Shapes[0].Regressions; len(regs) != 2 || regs[0].Force == nil || regs[0].Force.Algorithm != "tree" || regs[1].Force != nil {
		t.Errorf("without B's ring: %+v", regs)
	}
}
