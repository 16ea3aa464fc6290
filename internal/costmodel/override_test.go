package costmodel

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// heldOutPair is a held-out published pair with both sides quoted, as a
// validated regime sees it: the two algorithms, the shape and size, and
// the model's ratio error on it.
type heldOutPair struct {
	source string
	shape  Shape
	bytes  uint64
	a, b   ginv1.Algorithm
	err    float64 // |predicted ratio ÷ measured ratio − 1|
}

// heldOutPairs reads the ring-vs-tree and NVLS pair tables: every pair used
// "held out" whose source quotes both figures.
func heldOutPairs(t *testing.T) []heldOutPair {
	t.Helper()
	var out []heldOutPair
	for _, p := range rtPairs() {
		if p.use != "held out" || p.ring <= 0 || p.tree <= 0 {
			continue
		}
		r, _ := bestCell(p.shape, ring, p.bytes, true)
		tr, _ := bestCell(p.shape, ginv1.Algorithm_ALGORITHM_TREE, p.bytes, true)
		measured := p.tree / p.ring // ring time ÷ tree time from busbw
		if p.metric == "time" {
			measured = p.ring / p.tree
		}
		out = append(out, heldOutPair{p.source, p.shape, p.bytes, ring, ginv1.Algorithm_ALGORITHM_TREE, math.Abs((r/tr)/measured - 1)})
	}
	for _, p := range nvlsPairs() {
		if p.use != "held out" || p.miss || p.without <= 0 || p.with <= 0 {
			continue
		}
		nv, other, oa := p.sides(t, true)
		a := ginv1.Algorithm_ALGORITHM_NVLS
		if p.shape.NNodes > 1 {
			a = ginv1.Algorithm_ALGORITHM_NVLS_TREE
		}
		out = append(out, heldOutPair{p.source, p.shape, p.bytes, a, oa, math.Abs((other/nv)/(p.with/p.without) - 1)})
	}
	return out
}

// TestValidatedRegimes: the table of validated regimes is what the held-out
// pairs say, not a list of claims. Every held-out pair with both sides
// quoted lies in exactly one regime; each regime's bounds are the hull of
// its pairs (nothing beyond what was measured), its evidence names their
// sources, and its worst error is the worst ratio error of GIN's model on
// them, rounded up to 0.1%.
func TestValidatedRegimes(t *testing.T) {
	pairs := heldOutPairs(t)
	if len(pairs) < 5 {
		t.Fatalf("%d held-out pairs with both sides quoted, want the tables' 7", len(pairs))
	}
	regimes := ValidatedRegimes()
	members := make([][]heldOutPair, len(regimes))
	for _, p := range pairs {
		var in []int
		for i, r := range regimes {
			if r.Contains(p.shape, p.a, p.b, p.bytes) {
				in = append(in, i)
			}
		}
		if len(in) != 1 {
			t.Errorf("%s (%v vs %v, %d × %d, NICs %d): in regimes %v, want exactly one", p.source, p.a, p.b, p.shape.NNodes, p.shape.NRanks/p.shape.NNodes, p.shape.NICsPerNode, in)
			continue
		}
		members[in[0]] = append(members[in[0]], p)
	}
	for i, r := range regimes {
		ps := members[i]
		if len(ps) == 0 {
			t.Errorf("regime %s: no held-out pair in it", r)
			continue
		}
		want := Regime{CompCap: ps[0].shape.CompCap, A: r.A, B: r.B,
			MinNodes: math.MaxInt, MinGPUsPerNode: math.MaxInt, MinNICsPerNode: math.MaxInt, MinBytes: math.MaxUint64}
		var sources []string
		worst := 0.0
		for _, p := range ps {
			gpn := p.shape.NRanks / p.shape.NNodes
			want.MinNodes, want.MaxNodes = min(want.MinNodes, p.shape.NNodes), max(want.MaxNodes, p.shape.NNodes)
			want.MinGPUsPerNode, want.MaxGPUsPerNode = min(want.MinGPUsPerNode, gpn), max(want.MaxGPUsPerNode, gpn)
			want.MinNICsPerNode, want.MaxNICsPerNode = min(want.MinNICsPerNode, p.shape.NICsPerNode), max(want.MaxNICsPerNode, p.shape.NICsPerNode)
			want.MinBytes, want.MaxBytes = min(want.MinBytes, p.bytes), max(want.MaxBytes, p.bytes)
			if !slices.Contains(sources, p.source) {
				sources = append(sources, p.source)
			}
			worst = max(worst, p.err)
		}
		want.WorstErr = math.Ceil(worst*1000) / 1000
		got := r
		got.Evidence = nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("regime %s:\n got  %#v\n want %#v (the hull of its pairs)", r, got, want)
		}
		e, s := slices.Clone(r.Evidence), slices.Clone(sources)
		sort.Strings(e)
		sort.Strings(s)
		if !slices.Equal(e, s) {
			t.Errorf("regime %s: evidence %v, its pairs come from %v", r, r.Evidence, sources)
		}
	}
}

