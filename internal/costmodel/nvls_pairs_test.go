package costmodel

import (
	"fmt"
	"math"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// nvlsPair is a published all_reduce of one system with NVLS (or NVLSTree
// across nodes) and without it (NCCL_NVLS_ENABLE=0, NCCL_ALGO=Ring): GIN's
// choice between its NVLS cell and its best other cell is checked against
// the measured faster one. The other cell's algorithm is not always known
// (NCCL_NVLS_ENABLE=0 leaves NCCL's pick among ring and tree), so GIN's
// side is its fastest non-NVLS cell.
type nvlsPair struct {
	system, source string
	shape          Shape
	bytes          uint64
	without, with  float64 // published busbw, GB/s
	// faster: "nvls", "other" or "tie" (the source quotes equal figures:
	// GIN's two must then be within pairTieMargin).
	faster string
	use    string // "held out" or "rule" (as rtPair)
	// miss: GIN's choice is known to disagree with the measurement; the
	// test fails when a pair's agreement changes either way.
	miss bool
	note string
}

// pairTieMargin bounds GIN's margin on a pair the source measured equal:
// nccl-tests' run-to-run spread and plan.MeasuredMargin (5%).
const pairTieMargin = 5.0

func nvlsPairs() []nvlsPair {
	roce := func(nodes int) Shape {
		s := multi(dgxH100, nodes, 8, 400)
		s.Ethernet = true
		return s
	}
	b300 := Shape{NRanks: 8, NNodes: 1, CompCap: 100, IntraGBps: 900, IntraNVLink: true, NVSwitch: true}
	return []nvlsPair{
		{"8 × H100, NCCL 2.30.4", "nccl#2140", dgxH100, 8 << 30, 370, 480, "nvls", "held out", false,
			"NVLS off vs on; the size is not quoted (the peak, 8 GiB assumed)"},
		{"8 × B300 (NVLink 5, as B200 in the model), NCCL 2.30.4", "nccl#2140", b300, 8 << 30, 695, 845, "nvls", "held out", false,
			"NVLS off vs on; the size is not quoted (the peak, 8 GiB assumed); the one Blackwell NVLS/ring pair found"},
		{"1 × 8 H100, NCCL 2.19.3", "nccl#1221", dgxH100, 8 << 30, 330, 430, "nvls", "held out", false,
			"NCCL_NVLS_ENABLE=0 vs 1, -b 4G -e 8G"},
		{"2 × 8 H100, 8×400 Gb/s RoCE, NCCL 2.19.3", "nccl#1221", roce(2), 8 << 30, 330, 430, "nvls", "held out", false,
			"NCCL_NVLS_ENABLE=0 vs 1 (NVLSTree), -b 4G -e 8G"},
		{"4 × 8 H100, 8×400 Gb/s RoCE, NCCL 2.19.3", "nccl#1221", roce(4), 8 << 30, 320, 320, "tie", "held out", false,
			"NCCL_NVLS_ENABLE=0 vs 1 (NVLSTree): \"same busbw 320GB\""},
		{"3 of 8 H100, NCCL 2.18-2.28.3", "nccl#1455", ranks(dgxH100, 3), 2 << 30, 367.5, 367.5, "tie", "rule", true,
			"NCCL_ALGO=Ring vs NVLS, 2-4 GiB: \"365-370\" both; GIN's NVLS 16% lower (the n/(n+1) form)"},
		{"4 of 8 H100, NCCL 2.18-2.28.3", "nccl#1455", ranks(dgxH100, 4), 2 << 30, 367.5, 367.5, "tie", "rule", false,
			"NCCL_ALGO=Ring vs NVLS, 2-4 GiB: \"365-370\" both"},
		{"5 of 8 H100, NCCL 2.18-2.28.3", "nccl#1455", ranks(dgxH100, 5), 2 << 30, 367.5, 420, "nvls", "rule", false,
			"NCCL_ALGO=Ring vs NVLS, 2-4 GiB"},
	}
}

// nvlsSides are GIN's (gin) or NCCL's model's NVLS-family time and best
// other time for p, µs.
func (p nvlsPair) sides(t *testing.T, gin bool) (nv, other float64, otherAlgo ginv1.Algorithm) {
	t.Helper()
	nvAlgo := ginv1.Algorithm_ALGORITHM_NVLS
	if p.shape.NNodes > 1 {
		nvAlgo = ginv1.Algorithm_ALGORITHM_NVLS_TREE
	}
	nv, _ = bestCell(p.shape, nvAlgo, p.bytes, gin)
	other = -1
	for _, a := range []ginv1.Algorithm{ring, ginv1.Algorithm_ALGORITHM_TREE} {
		if us, _ := bestCell(p.shape, a, p.bytes, gin); us > 0 && (other < 0 || us < other) {
			other, otherAlgo = us, a
		}
	}
	if nv < 0 || other < 0 {
		t.Fatalf("%s (%s): a side is unusable", p.system, p.source)
	}
	return nv, other, otherAlgo
}

// nvlsPairsTable checks GIN's choice on every pair and renders the table
// docs/CALIBRATION.md shows.
func nvlsPairsTable(t *testing.T) string {
	t.Helper()
	rows := []string{
		"| system | source | use | size | published without NVLS | published with | measured | GIN without (cell) | GIN with | GIN's margin | NCCL's model | note |",
		"|---|---|---|---|---|---|---|---|---|---|---|---|",
	}
	var held, right int
	for _, p := range nvlsPairs() {
		nv, other, oa := p.sides(t, true)
		nnv, nother, _ := p.sides(t, false)
		// margin > 0: NVLS faster in GIN's model, percent.
		margin := 100 * (other/nv - 1)
		ok := false
		switch p.faster {
		case "nvls":
			ok = margin >= pairMinMargin
		case "other":
			ok = -margin >= pairMinMargin
		case "tie":
			ok = math.Abs(margin) <= pairTieMargin
		}
		if p.use == "held out" {
			held++
			if ok {
				right++
			}
		}
		if ok == p.miss {
			t.Errorf("%s (%s): GIN NVLS %.0f µs, other %.0f µs (%+.1f%%), measured %s; agreement %v, expected %v",
				p.system, p.source, nv, other, margin, p.faster, ok, !p.miss)
		}
		bus := func(us float64) float64 { return float64(p.bytes) / us / 1000 * BusFactor(ar, p.shape.NRanks) }
		ncclPick := "nvls"
		if nother < nnv {
			ncclPick = "other"
		}
		use := p.use
		if p.miss {
			use += ", GIN misses"
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %.0f GB/s | %.0f GB/s | %s | %.0f GB/s (%s) | %.0f GB/s | %+.0f%% | %s (%+.0f%%) | %s |",
			p.system, p.source, use, sizeName(p.bytes), p.without, p.with, p.faster, bus(other),
			strings.ToLower(strings.TrimPrefix(oa.String(), "ALGORITHM_")), bus(nv), margin, ncclPick, 100*(nother/nnv-1), p.note))
	}
	return strings.Join(rows, "\n") + fmt.Sprintf("\n\nHeld out: %d pairs; GIN's choice agrees with the measurement on %d of them "+
		"(a tie agrees when GIN's two are within %.0f%%). Margins: + when GIN's model finds NVLS faster.", held, right, pairTieMargin)
}

func TestNVLSPairs(t *testing.T) {
	if got := nvlsPairsTable(t); !strings.Contains(got, "| nccl#1221 |") {
		t.Fatalf("NVLS pairs table lost a row:\n%s", got)
	}
}
