package costmodel

import (
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

var updateDoc = flag.Bool("update-doc", false, "rewrite docs/CALIBRATION.md from TestCalibration's data")

const calibrationDoc = "../../docs/CALIBRATION.md"

// calPoint is one published measurement (shared/reference/calibration.md)
// expressed as a model query.
type calPoint struct {
	name      string
	source    string
	shape     Shape
	coll      ginv1.Collective
	bytes     uint64
	algo      ginv1.Algorithm // 0: the model's best cell
	proto     ginv1.Protocol
	metric    string // "busbw" (GB/s) or "time" (µs)
	published float64
	tol       float64 // relative tolerance asserted; 0: reported, not asserted
	role      string  // "fit", "held out" or "rule"; "" lets roleOf decide by source
}

var (
	dgxH100 = Shape{NRanks: 8, NNodes: 1, CompCap: 90, IntraNVLink: true, IntraGBps: 450, NVSwitch: true}
	dgxA100 = Shape{NRanks: 8, NNodes: 1, CompCap: 80, IntraNVLink: true, IntraGBps: 300, NVSwitch: true}
)

func multi(s Shape, nodes, nics int, gbps float64) Shape {
	s.NRanks, s.NNodes = s.NRanks*nodes, nodes
	s.NICsPerNode, s.NICGbps, s.InterHops, s.Oversubscription = nics, gbps, 1, 1
	return s
}

func ranks(s Shape, n int) Shape { s.NRanks = n; return s }

func onePerNode(nodes int, gbps float64) Shape {
	return Shape{NRanks: nodes, NNodes: nodes, CompCap: 90, IntraNVLink: true, IntraGBps: 450, NVSwitch: true,
		NICsPerNode: 1, NICGbps: gbps, InterHops: 1, Oversubscription: 1}
}

const (
	ar   = ginv1.Collective_COLLECTIVE_ALL_REDUCE
	ring = ginv1.Algorithm_ALGORITHM_RING
	nvls = ginv1.Algorithm_ALGORITHM_NVLS
	ll   = ginv1.Protocol_PROTOCOL_LL
	simp = ginv1.Protocol_PROTOCOL_SIMPLE
	big  = uint64(8) << 30
)

func calPoints(t *testing.T) []calPoint {
	pts := []calPoint{
		{"DGX H100, 8 GPUs, all_reduce busbw, ring", "nccl-tests#212", dgxH100, ar, big, ring, simp, "busbw", 370, 0.25, ""},
		{"DGX H100, 8 GPUs, all_reduce busbw, NVLS", "nccl-tests#212", dgxH100, ar, big, nvls, simp, "busbw", 480, 0.25, ""},
		{"DGX H100, 8 GPUs, all_reduce busbw, best", "nccl-tests#212", dgxH100, ar, big, 0, 0, "busbw", 480, 0.25, ""},
		{"DGX A100, 8 GPUs, all_reduce busbw, best", "calibration.md", dgxA100, ar, big, 0, 0, "busbw", 230, 0.25, ""},
		{"DGX A100 ×2, 8×HDR, all_reduce busbw, ring", "nccl#812", multi(dgxA100, 2, 8, 200), ar, big, ring, simp, "busbw", 192, 0.25, ""},
		{"DGX A100 ×4, 8×HDR, all_reduce busbw, best", "nccl#812", multi(dgxA100, 4, 8, 200), ar, big, 0, 0, "busbw", 192, 0.25, ""},
		{"DGX A100 ×16, 8×HDR, all_reduce busbw, best", "nccl#812", multi(dgxA100, 16, 8, 200), ar, big, 0, 0, "busbw", 192, 0.25, ""},
		{"2 nodes × 1 GPU, 1×100G NIC, all_reduce busbw", "nccl-tests#119", onePerNode(2, 100), ar, big, 0, 0, "busbw", 12, 0.25, ""},
		{"2 nodes × 1 GPU, 1×200G NIC, all_reduce busbw", "nccl-tests#29", onePerNode(2, 200), ar, big, 0, 0, "busbw", 24, 0.25, ""},
		{"8 nodes × 1 GPU, 1×400G NIC, all_reduce busbw", "calibration.md (by extension)", onePerNode(8, 400), ar, big, 0, 0, "busbw", 48, 0.25, ""},
	}
	for i, us := range []float64{10.0, 13.8, 16.9, 20.8, 25.2, 29.5, 33.7} {
		n := i + 2
		pts = append(pts, calPoint{fmt.Sprintf("DGX A100, %d GPUs, 8 B all_reduce, ring/LL", n), "nccl-tests#123",
			ranks(dgxA100, n), ar, 8, ring, ll, "time", us, 0.25, ""})
	}
	pts = append(pts,
		calPoint{"DGX A100 ×2, 8×HDR, 8 B all_reduce, best", "calibration.md (30-48 µs)", multi(dgxA100, 2, 8, 200), ar, 8, 0, 0, "time", 39, 0.25, ""},
		calPoint{"DGX H100 ×2, 8×NDR, 8 B all_reduce, best (not asserted)", "calibration.md (30-48 µs)", multi(dgxH100, 2, 8, 400), ar, 8, 0, 0, "time", 39, 0, ""},
	)
	// NVLS and ring on 2 to 8 of one DGX H100's GPUs, 2-4 GiB (NVIDIA/nccl#1455:
	// ring 365-370 GB/s busbw at every count; NVLS 365-370 on 3 and 4 (on 2
	// the reporter's NCCL, 2.18-2.28.3, had no NVLS), 420, 440, 460, 480 on
	// 5 to 8). The n/(n+1) GPU-count form of NVLS (nvlsGPUCount) was chosen
	// with them in view: "rule", not held out.
	for _, c := range []struct {
		n     int
		algo  ginv1.Algorithm
		busbw float64
	}{{2, ring, 367.5}, {5, ring, 367.5}, {3, nvls, 367.5}, {4, nvls, 367.5}, {5, nvls, 420}, {6, nvls, 440}, {7, nvls, 460}} {
		pts = append(pts, calPoint{fmt.Sprintf("DGX H100, %d of 8 GPUs, all_reduce busbw, %s", c.n, strings.ToLower(strings.TrimPrefix(c.algo.String(), "ALGORITHM_"))),
			"nccl#1455", ranks(dgxH100, c.n), ar, 2 << 30, c.algo, simp, "busbw", c.busbw, 0.25, "rule"})
	}
	// The NVLS constants are fitted on every other size of the published
	// 1 × 8 H100 curve (TestNVLSFit); the sizes between are held out.
	const xr = "xxrjun/nccl-tests-cluster"
	fit, _ := nvlsFitSet(nvlsCurve(t, nvlsFitLog))
	fitted := map[uint64]bool{}
	for _, p := range fit {
		fitted[p.Bytes] = true
	}
	for _, p := range nvlsCurve(t, nvlsFitLog) {
		role, tol := "held out", 0.15
		if fitted[p.Bytes] {
			role, tol = "fit", 0.25
		}
		pts = append(pts, calPoint{fmt.Sprintf("DGX H100, 8 GPUs, all_reduce busbw, NCCL 2.29.2 default, %s", sizeName(p.Bytes)),
			xr + " N1_G8", dgxH100, ar, p.Bytes, 0, 0, "busbw", p.BusBW, tol, role})
	}
	// The same cluster's 1 × 4 H100 all_reduce (NCCL 2.29.2 default: NVLS is
	// offered on 4 GPUs and NCCL's model picks it): held out, no constant or
	// rule was chosen with it in view.
	for _, p := range nvlsCurve(t, "../nccltests/testdata/xxrjun_N1_G4.log") {
		pts = append(pts, calPoint{fmt.Sprintf("DGX H100, 4 of 8 GPUs, all_reduce busbw, NCCL 2.29.2 default, %s", sizeName(p.Bytes)),
			xr + " N1_G4", ranks(dgxH100, 4), ar, p.Bytes, 0, 0, "busbw", p.BusBW, 0.15, "held out"})
	}
	// The published 72-GPU GB200 NVL72 all_reduce (coreweave/nccl-tests#43,
	// out-of-place busbw), then the multi-node logs of
	// internal/nccltests/testdata, held out.
	gb200 := Shape{NRanks: 72, NNodes: 1, CompCap: 100, IntraNVLink: true, IntraGBps: 900, NVSwitch: true, MNNVL: true}
	for _, m := range []struct {
		bytes uint64
		busbw float64
	}{{512 << 20, 586.06}, {1 << 30, 681.17}, {2 << 30, 757.78}, {4 << 30, 839.16}, {8 << 30, 834.57}} {
		// "rule": the per-chunk NVLS cost was chosen over the per-loop one
		// (equal on the fit curve) with this curve in view.
		pts = append(pts, calPoint{"GB200 NVL72, 72 GPUs, all_reduce busbw, NCCL default, " + sizeName(m.bytes), "coreweave/nccl-tests#43",
			gb200, ar, m.bytes, 0, 0, "busbw", m.busbw, 0.15, "rule"})
	}
	pts = append(pts,
		calPoint{"H100 ×2 × 1 GPU (400G assumed), all_reduce busbw, 512 MiB", xr + " smoke N2_G1", onePerNode(2, 400), ar, 512 << 20, 0, 0, "busbw", 46.46, 0.15, ""},
	)
	// The 10-node NVLSTree curves (10 × 8, 10 × 4, 10 × 2 H100, NCCL 2.29.2
	// default): every other size fitted NVLSTreeFillUs (TestNVLSTreeFit),
	// the sizes between are held out. The cell is fixed to NVLSTree: NCCL's
	// model picks it at every size of these curves (checked here), so the
	// measured default is NVLSTree, while GIN's own pick may differ
	// (nvlsTreeChoices).
	for _, p := range nvlsTreePoints(t) {
		s := p.curve.shape()
		if n, err := PredictNCCL(s, ar, p.pt.Bytes); err != nil || n.Algorithm != ginv1.Algorithm_ALGORITHM_NVLS_TREE {
			t.Fatalf("%s %d B: NCCL's model picks %v (%v), not NVLSTree", p.curve.file, p.pt.Bytes, n.Algorithm, err)
		}
		role, tol := "held out", 0.15
		if p.fit {
			role, tol = "fit", 0.25
		}
		pts = append(pts, calPoint{fmt.Sprintf("H100 ×10 × %d GPUs (%d×400G assumed), all_reduce busbw, NCCL 2.29.2 default, %s", p.curve.ppn, p.curve.ppn, sizeName(p.pt.Bytes)),
			fmt.Sprintf("%s N10_G%d", xr, p.curve.ppn), s, ar, p.pt.Bytes, ginv1.Algorithm_ALGORITHM_NVLS_TREE, simp, "busbw", p.pt.BusBW, tol, role})
	}
	return pts
}

// roleOf says how a point is used: "fit" (a constant was fitted on it),
// "held out" (a published log no constant was fitted on), or "rule" (a
// maintainer's rule of thumb the physics must reproduce).
func roleOf(c calPoint) string {
	switch {
	case c.role != "":
		return c.role
	case strings.HasPrefix(c.source, "nccl-tests#123"):
		return "fit"
	case c.source == "nccl-tests#212" && c.algo != ring:
		return "held out"
	case strings.Contains(c.source, "xxrjun"), strings.Contains(c.source, "coreweave"):
		return "held out"
	}
	return "rule"
}

// evaluate returns the point's value in GIN's and NCCL's model.
func (c calPoint) evaluate(t *testing.T) (gin, nccl float64, cell string) {
	t.Helper()
	value := func(us float64) float64 {
		if c.metric == "time" {
			return us
		}
		return float64(c.bytes) / us / 1000 * BusFactor(c.coll, c.shape.NRanks)
	}
	if c.algo != 0 {
		g, ok1 := Cost(c.shape, c.coll, c.algo, c.proto, c.bytes)
		n, ok2 := CostNCCL(c.shape, c.coll, c.algo, c.proto, c.bytes)
		if !ok1 || !ok2 {
			t.Fatalf("%s: cell unusable", c.name)
		}
		return value(g), value(n), cellLabel(c.algo, c.proto)
	}
	g, err := Predict(c.shape, c.coll, c.bytes)
	if err != nil {
		t.Fatal(err)
	}
	n, err := PredictNCCL(c.shape, c.coll, c.bytes)
	if err != nil {
		t.Fatal(err)
	}
	return value(g.TimeUs), value(n.TimeUs), cellLabel(g.Algorithm, g.Protocol)
}

func cellLabel(a ginv1.Algorithm, p ginv1.Protocol) string {
	return strings.ToLower(strings.TrimPrefix(a.String(), "ALGORITHM_") + "/" + strings.TrimPrefix(p.String(), "PROTOCOL_"))
}

// sizeName prints a power-of-two size as nccl-tests users name it.
func sizeName(b uint64) string { return byteSize(b) }

// medianMax returns the median and the largest of xs (0, 0 when empty).
func medianMax(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return med, s[len(s)-1]
}

// heldOutGoal is issue #13's bound on a held-out point's error.
const heldOutGoal = 0.15

func TestCalibration(t *testing.T) {
	var rows []string
	var heldPeak, heldAll []float64
	var over []string
	for _, c := range calPoints(t) {
		gin, nccl, cell := c.evaluate(t)
		rel := (gin - c.published) / c.published
		relN := (nccl - c.published) / c.published
		if roleOf(c) == "held out" {
			heldAll = append(heldAll, math.Abs(rel))
			if math.Abs(rel) > heldOutGoal {
				over = append(over, fmt.Sprintf("%s (%+.1f%%)", c.name, rel*100))
			}
			if c.tol > 0 {
				heldPeak = append(heldPeak, math.Abs(rel))
			}
		}
		unit := "GB/s"
		if c.metric == "time" {
			unit = "µs"
		}
		tol := "not asserted"
		if c.tol > 0 {
			tol = fmt.Sprintf("±%.0f%%", c.tol*100)
			if math.Abs(rel) > c.tol {
				t.Errorf("%s: predicted %.1f %s, published %.1f (%+.1f%%, tolerance %s)", c.name, gin, unit, c.published, rel*100, tol)
			}
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %.1f | %.1f | %+.1f%% | %.1f | %+.1f%% | %s |",
			c.name, c.source, roleOf(c), unit, c.published, gin, rel*100, nccl, relN*100, cell)+" "+tol+" |")
	}
	table := strings.Join(append([]string{
		"| point | source | use | unit | published | GIN model | error | NCCL model | error | GIN's cell | tolerance |",
		"|---|---|---|---|---|---|---|---|---|---|---|",
	}, rows...), "\n")
	medPeak, worstPeak := medianMax(heldPeak)
	medAll, worstAll := medianMax(heldAll)
	if medPeak > 0.07 || worstPeak > heldOutGoal {
		t.Errorf("asserted held-out points: median |error| %.1f%%, worst %.1f%% (goal 7%%, 15%%)", medPeak*100, worstPeak*100)
	}
	// Every held-out point, the unasserted ones included: the median must
	// meet the goal; the worst is bounded where it stands (not met, named
	// in the doc) so that it cannot grow unnoticed.
	if medAll > 0.07 || worstAll > 0.30 {
		t.Errorf("every held-out point: median |error| %.1f%%, worst %.1f%% (bounds 7%%, 30%%)", medAll*100, worstAll*100)
	}
	summary := fmt.Sprintf("Held-out points (no constant fitted on them): asserted above (%d points), median absolute error %.1f%% "+
		"and worst %.1f%%; every held-out point (%d points), median %.1f%% and worst %.1f%%.",
		len(heldPeak), medPeak*100, worstPeak*100, len(heldAll), medAll*100, worstAll*100)
	if len(over) > 0 {
		summary += " Over the 15% goal: " + strings.Join(over, "; ") + "."
	}
	doc, err := renderDoc(table, summary, pairsTable(t), b200FiveOfEight(t), calibRegion(t), nvlsPairsTable(t), nvlsTreeFormsLine(t), nvlsTreeChoices(t), nvlsBeforeAfter(t), regimesTable(), devClusterOverrides(t))
	if err != nil {
		t.Fatal(err)
	}
	if *updateDoc {
		if err := os.WriteFile(calibrationDoc, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(calibrationDoc)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/costmodel -run TestCalibration -update-doc)", err)
	}
	if string(got) != doc {
		t.Errorf("%s is out of date: run go test ./internal/costmodel -run TestCalibration -update-doc", calibrationDoc)
	}
}