// regimesTable renders ValidatedRegimes for docs/CALIBRATION.md.
func regimesTable() string {
	rows := []string{"| algorithms | GPUs | nodes | GPUs per node | NICs per node | sizes | evidence | held-out worst error |", "|---|---|---|---|---|---|---|---|"}
	span := func(lo, hi int) string {
		if lo == hi {
			return fmt.Sprint(lo)
		}
		return fmt.Sprintf("%d-%d", lo, hi)
	}
	for _, r := range ValidatedRegimes() {
		rows = append(rows, fmt.Sprintf("| %s vs %s | sm%d | %s | %s | %s | %s | %s | %.1f%% |", algoName(r.A), algoName(r.B), r.CompCap,
			span(r.MinNodes, r.MaxNodes), span(r.MinGPUsPerNode, r.MaxGPUsPerNode), span(r.MinNICsPerNode, r.MaxNICsPerNode),
			sizeSpan(r.MinBytes, r.MaxBytes), strings.Join(r.Evidence, ", "), 100*r.WorstErr))
	}
	return strings.Join(rows, "\n")
}

// TestJudge: each basis of a model-only verdict, on shapes built to reach it.
func TestJudge(t *testing.T) {
	two := multi(dgxH100, 2, 8, 400)
	degraded := two
	degraded.NICGbps, degraded.Nominal = 200, Nominal{NICsPerNode: 8, NICGbps: 400, IntraGBps: 450}
	v100 := multi(Shape{NRanks: 8, NNodes: 1, CompCap: 70, IntraNVLink: true, IntraGBps: 50}, 2, 1, 100)
	tenByEight := multi(dgxH100, 10, 8, 400)
	// The same V100 pair on slower links: tree's gain shrinks to 13%, below
	// the regime's 27.7% held-out error.
	v100Slow := v100
	v100Slow.IntraGBps, v100Slow.NICGbps = 10, 50
	for _, tc := range []struct {
		name   string
		s      Shape
		bytes  uint64
		margin float64
		want   Basis
		reg    string // part of the regime's name (validated bases)
	}{
		{"same cell", dgxH100, 1 << 30, 0.03, BasisNone, ""},
		{"within the margin", two, 64 << 20, 0.03, BasisNone, ""},
		{"a degraded NIC decides it", degraded, 64 << 20, 0.03, BasisFabric, ""},
		{"a degraded NIC, but the margin is the model's larger error", degraded, 64 << 20, 0.5, BasisNone, ""},
		{"validated: 2 × 8 V100 tree vs ring at 1 GiB", v100, 1 << 30, 0.03, BasisValidated, "nccl-tests#22"},
		{"validated regime, margin within its error", v100Slow, 1 << 30, 0.03, BasisWithinError, "nccl-tests#22"},
		{"outside the regime's size", v100, 512 << 20, 0.03, BasisUnvalidated, ""},
		{"10 × 8 H100 tree over NVLSTree: no published tree run", tenByEight, 32 << 20, 0.03, BasisUnvalidated, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Judge(tc.s, ar, tc.bytes, tc.margin)
			if err != nil {
				t.Fatal(err)
			}
			if v.Basis != tc.want {
				t.Fatalf("basis %v, want %v (GIN %v/%v, NCCL %v/%v, margin %.3f, ideal %.3f, fabric %v, regime %v %v)",
					v.Basis, tc.want, v.GIN.Algorithm, v.GIN.Protocol, v.NCCL.Algorithm, v.NCCL.Protocol, v.Margin, v.IdealMargin, v.Fabric, v.InRegime, v.Regime)
			}
			if tc.reg != "" && !strings.Contains(v.Regime.String(), tc.reg) {
				t.Errorf("regime %s, want one naming %s", v.Regime, tc.reg)
			}
			if v.Basis.Overrides() != (tc.want == BasisFabric || tc.want == BasisValidated) {
				t.Errorf("Overrides() %v for %v", v.Basis.Overrides(), v.Basis)
			}
		})
	}
}
