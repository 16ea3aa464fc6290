package costmodel

import (
	"fmt"
	"math"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/nccltests"
)

// nvlsTreeCurve is one published multi-node NVLSTree all_reduce curve (NCCL
// 2.29.2's default on 10 nodes of 8 H100, xxrjun/nccl-tests-cluster,
// internal/nccltests/testdata) with the GPUs per node of its run. The NICs
// are not in the logs: one 400 Gb/s NIC per GPU (a DGX H100's eight) is
// assumed; the 10 × 2 and 10 × 4 peaks (98 and 196 GB/s busbw) are 2 and
// 4 × 48 GB/s, what that assumption gives.
type nvlsTreeCurve struct {
	file string
	ppn  int
}

func nvlsTreeCurves() []nvlsTreeCurve {
	return []nvlsTreeCurve{
		{"../nccltests/testdata/xxrjun_N10_G8.log", 8},
		{"../nccltests/testdata/xxrjun_N10_G4.log", 4},
		{"../nccltests/testdata/xxrjun_N10_G2.log", 2},
	}
}

func (c nvlsTreeCurve) shape() Shape { return multi(ranks(dgxH100, c.ppn), 10, c.ppn, 400) }

// nvlsTreePoint is one size of a curve and whether it is in the fit half:
// every other size from the smallest of every curve; the sizes between
// are held out (decided before any fit, as TestNVLSFit's split).
type nvlsTreePoint struct {
	curve nvlsTreeCurve
	pt    nccltests.Point
	fit   bool
}

func nvlsTreePoints(t *testing.T) []nvlsTreePoint {
	t.Helper()
	var out []nvlsTreePoint
	for _, c := range nvlsTreeCurves() {
		for i, p := range nvlsCurve(t, c.file) {
			out = append(out, nvlsTreePoint{c, p, i%2 == 0})
		}
	}
	return out
}

// nvlsTreeForms are the one-parameter forms of the fill's dependence on
// the NVLS heads per node that were compared; the model uses the one with
// the smallest median relative error on the fit half (TestNVLSTreeFit
// checks that it still is).
var nvlsTreeForms = []struct {
	name string
	g    func(heads float64) float64
}{
	{"constant", func(float64) float64 { return 1 }},
	{"heads", func(h float64) float64 { return h }},
	{"log2(heads)", math.Log2},
	{"heads - 1", func(h float64) float64 { return h - 1 }},
	{"heads - 2", func(h float64) float64 { return h - 2 }},
	{"1 - 2/heads", func(h float64) float64 { return 1 - 2/h }},
}

// nvlsTreeModelForm is the form nvlsTreeFillUs uses.
const nvlsTreeModelForm = "1 - 2/heads"

// nvlsTreeBase is GIN's NVLSTree time without the fill, µs.
func nvlsTreeBase(t *testing.T, s Shape, bytes uint64) float64 {
	t.Helper()
	p, err := derive(s, true)
	if err != nil {
		t.Fatal(err)
	}
	us, _, ok := p.cell(collAllReduce, algoNVLSTree, protoSimple, bytes)
	if !ok {
		t.Fatalf("NVLSTree unusable on %d × %d", s.NNodes, s.NRanks/s.NNodes)
	}
	return us - p.nvlsTreeFillUs()
}

// fitFill is the weighted least-squares constant k of t = base + k·g(heads)
// over pts (weights 1/t²: relative errors, so that 16 GiB does not outweigh
// 32 MiB), and the median and largest relative error of busbw.
func fitFill(t *testing.T, g func(float64) float64, pts []nvlsTreePoint) (k float64) {
	t.Helper()
	var num, den float64
	for _, p := range pts {
		x := g(float64(p.curve.ppn))
		m := p.pt.TimeUs
		num += x * (m - nvlsTreeBase(t, p.curve.shape(), p.pt.Bytes)) / (m * m)
		den += x * x / (m * m)
	}
	if den == 0 {
		t.Fatal("singular NVLSTree fill fit")
	}
	return num / den
}

