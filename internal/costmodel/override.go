package costmodel

import (
	"fmt"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// Ideal is s on a healthy, ideal fabric: every NIC and NVLink at its
// nominal rate and count (s.Nominal), one switch hop (one leaf) and no
// oversubscription. What GIN's model adds that is not a fabric fact (the
// 2- and 3-node tree bytes, the NVLS pricing, the NVLink LL step, RoCE
// latency) stays, so Ideal(s) against s isolates what the fabric changes.
func Ideal(s Shape) Shape {
	i := s
	if s.NNodes > 1 && !s.MNNVL {
		i.InterHops = min(s.InterHops, 1)
		if s.Oversubscription > 1 {
			i.Oversubscription = 1
		}
		i.NICGbps = max(s.NICGbps, s.Nominal.NICGbps)
		i.NICsPerNode = max(s.NICsPerNode, s.Nominal.NICsPerNode)
	}
	if s.NRanks > s.NNodes {
		i.IntraGBps = max(s.IntraGBps, s.Nominal.IntraGBps)
	}
	return i
}

// FabricFactors names how s differs from Ideal(s); none when it is ideal.
func FabricFactors(s Shape) []string {
	i := Ideal(s)
	var f []string
	if i.NICsPerNode != s.NICsPerNode {
		f = append(f, fmt.Sprintf("%d of %d NICs per node up", s.NICsPerNode, i.NICsPerNode))
	}
	if i.NICGbps != s.NICGbps {
		f = append(f, fmt.Sprintf("slowest NIC %g Gb/s of %g", s.NICGbps, i.NICGbps))
	}
	if i.IntraGBps != s.IntraGBps {
		f = append(f, fmt.Sprintf("NVLink %g GB/s per GPU of %g", s.IntraGBps, i.IntraGBps))
	}
	if i.InterHops != s.InterHops {
		f = append(f, fmt.Sprintf("%d switch hops (across leaves)", s.InterHops))
	}
	if i.Oversubscription != s.Oversubscription && s.InterHops > 1 {
		f = append(f, fmt.Sprintf("spine oversubscription %g:1", s.Oversubscription))
	}
	return f
}

// Regime is a range of shapes and sizes where GIN's model was checked
// against held-out published runs of both algorithms of a pair on the same
// system: there, and only there, the model alone may override NCCL's
// choice of one with the other, by more than WorstErr.
type Regime struct {
	// CompCap is the GPUs' SM version; the ranges are inclusive.
	CompCap                        int
	MinNodes, MaxNodes             int
	MinGPUsPerNode, MaxGPUsPerNode int
	MinNICsPerNode, MaxNICsPerNode int
	MinBytes, MaxBytes             uint64
	// A and B are the pair of algorithms, either order.
	A, B ginv1.Algorithm
	// Evidence names the published pairs (internal/costmodel's pair
	// tables, docs/CALIBRATION.md).
	Evidence []string
	// WorstErr is the worst error of the model's ratio of the two times
	// over those pairs, |predicted ratio ÷ measured ratio − 1|: a margin
	// above it keeps its sign whatever that error does to it.
	WorstErr float64
}

// String names the regime as plan reasons print it.
func (r Regime) String() string {
	span := func(lo, hi int) string {
		if lo == hi {
			return fmt.Sprint(lo)
		}
		return fmt.Sprintf("%d-%d", lo, hi)
	}
	return fmt.Sprintf("%s vs %s on sm%d, %s nodes × %s GPUs, %s (%s; held-out worst error %.1f%%)",
		algoName(r.A), algoName(r.B), r.CompCap, span(r.MinNodes, r.MaxNodes), span(r.MinGPUsPerNode, r.MaxGPUsPerNode),
		sizeSpan(r.MinBytes, r.MaxBytes), strings.Join(r.Evidence, ", "), 100*r.WorstErr)
}

// ValidatedRegimes are the regimes of held-out published pairs where both
// sides are quoted (TestValidatedRegimes derives each bound and error
// from the pair tables and fails when this table says otherwise): each
// covers only the shapes and sizes measured.
func ValidatedRegimes() []Regime {
	const gib = 1 << 30
	tree, ring := ginv1.Algorithm_ALGORITHM_TREE, ginv1.Algorithm_ALGORITHM_RING
	nvls, nvlsTree := ginv1.Algorithm_ALGORITHM_NVLS, ginv1.Algorithm_ALGORITHM_NVLS_TREE
	return []Regime{
		{CompCap: 70, MinNodes: 2, MaxNodes: 2, MinGPUsPerNode: 8, MaxGPUsPerNode: 8, MinNICsPerNode: 1, MaxNICsPerNode: 1,
			MinBytes: gib, MaxBytes: gib, A: tree, B: ring, Evidence: []string{"nccl-tests#22"}, WorstErr: 0.277},
		{CompCap: 90, MinNodes: 5, MaxNodes: 5, MinGPUsPerNode: 8, MaxGPUsPerNode: 8, MinNICsPerNode: 4, MaxNICsPerNode: 4,
			MinBytes: gib, MaxBytes: gib, A: ring, B: tree, Evidence: []string{"nccl#1368"}, WorstErr: 0.179},
		{CompCap: 90, MinNodes: 1, MaxNodes: 1, MinGPUsPerNode: 8, MaxGPUsPerNode: 8,
			MinBytes: 8 * gib, MaxBytes: 8 * gib, A: nvls, B: ring, Evidence: []string{"nccl#2140", "nccl#1221"}, WorstErr: 0.033},
		{CompCap: 100, MinNodes: 1, MaxNodes: 1, MinGPUsPerNode: 8, MaxGPUsPerNode: 8,
			MinBytes: 8 * gib, MaxBytes: 8 * gib, A: nvls, B: ring, Evidence: []string{"nccl#2140"}, WorstErr: 0.020},
		{CompCap: 90, MinNodes: 2, MaxNodes: 2, MinGPUsPerNode: 8, MaxGPUsPerNode: 8, MinNICsPerNode: 8, MaxNICsPerNode: 8,
			MinBytes: 8 * gib, MaxBytes: 8 * gib, A: nvlsTree, B: ring, Evidence: []string{"nccl#1221"}, WorstErr: 0.016},
		{CompCap: 90, MinNodes: 4, MaxNodes: 4, MinGPUsPerNode: 8, MaxGPUsPerNode: 8, MinNICsPerNode: 8, MaxNICsPerNode: 8,
			MinBytes: 8 * gib, MaxBytes: 8 * gib, A: nvlsTree, B: ring, Evidence: []string{"nccl#1221"}, WorstErr: 0.003},
	}
}

// Contains says whether the regime covers algorithms a and b on s at bytes.
func (r Regime) Contains(s Shape, a, b ginv1.Algorithm, bytes uint64) bool {
	if !(a == r.A && b == r.B || a == r.B && b == r.A) || s.CompCap != r.CompCap || s.NNodes < 1 {
		return false
	}
	gpn := s.NRanks / s.NNodes
	return r.MinNodes <= s.NNodes && s.NNodes <= r.MaxNodes && r.MinGPUsPerNode <= gpn && gpn <= r.MaxGPUsPerNode &&
		r.MinNICsPerNode <= s.NICsPerNode && s.NICsPerNode <= r.MaxNICsPerNode && r.MinBytes <= bytes && bytes <= r.MaxBytes
}

// Validated returns the regime covering GIN's algorithm a against NCCL's b
// on s at bytes, if any.
func Validated(s Shape, a, b ginv1.Algorithm, bytes uint64) (Regime, bool) {
	for _, r := range ValidatedRegimes() {
		if r.Contains(s, a, b, bytes) {
			return r, true
		}
	}
	return Regime{}, false
}

// Basis is what a model-only override of NCCL's choice would stand on.
type Basis int

// Bases of a Verdict.
const (
	// BasisNone: GIN's model picks NCCL's cell, or is within the margin
	// of it: NCCL's choice stands, nothing to override.
	BasisNone Basis = iota
	// BasisFabric: the fabric factors (Ideal) change the ranking of the
	// two cells by more than the margin: override.
	BasisFabric
	// BasisValidated: the two algorithms are in a validated regime and
	// GIN's margin exceeds its held-out error: override.
	BasisValidated
	// BasisWithinError: in a validated regime, but the margin does not
	// exceed its held-out error: NCCL's choice kept.
	BasisWithinError
	// BasisUnvalidated: GIN's model prefers its cell by more than the
	// margin, from the model alone, where no published pair checks it:
	// NCCL's choice kept.
	BasisUnvalidated
)

// Overrides says whether a plan overrides NCCL on this basis.
func (b Basis) Overrides() bool { return b == BasisFabric || b == BasisValidated }

// Verdict is GIN's model against NCCL's choice for one bucket.
type Verdict struct {
	// GIN is GIN's model's pick; NCCL NCCL's own model's pick (its time in
	// NCCL's model). NCCLUs is NCCL's pick in GIN's model; ok false when
	// Priced is false when GIN's model does not offer NCCL's cell (then
	// NCCLUs is GIN's own time and Basis is BasisNone).
	GIN, NCCL Prediction
	NCCLUs    float64
	Priced    bool
	// Margin is 1 − GIN.TimeUs ÷ NCCLUs; IdealMargin the same two cells'
	// margin on Ideal(s) (equal to Margin on an ideal fabric).
	Margin, IdealMargin float64
	// Fabric are s's fabric factors (FabricFactors).
	Fabric []string
	// Regime is the validated regime of the pair, when InRegime.
	Regime   Regime
	InRegime bool
	Basis    Basis
}

// Judge compares GIN's choice with NCCL's for coll of bytes on s from the
// models alone. margin is the least relative gain that counts (the
// model's measured error on the shape, at least the plan's threshold).
// Where they differ by more, GIN's choice overrides NCCL's only when the
// fabric decides it (on Ideal(s) the same two cells are within margin,
// and the fabric moves them apart by more than margin) or when the pair
// is in a validated regime and the margin exceeds its held-out error.
func Judge(s Shape, coll ginv1.Collective, bytes uint64, margin float64) (Verdict, error) {
	gin, err := Predict(s, coll, bytes)
	if err != nil {
		return Verdict{}, err
	}
	nccl, err := PredictNCCL(s, coll, bytes)
	if err != nil {
		return Verdict{}, err
	}
	v := Verdict{GIN: gin, NCCL: nccl, NCCLUs: gin.TimeUs}
	if gin.Algorithm == nccl.Algorithm && gin.Protocol == nccl.Protocol {
		v.Priced = true
		return v, nil
	}
	us, ok := Cost(s, coll, nccl.Algorithm, nccl.Protocol, bytes)
	if !ok || us <= 0 {
		return v, nil
	}
	v.NCCLUs, v.Priced = us, true
	v.Margin = 1 - gin.TimeUs/us
	v.IdealMargin = v.Margin
	if v.Margin <= margin {
		return v, nil
	}
	v.Fabric = FabricFactors(s)
	if len(v.Fabric) > 0 {
		ideal := Ideal(s)
		g, ok1 := Cost(ideal, coll, gin.Algorithm, gin.Protocol, bytes)
		n, ok2 := Cost(ideal, coll, nccl.Algorithm, nccl.Protocol, bytes)
		if ok1 && ok2 && n > 0 {
			v.IdealMargin = 1 - g/n
			if v.IdealMargin <= margin && v.Margin-max(v.IdealMargin, 0) > margin {
				v.Basis = BasisFabric
				return v, nil
			}
		}
	}
	v.Regime, v.InRegime = Validated(s, gin.Algorithm, nccl.Algorithm, bytes)
	switch {
	case v.InRegime && v.Margin > v.Regime.WorstErr:
		v.Basis = BasisValidated
	case v.InRegime:
		v.Basis = BasisWithinError
	default:
		v.Basis = BasisUnvalidated
	}
	return v, nil
}

func algoName(a ginv1.Algorithm) string {
	return strings.ToLower(strings.TrimPrefix(a.String(), "ALGORITHM_"))
}

// sizeSpan prints a byte range as "8 GiB" or "1 MiB-1 GiB".
func sizeSpan(lo, hi uint64) string {
	if lo == hi {
		return byteSize(lo)
	}
	return byteSize(lo) + "-" + byteSize(hi)
}

func byteSize(b uint64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}
