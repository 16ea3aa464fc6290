package plan

import (
	"fmt"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/calib"
	"github.com/gin-topology/gin/internal/costmodel"
	"github.com/gin-topology/gin/internal/planread"
)

// family is the algorithms NCCL offers or withholds together at run time
// for a, nil when NCCL offers a wherever its model has it: NVLS and
// NVLSTree vanish together (NCCL_NVLS_ENABLE=0, a partial NVLink domain, a
// driver without multicast), CollNet both without SHARP, PAT alone
// (NCCL_PAT_ENABLE, one GPU per node). Ring and tree are always there.
func family(a ginv1.Algorithm) map[ginv1.Algorithm]bool {
	switch a {
	case ginv1.Algorithm_ALGORITHM_NVLS, ginv1.Algorithm_ALGORITHM_NVLS_TREE:
		return map[ginv1.Algorithm]bool{ginv1.Algorithm_ALGORITHM_NVLS: true, ginv1.Algorithm_ALGORITHM_NVLS_TREE: true}
	case ginv1.Algorithm_ALGORITHM_COLLNET_DIRECT, ginv1.Algorithm_ALGORITHM_COLLNET_CHAIN:
		return map[ginv1.Algorithm]bool{ginv1.Algorithm_ALGORITHM_COLLNET_DIRECT: true, ginv1.Algorithm_ALGORITHM_COLLNET_CHAIN: true}
	case ginv1.Algorithm_ALGORITHM_PAT:
		return map[ginv1.Algorithm]bool{ginv1.Algorithm_ALGORITHM_PAT: true}
	}
	return nil
}

// ncclPick is what NCCL's own model picks for coll of bytes on s among
// the algorithms not in without (nil: all).
func ncclPick(s costmodel.Shape, coll ginv1.Collective, bytes uint64, without map[ginv1.Algorithm]bool) (costmodel.Prediction, error) {
	if without == nil {
		return costmodel.PredictNCCL(s, coll, bytes)
	}
	best := costmodel.Prediction{TimeUs: -1}
	for _, a := range costmodel.Algorithms {
		if without[a] {
			continue
		}
		for _, p := range costmodel.Protocols {
			if us, ok := costmodel.CostNCCL(s, coll, a, p, bytes); ok && (best.TimeUs < 0 || us < best.TimeUs) {
				best = costmodel.Prediction{Algorithm: a, Protocol: p, TimeUs: us}
			}
		}
	}
	if best.TimeUs < 0 {
		return costmodel.Prediction{}, fmt.Errorf("%w for %v without %v", costmodel.ErrNoAlgorithm, coll, names(without))
	}
	return best, nil
}

func names(set map[ginv1.Algorithm]bool) string {
	var out []string
	for _, a := range costmodel.Algorithms {
		if set[a] {
			out = append(out, algoTitle(a))
		}
	}
	return strings.Join(out, "/")
}

// algoTitle names an algorithm as NCCL does ("NVLSTree", "Ring").
func algoTitle(a ginv1.Algorithm) string {
	if n := AlgorithmName(a); n != "" {
		return n
	}
	return "NCCL's choice"
}

// versionSpan is the NCCL_VERSION_CODE range of the measurements' NCCL
// versions ("2.27.3"); 0, 0 when any of them does not say (the plugin
// then applies the choice on every version, and the reason says so).
func versionSpan(vs ...string) (lo, hi uint32) {
	for _, v := range vs {
		c := planread.ParseVersion(v)
		if c == 0 {
			return 0, 0
		}
		if lo == 0 || c < lo {
			lo = c
		}
		hi = max(hi, c)
	}
	return lo, hi
}

// versionNote says which NCCL versions a measured choice applies on (the
// version rule, docs/CALIBRATION.md).
func versionNote(lo, hi uint32) string {
	if lo == 0 {
		return "; NCCL version not recorded with the measurements: applied on any"
	}
	series := func(c uint32) string { return fmt.Sprintf("%d.%d", c/10000, c/100%100) }
	on := "NCCL " + planread.VersionName(lo)
	if hi != lo {
		on += ".." + planread.VersionName(hi)
	}
	applies := series(lo) + ".x"
	if series(lo) != series(hi) {
		applies = series(lo) + ".x to " + series(hi) + ".x"
	}
	return fmt.Sprintf("; measured on %s, applied on NCCL %s only", on, applies)
}

// forced is a decision's forcing choice.
func forced(d decision) *ginv1.PlanChoice {
	return &ginv1.PlanChoice{Algorithm: d.algo, Protocol: d.proto, Channels: d.channels, Basis: d.basis,
		Evidence: d.reason, MinNcclVersion: d.minV, MaxNcclVersion: d.maxV}
}

// withChoices turns a bucket's decision into ordered choices where one
// cell cannot say it all: a measured override (its choice carries the
// NCCL versions it was measured on), and a decision that relies on an
// algorithm NCCL may not offer at run time (NVLS/NVLSTree, CollNet, PAT:
// the plan's own override of it, or NCCL's model picking it) followed by
// what the measurements of the communicator decide when NCCL does not
// offer it. Without such a fallback, a decision that leaves the choice to
// NCCL keeps its one cell (nothing to resolve). The rule's own cell stays
// the first choice's, what a reader without choices applies.
func withChoices(s costmodel.Shape, coll ginv1.Collective, bytes uint64, cells []calib.Cell, d decision) decision {
	var first *ginv1.PlanChoice
	var fam map[ginv1.Algorithm]bool
	var expected ginv1.Algorithm
	if d.algo != ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
		first, fam, expected = forced(d), family(d.algo), d.algo
		if d.basis == "measured" {
			first.Evidence += versionNote(d.minV, d.maxV)
		}
	} else if n, err := costmodel.PredictNCCL(s, coll, bytes); err == nil && family(n.Algorithm) != nil {
		how := "not measured"
		if d.basis == "measured" {
			how = "measured: " + d.reason
		}
		first = &ginv1.PlanChoice{Algorithm: n.Algorithm, NcclIfOffered: true, Basis: "nccl",
			Evidence: fmt.Sprintf("NCCL's own choice (its model picks %s), %s", planread.CellName(n.Algorithm, n.Protocol), how)}
		fam, expected = family(n.Algorithm), n.Algorithm
	}
	if first == nil {
		return d
	}
	var rest *decision
	if fam != nil {
		if fd, ok := decideMeasured(s, coll, bytes, cells, fam); ok && fd.algo != ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
			rest = &fd
		}
	}
	switch {
	case rest == nil && d.algo == ginv1.Algorithm_ALGORITHM_UNSPECIFIED:
		return d // NCCL decides either way
	case rest == nil && d.basis != "measured":
		return d // a model override: its one cell says it all
	}
	d.choices = []*ginv1.PlanChoice{first}
	if d.basis == "measured" && d.algo != ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
		d.reason += versionNote(d.minV, d.maxV)
	}
	if rest == nil {
		return d
	}
	fc := forced(*rest)
	fc.Evidence += versionNote(rest.minV, rest.maxV)
	d.choices = append(d.choices, fc)
	if d.algo == ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
		d.reason = fmt.Sprintf("%s if NCCL offers it (%s), else %s", algoTitle(expected), first.Evidence, fc.Evidence)
	} else {
		d.reason = fmt.Sprintf("%s if NCCL offers it (%s), else %s", planread.CellName(d.algo, d.proto), d.reason, fc.Evidence)
	}
	return d
}