// fillErrors are the relative busbw errors (model/measured − 1) with the
// fill k·g(heads).
func fillErrors(t *testing.T, g func(float64) float64, k float64, pts []nvlsTreePoint) []float64 {
	t.Helper()
	var errs []float64
	for _, p := range pts {
		us := nvlsTreeBase(t, p.curve.shape(), p.pt.Bytes) + k*g(float64(p.curve.ppn))
		errs = append(errs, p.pt.TimeUs/us-1)
	}
	return errs
}

func absAll(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = math.Abs(x)
	}
	return out
}

// TestNVLSTreeFit re-derives NVLSTreeFillUs and the form of the fill
// from the fit half of the three published 10-node curves, and bounds the
// held-out error where it stands.
func TestNVLSTreeFit(t *testing.T) {
	var fit, held []nvlsTreePoint
	for _, p := range nvlsTreePoints(t) {
		if p.fit {
			fit = append(fit, p)
		} else {
			held = append(held, p)
		}
	}
	if len(fit) < 12 || len(held) < 12 {
		t.Fatalf("%d fit and %d held-out sizes", len(fit), len(held))
	}
	best, bestMed := "", math.Inf(1)
	var k float64
	for _, f := range nvlsTreeForms {
		kf := fitFill(t, f.g, fit)
		med, worst := medianMax(absAll(fillErrors(t, f.g, kf, fit)))
		t.Logf("form %-12s k %7.1f µs: fit median %.2f%%, worst %.1f%%", f.name, kf, 100*med, 100*worst)
		if med < bestMed {
			best, bestMed = f.name, med
		}
		if f.name == nvlsTreeModelForm {
			k = kf
		}
	}
	if best != nvlsTreeModelForm {
		t.Errorf("the fit half prefers the form %q, the model uses %q", best, nvlsTreeModelForm)
	}
	if math.Abs(k-NVLSTreeFillUs) > 0.05 {
		t.Errorf("NVLSTreeFillUs %.2f; the fit gives %.2f", NVLSTreeFillUs, k)
	}
	// The model's own NVLSTree cell is the fitted form: its errors equal
	// the fit's.
	for _, p := range held {
		us, ok := Cost(p.curve.shape(), ar, ginv1.Algorithm_ALGORITHM_NVLS_TREE, simp, p.pt.Bytes)
		want := nvlsTreeBase(t, p.curve.shape(), p.pt.Bytes) + k*(1-2/float64(p.curve.ppn))
		if !ok || math.Abs(us-want) > 0.5 {
			t.Fatalf("%s %d B: Cost %.1f µs, the fitted form %.1f µs", p.curve.file, p.pt.Bytes, us, want)
		}
	}
	med, worst := medianMax(absAll(fillErrors(t, func(h float64) float64 { return 1 - 2/h }, k, held)))
	t.Logf("held out (%d sizes): median %.1f%%, worst %.1f%%", len(held), 100*med, 100*worst)
	// The goal is median ≤ 7%, worst ≤ 15%; the worst is bounded where it
	// stands (the 10 × 8 curve above 2 GiB, NIC-bound, not the fill).
	if med > 0.07 || worst > 0.15 {
		t.Errorf("held-out NVLSTree sizes: median %.1f%%, worst %.1f%% (goal 7%%, 15%%)", 100*med, 100*worst)
	}
}

// nvlsTreeFormsLine is the doc's sentence on the forms compared.
func nvlsTreeFormsLine(t *testing.T) string {
	t.Helper()
	var fit []nvlsTreePoint
	for _, p := range nvlsTreePoints(t) {
		if p.fit {
			fit = append(fit, p)
		}
	}
	var parts []string
	for _, f := range nvlsTreeForms {
		k := fitFill(t, f.g, fit)
		med, worst := medianMax(absAll(fillErrors(t, f.g, k, fit)))
		parts = append(parts, fmt.Sprintf("%s (%.1f µs: %.1f%%, %.1f%%)", f.name, k, 100*med, 100*worst))
	}
	return strings.Join(parts, "; ")
}
