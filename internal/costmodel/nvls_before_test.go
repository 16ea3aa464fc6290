package costmodel

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// beforeNoNVLS is gin-cost-3's pick on n ≤ 4 GPUs of one NVLink domain,
// where it offered no NVLS: GIN's fastest non-NVLS cell, µs.
func beforeNoNVLS(t *testing.T, s Shape, bytes uint64) float64 {
	t.Helper()
	best := -1.0
	for _, a := range Algorithms {
		if a == ginv1.Algorithm_ALGORITHM_NVLS || a == ginv1.Algorithm_ALGORITHM_NVLS_TREE {
			continue
		}
		if us, _ := bestCell(s, a, bytes, true); us > 0 && (best < 0 || us < best) {
			best = us
		}
	}
	if best < 0 {
		t.Fatal("no non-NVLS cell")
	}
	return best
}

// nvlsBeforeAfter renders the before → after table of this change
// (gin-cost-3 → gin-cost-4) from the fixtures: the relative busbw error
// (median and worst |model/measured − 1|) of each published curve the
// change touches, before (no NVLS on 2-4 GPUs; no NVLSTree fill) and
// after.
func nvlsBeforeAfter(t *testing.T) string {
	t.Helper()
	type curve struct {
		name, source string
		file         string
		shape        Shape
		before       func(b uint64) float64
		after        func(b uint64) float64
		split        uint64 // report sizes below and from split apart (0: one row)
	}
	nvlsTree := func(s Shape) func(uint64) float64 {
		return func(b uint64) float64 {
			us, ok := Cost(s, ar, ginv1.Algorithm_ALGORITHM_NVLS_TREE, simp, b)
			if !ok {
				t.Fatal("NVLSTree unusable")
			}
			return us
		}
	}
	var curves []curve
	for _, c := range nvlsTreeCurves() {
		s := c.shape()
		curves = append(curves, curve{fmt.Sprintf("10 × %d H100, NVLSTree (NCCL 2.29.2 default)", c.ppn), fmt.Sprintf("xxrjun N10_G%d", c.ppn), c.file, s,
			func(b uint64) float64 { return nvlsTreeBase(t, s, b) }, nvlsTree(s), 1 << 30})
	}
	g4 := ranks(dgxH100, 4)
	curves = append(curves, curve{"1 × 4 H100, GIN's pick (NCCL 2.29.2 default)", "xxrjun N1_G4", "../nccltests/testdata/xxrjun_N1_G4.log", g4,
		func(b uint64) float64 { return beforeNoNVLS(t, g4, b) },
		func(b uint64) float64 {
			p, err := Predict(g4, ar, b)
			if err != nil {
				t.Fatal(err)
			}
			return p.TimeUs
		}, 0})
	rows := []string{
		"| curve | source | sizes | before: median, worst | after: median, worst |",
		"|---|---|---|---|---|",
	}
	for _, c := range curves {
		type acc struct{ before, after []float64 }
		var lo, hi acc
		for _, p := range nvlsCurve(t, c.file) {
			a := &hi
			if c.split > 0 && p.Bytes < c.split {
				a = &lo
			}
			a.before = append(a.before, math.Abs(p.TimeUs/c.before(p.Bytes)-1))
			a.after = append(a.after, math.Abs(p.TimeUs/c.after(p.Bytes)-1))
		}
		row := func(sizes string, a acc) {
			bm, bw := medianMax(a.before)
			am, aw := medianMax(a.after)
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %.1f%%, %.1f%% | %.1f%%, %.1f%% |", c.name, c.source, sizes, 100*bm, 100*bw, 100*am, 100*aw))
		}
		if c.split > 0 {
			row("32-512 MiB", lo)
			row("1-16 GiB", hi)
		} else {
			row("32 MiB-16 GiB", hi)
		}
	}
	// nccl#1455's 3 and 4 GPUs: gin-cost-3 had ring only.
	for _, n := range []int{3, 4} {
		s := ranks(dgxH100, n)
		const b = 2 << 30
		bus := func(us float64) float64 { return float64(b) / us / 1000 * BusFactor(ar, n) }
		nv, _ := Cost(s, ar, nvls, simp, b)
		rows = append(rows, fmt.Sprintf("| %d of 8 H100, NVLS forced (NCCL_ALGO=NVLS), 2 GiB | nccl#1455 | 367.5 GB/s | not offered (ring %.0f GB/s) | NVLS %.0f GB/s (%+.1f%%) |",
			n, bus(beforeNoNVLS(t, s, b)), bus(nv), 100*(bus(nv)/367.5-1)))
	}
	return strings.Join(rows, "\n")
}

