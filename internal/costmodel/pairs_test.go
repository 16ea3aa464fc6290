package costmodel

import (
	"fmt"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// rtPair is a published all_reduce measured with ring and with tree on the
// same system (NCCL_ALGO, or NCCL_TREE_THRESHOLD=0 before NCCL 2.5). No
// constant is fitted on them: they check GIN's choice between the two.
type rtPair struct {
	system, source string
	shape          Shape
	bytes          uint64
	// ring, tree: the published busbw (GB/s) or time (µs, metric
	// "time") of each; 0 when the source states only which was faster.
	ring, tree float64
	metric     string
	faster     ginv1.Algorithm
	// use: "held out" (no rule or constant was chosen with it), "rule"
	// (it was in view when a rule of GIN's model was chosen) or "not
	// expressible" (the Shape cannot state the system: shown, not checked).
	use  string
	note string
}

func rtPairs() []rtPair {
	v100 := Shape{NRanks: 8, NNodes: 1, CompCap: 70, IntraNVLink: true, IntraGBps: 50}
	roce := multi(dgxH100, 5, 4, 400)
	roce.Ethernet = true
	tree := ginv1.Algorithm_ALGORITHM_TREE
	// Three GB200 NVLink partitions of 4 or 8 GPUs (one or two trays, a
	// 400 Gb/s CX-7 per GPU reached over C2C) in different racks: three
	// NVLink domains joined by InfiniBand, NVLS disabled by the reporter.
	nvlParts := func(gpus int) Shape {
		return Shape{NRanks: 3 * gpus, NNodes: 3, CompCap: 100, IntraNVLink: true, IntraGBps: 900, NVSwitch: true,
			NICsPerNode: gpus, NICGbps: 400, InterHops: 1, Oversubscription: 1, NICPath: NICPathC2C}
	}
	return []rtPair{
		{"3 GB200 NVL4 partitions (12 GPUs), IB, NCCL 2.27.3, NCCL_NVLS_ENABLE=0", "nccl#1801", nvlParts(4), 16 << 30, 196.72, 234.43, "busbw", tree, "rule",
			"NCCL's default picked ring; NCCL_ALGO=Tree 19% faster"},
		{"3 GB200 NVL8 partitions (24 GPUs), IB, NCCL 2.27.3, NCCL_NVLS_ENABLE=0", "nccl#1801", nvlParts(8), 16 << 30, 393.66, 485.68, "busbw", tree, "rule",
			"NCCL's default picked ring; NCCL_ALGO=Tree 23% faster"},
		{"2 × DGX A100, 8×100 Gb/s NICs, NCCL 2.16.5", "nccl#812", multi(dgxA100, 2, 8, 100), 1 << 30, 60, 0, "busbw", tree, "held out",
			"the reporter ran NCCL_ALGO=Ring and =Tree: tree has the higher peak; ring ≈ 60 GB/s (the maintainer's reading); the tree figure is not quoted"},
		{"5 × 8 H100, 4×400 Gb/s RoCE, NCCL 2.20", "nccl#1368", roce, 1 << 30, 190, 150, "busbw", ring, "held out",
			"NCCL_ALGO=Ring and =Tree, -b 1M -e 1G, on the same 40 GPUs"},
		{"2 × DGX-1 (8 V100, hybrid cube-mesh), 4×100 Gb/s IB", "nccl#307", multi(v100, 2, 4, 100), 2 << 30, 47, 58, "busbw", tree, "not expressible",
			"a maintainer: 47 GB/s with rings, 58 with 2-node trees; the NVLink bandwidth of a ring step on the cube-mesh is not one number (50 GB/s assumed), and it decides"},
		{"2 × 8 V100 (AWS p3dn), 1×100 Gb/s EFA", "nccl-tests#22", multi(v100, 2, 1, 100), 1 << 30, 268000, 134000, "time", tree, "held out",
			"a 1 GB all_reduce: 134 ms with NCCL's default (tree on 2 nodes), 268 ms with NCCL_TREE_THRESHOLD=0 (ring); NVLink per ring step assumed 50 GB/s, the single NIC binds either way"},
	}
}

// bestCell is the fastest protocol of algo in GIN's (gin) or NCCL's model.
func bestCell(s Shape, algo ginv1.Algorithm, bytes uint64, gin bool) (float64, ginv1.Protocol) {
	best, proto := -1.0, ginv1.Protocol(0)
	for _, p := range Protocols {
		us, ok := CostNCCL(s, ar, algo, p, bytes)
		if gin {
			us, ok = Cost(s, ar, algo, p, bytes)
		}
		if ok && (best < 0 || us < best) {
			best, proto = us, p
		}
	}
	return best, proto
}

// pairMinMargin is the least margin (percent) between GIN's ring and
// tree times that counts as a choice on a pair.
const pairMinMargin = 2.0

// pairsTable checks that GIN picks the measured faster algorithm on every
// pair and renders the table docs/CALIBRATION.md shows.
func pairsTable(t *testing.T) string {
	t.Helper()
	var held, right, ncclWrong int
	rows := []string{
		"| system | source | use | size | published ring | published tree | measured faster | GIN ring | GIN tree | GIN picks (margin) | NCCL's model picks | note |",
		"|---|---|---|---|---|---|---|---|---|---|---|---|",
	}
	name := func(a ginv1.Algorithm) string { return strings.ToLower(strings.TrimPrefix(a.String(), "ALGORITHM_")) }
	for _, p := range rtPairs() {
		pick := func(gin bool) (ginv1.Algorithm, float64, float64) {
			r, _ := bestCell(p.shape, ring, p.bytes, gin)
			tr, _ := bestCell(p.shape, ginv1.Algorithm_ALGORITHM_TREE, p.bytes, gin)
			if r < 0 || tr < 0 {
				t.Fatalf("%s: ring or tree unusable", p.source)
			}
			if tr < r {
				return ginv1.Algorithm_ALGORITHM_TREE, r, tr
			}
			return ring, r, tr
		}
		gin, r, tr := pick(true)
		nccl, _, _ := pick(false)
		margin := 100 * (max(r, tr)/min(r, tr) - 1)
		if p.use == "held out" {
			held++
			if gin == p.faster && margin >= pairMinMargin {
				right++
			}
			if nccl != p.faster {
				ncclWrong++
			}
		}
		switch {
		case p.use == "not expressible":
		case gin != p.faster:
			t.Errorf("%s (%s): GIN picks %s, the measured faster is %s", p.system, p.source, name(gin), name(p.faster))
		case margin < pairMinMargin:
			t.Errorf("%s (%s): ring %.1f µs, tree %.1f µs: a %.1f%% margin is no choice", p.system, p.source, r, tr, margin)
		}
		unit, conv := "GB/s", func(us float64) float64 { return float64(p.bytes) / us / 1000 * BusFactor(ar, p.shape.NRanks) }
		if p.metric == "time" {
			unit, conv = "µs", func(us float64) float64 { return us }
		}
		pub := func(v float64) string {
			if v == 0 {
				return "not quoted"
			}
			return fmt.Sprintf("%.0f %s", v, unit)
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %.0f %s | %.0f %s | %s (%.0f%%) | %s | %s |",
			p.system, p.source, p.use, sizeName(p.bytes), pub(p.ring), pub(p.tree), name(p.faster),
			conv(r), unit, conv(tr), unit, name(gin), margin, name(nccl), p.note))
	}
	return strings.Join(rows, "\n") + fmt.Sprintf("\n\nHeld out: %d pairs; GIN picks the measured faster algorithm on %d of them, "+
		"NCCL's own model on %d.", held, right, held-ncclWrong)
}

func TestRingTreePairs(t *testing.T) {
	if got := pairsTable(t); !strings.Contains(got, "| nccl#1368 |") {
		t.Fatalf("pairs table lost a row:\n%s", got)
	}
}