// calibRegion is the part of docs/CALIBRATION.md that internal/calib's
// tests check and write (the held-out error of measured calibration and
// the interpolations compared): kept as the file has it, markers included.
func calibRegion(t *testing.T) string {
	t.Helper()
	const begin, end = "<!-- internal/calib: begin", "<!-- internal/calib: end -->"
	doc, err := os.ReadFile(calibrationDoc)
	if err != nil {
		t.Fatal(err)
	}
	i, j := strings.Index(string(doc), begin), strings.Index(string(doc), end)
	if i < 0 || j < i {
		t.Fatalf("%s has no region %q … %q (internal/calib's tests write it)", calibrationDoc, begin, end)
	}
	return string(doc[i : j+len(end)])
}

// nvlsTreeChoices says what GIN's model and NCCL's pick on the 10-node
// shapes at the curves' mid sizes, with the NVLSTree fill.
func nvlsTreeChoices(t *testing.T) string {
	t.Helper()
	var parts []string
	for _, c := range nvlsTreeCurves() {
		s := c.shape()
		var picks []string
		for _, b := range []uint64{32 << 20, 64 << 20, 128 << 20, 256 << 20} {
			g, err := Predict(s, ar, b)
			if err != nil {
				t.Fatal(err)
			}
			nv, ok := Cost(s, ar, ginv1.Algorithm_ALGORITHM_NVLS_TREE, simp, b)
			if !ok {
				t.Fatal("NVLSTree unusable")
			}
			pick := fmt.Sprintf("%s %s", sizeName(b), cellLabel(g.Algorithm, g.Protocol))
			if g.Algorithm != ginv1.Algorithm_ALGORITHM_NVLS_TREE {
				pick += fmt.Sprintf(" (NVLSTree %.0f%% slower)", 100*(nv/g.TimeUs-1))
			}
			picks = append(picks, pick)
		}
		parts = append(parts, fmt.Sprintf("10 × %d: %s", c.ppn, strings.Join(picks, ", ")))
	}
	return strings.Join(parts, "; ")
}

// b200FiveOfEight is GIN's NVLS and ring all_reduce on 5 of 8 B200 GPUs at
// 2 GiB, as the doc quotes them.
func b200FiveOfEight(t *testing.T) string {
	t.Helper()
	s := ranks(Shape{NRanks: 8, NNodes: 1, CompCap: 100, IntraNVLink: true, IntraGBps: 900, NVSwitch: true}, 5)
	const b = 2 << 30
	busbw := func(algo ginv1.Algorithm) float64 {
		us, ok := Cost(s, ar, algo, simp, b)
		if !ok {
			t.Fatalf("%v unusable on 5 B200", algo)
		}
		return float64(b) / us / 1000 * BusFactor(ar, 5)
	}
	nv, r := busbw(nvls), busbw(ring)
	return fmt.Sprintf("NVLS %.0f GB/s busbw at 2 GiB against ring/simple %.0f (%+.1f%%)", nv, r, 100*(nv/r-1))
}