// devClusterOverrides lists, per shape of the dev cluster (DGX H100, 8 ×
// 400 Gb/s NICs, one leaf; 1-2 nodes, 1-8 GPUs per node), the all_reduce
// sizes (1 KiB-16 GiB, powers of two) where GIN's model alone beats the
// cell NCCL's model picks by more than the 3% a model-only override needs
// (plan.OverrideMargin), with the range of margins: before (every such
// size overrode NCCL) → after (only those Judge lets override: the fabric
// decides it, or a validated regime), and the same for the dev cluster's
// 2 × 8 with one NIC degraded to 200 Gb/s (--dev-fault node001/mlx5_0=200).
func devClusterOverrides(t *testing.T) string {
	t.Helper()
	const overrideMargin = 0.03 // plan.OverrideMargin (plan imports this package)
	count := func(s Shape) (before, after []uint64, lo, hi float64, cells []string) {
		lo = math.Inf(1)
		seen := map[string]bool{}
		for b := uint64(1 << 10); b <= 16<<30; b <<= 1 {
			v, err := Judge(s, ar, b, overrideMargin)
			if err != nil {
				t.Fatal(err)
			}
			if v.Basis == BasisNone {
				continue
			}
			before = append(before, b)
			if v.Basis.Overrides() {
				after = append(after, b)
			}
			m := v.NCCLUs/v.GIN.TimeUs - 1
			lo, hi = math.Min(lo, m), math.Max(hi, m)
			c := cellLabel(v.GIN.Algorithm, v.GIN.Protocol) + " over " + cellLabel(v.NCCL.Algorithm, v.NCCL.Protocol)
			if !seen[c] {
				seen[c] = true
				cells = append(cells, c)
			}
		}
		sort.Strings(cells)
		return before, after, lo, hi, cells
	}
	var parts []string
	var nBefore, nAfter int
	for _, nodes := range []int{1, 2} {
		for ppn := 1; ppn <= 8; ppn++ {
			s := ranks(dgxH100, ppn)
			if nodes > 1 {
				s = multi(s, nodes, ppn, 400)
			}
			if s.NRanks < 2 {
				continue
			}
			before, after, lo, hi, cells := count(s)
			if len(before) == 0 {
				continue
			}
			nBefore += len(before)
			nAfter += len(after)
			parts = append(parts, fmt.Sprintf("%d × %d: %s (%s … %s), %.0f-%.0f%% (%s) → %d",
				nodes, ppn, sizes(len(before)), sizeName(before[0]), sizeName(before[len(before)-1]), 100*lo, 100*hi, strings.Join(cells, ", "), len(after)))
		}
	}
	if len(parts) == 0 {
		parts = []string{"none"}
	}
	degraded := multi(dgxH100, 2, 8, 400)
	degraded.NICGbps, degraded.Nominal = 200, Nominal{NICsPerNode: 8, NICGbps: 400, IntraGBps: 450}
	db, da, _, _, dcells := count(degraded)
	return strings.Join(parts, "; ") + fmt.Sprintf(". In all %s before → %d after. With one NIC at 200 Gb/s on 2 × 8 "+
		"(`--dev-fault node001/mlx5_0=200`): %s before (%s) → %d after, the fabric deciding each", sizes(nBefore), nAfter, sizes(len(db)), strings.Join(dcells, ", "), len(da))
}

func sizes(n int) string {
	if n == 1 {
		return "1 size"
	}
	return fmt.Sprintf("%d sizes", n)
}
