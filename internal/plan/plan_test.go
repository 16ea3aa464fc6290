package plan

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/costmodel"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/planread"
)

const allReduce = ginv1.Collective_COLLECTIVE_ALL_REDUCE

func mustBuild(t testing.TB, c *cluster, nodes []string, ppn int) *ginv1.Plan {
	t.Helper()
	p, err := Build(c.graph(t), "job-1", nodes, ppn)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDeterminism(t *testing.T) {
	c := newCluster(t, "dgx-h100", 4, flat)
	a := mustBuild(t, c, c.names, 8)
	b := mustBuild(t, c, c.names, 8)
	ba, _ := proto.MarshalOptions{Deterministic: true}.Marshal(a)
	bb, _ := proto.MarshalOptions{Deterministic: true}.Marshal(b)
	if a.ContentHash != b.ContentHash || string(ba) != string(bb) {
		t.Fatal("two builds differ")
	}
	if err := planread.Verify(a); err != nil {
		t.Fatal(err)
	}
	// Node order is part of the plan (recorded in nodes): another order is
	// another hash.
	rev := []string{c.names[3], c.names[2], c.names[1], c.names[0]}
	r := mustBuild(t, c, rev, 8)
	if r.ContentHash == a.ContentHash {
		t.Fatal("reordered nodes give the same hash")
	}
	a.Rules[0].PredictedUs++
	if planread.Verify(a) == nil {
		t.Fatal("Verify accepted a tampered plan")
	}
	if a.FormatVersion != 1 || a.ModelVersion != costmodel.ModelVersion || a.GpusPerNode != 8 || len(a.Nodes) != 4 {
		t.Fatalf("header: %v", a)
	}
}

func TestCoverage(t *testing.T) {
	for _, tc := range []struct {
		profile string
		nodes   int
		ppn     int
		shapes  [][2]int // (nRanks, nNodes)
	}{
		{"dgx-h100", 4, 8, [][2]int{{32, 4}, {8, 1}, {4, 4}}},
		{"dgx-h100", 1, 8, [][2]int{{8, 1}}},
		{"dgx-a100", 2, 4, [][2]int{{8, 2}, {4, 1}, {2, 2}}},
		{"dgx-h100", 3, 1, [][2]int{{3, 3}}},
		{"pcie-8gpu", 2, 8, [][2]int{{16, 2}, {8, 1}, {2, 2}}},
		{"gb200-nvl72", 2, 4, [][2]int{{8, 2}, {4, 1}, {2, 2}}},
		{"rtx3090-nvlink-pair", 1, 2, [][2]int{{2, 1}}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			c := newCluster(t, tc.profile, tc.nodes, flat)
			p := mustBuild(t, c, c.names, tc.ppn)
			if err := planread.Verify(p); err != nil {
				t.Fatal(err)
			}
			for _, sh := range tc.shapes {
				for _, coll := range Collectives {
					for b := uint32(0); b <= planread.MaxLog2Bytes; b++ {
						n := 0
						for _, r := range p.Rules {
							if r.Collective == coll && int(r.NRanks) == sh[0] && int(r.NNodes) == sh[1] && r.MinLog2Bytes <= b && b <= r.MaxLog2Bytes {
								n++
							}
						}
						if n != 1 {
							t.Fatalf("%v %v bucket %d: %d rules", sh, coll, b, n)
						}
					}
				}
			}
			for _, r := range p.Rules {
				if r.Reason == "" {
					t.Fatalf("rule without reason: %v", r)
				}
				if r.Channels != 0 {
					t.Fatalf("channels set: %v", r)
				}
			}
			shapes := map[[2]int]bool{}
			for _, r := range p.Rules {
				shapes[[2]int{int(r.NRanks), int(r.NNodes)}] = true
			}
			if len(shapes) != len(tc.shapes) {
				t.Fatalf("shapes %v, want %v", shapes, tc.shapes)
			}
		})
	}
}

// choice is the algorithm the plan applies: the rule's, or NCCL's own.
func choice(t *testing.T, c *cluster, nodes []string, ppn int, coll ginv1.Collective, nRanks, nNodes int, bytes uint64) (ginv1.Algorithm, costmodel.Prediction) {
	t.Helper()
	p := mustBuild(t, c, nodes, ppn)
	r, ok := planread.Lookup(p, coll, nRanks, nNodes, bytes)
	if !ok {
		t.Fatalf("no rule for %d ranks / %d nodes", nRanks, nNodes)
	}
	s, err := costmodel.ShapeOf(c.graph(t), nodes, ppn)
	if err != nil {
		t.Fatal(err)
	}
	if nNodes == 1 && s.NNodes > 1 {
		s.NRanks, s.NNodes = ppn, 1
	}
	gin, _ := costmodel.Predict(s, coll, bytes)
	if r.Algorithm == ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
		n, _ := costmodel.PredictNCCL(s, coll, bytes)
		return n.Algorithm, gin
	}
	return r.Algorithm, gin
}

func TestDecisions(t *testing.T) {
	h := newCluster(t, "dgx-h100", 2, flat)
	a := newCluster(t, "dgx-a100", 2, flat)
	for _, tc := range []struct {
		name   string
		c      *cluster
		nodes  int
		ranks  int
		bytes  uint64
		accept []ginv1.Algorithm
	}{
		// NCCL and calibration.md: a tree (NVLS tree on NVSwitch Hopper)
		// wins on 2 nodes at large sizes.
		{"h100 2 nodes 1GiB", h, 2, 16, 1 << 30, []ginv1.Algorithm{ginv1.Algorithm_ALGORITHM_TREE, ginv1.Algorithm_ALGORITHM_NVLS_TREE}},
		{"h100 2 nodes 8GiB", h, 2, 16, 8 << 30, []ginv1.Algorithm{ginv1.Algorithm_ALGORITHM_TREE, ginv1.Algorithm_ALGORITHM_NVLS_TREE}},
		// Without NVLS (A100) GIN's model prefers tree to NCCL's ring, from
		// the model alone: no published 2 × 8 A100 pair quotes both (nccl#812
		// says tree is faster, without its figure), so NCCL's ring stands.
		{"a100 2 nodes 8GiB", a, 2, 16, 8 << 30, []ginv1.Algorithm{ginv1.Algorithm_ALGORITHM_RING}},
		{"h100 1 node 1GiB", h, 1, 8, 1 << 30, []ginv1.Algorithm{ginv1.Algorithm_ALGORITHM_NVLS}},
		{"a100 1 node 1GiB", a, 1, 8, 1 << 30, []ginv1.Algorithm{ginv1.Algorithm_ALGORITHM_RING}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, pred := choice(t, tc.c, tc.c.names[:tc.nodes], 8, allReduce, tc.ranks, tc.nodes, tc.bytes)
			for _, a := range tc.accept {
				if got == a {
					t.Logf("%v: %.0f µs, busbw %.0f GB/s", got, pred.TimeUs, pred.BusBWGBps)
					return
				}
			}
			t.Fatalf("picked %v, want one of %v", got, tc.accept)
		})
	}
}

func TestDegradedNIC(t *testing.T) {
	c := newCluster(t, "dgx-h100", 2, flat)
	g0 := c.graph(t)
	before, err := costmodel.ShapeOf(g0, c.names, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.srcs[1].SetPortState("mlx5_0", 1, true, 200); err != nil {
		t.Fatal(err)
	}
	c.recollect(t, 1)
	after, err := costmodel.ShapeOf(c.graph(t), c.names, 8)
	if err != nil {
		t.Fatal(err)
	}
	if before.NICGbps != 400 || after.NICGbps != 200 {
		t.Fatalf("NIC rate %v → %v, want 400 → 200", before.NICGbps, after.NICGbps)
	}
	for _, coll := range Collectives {
		pb, _ := costmodel.Predict(before, coll, 1<<30)
		pa, _ := costmodel.Predict(after, coll, 1<<30)
		if !(pa.TimeUs > pb.TimeUs) {
			t.Fatalf("%v: %v µs with a half-rate NIC, %v µs before", coll, pa.TimeUs, pb.TimeUs)
		}
	}
}

func TestOversubscribedSpine(t *testing.T) {
	c := newCluster(t, "dgx-h100", 8, sim.FabricSpec{LeafGroups: 2, Spines: 2, Oversubscription: 4})
	g := c.graph(t)
	same, err := costmodel.ShapeOf(g, c.names[:2], 8) // one leaf group
	if err != nil {
		t.Fatal(err)
	}
	cross, err := costmodel.ShapeOf(g, []string{c.names[0], c.names[7]}, 8) // across the spine
	if err != nil {
		t.Fatal(err)
	}
	if same.InterHops != 1 || cross.InterHops != 3 || cross.Oversubscription != 4 {
		t.Fatalf("same leaf %+v, cross spine %+v", same, cross)
	}
	ps, _ := costmodel.Predict(same, allReduce, 1<<30)
	pc, _ := costmodel.Predict(cross, allReduce, 1<<30)
	if !(pc.BusBWGBps < ps.BusBWGBps) {
		t.Fatalf("busbw cross-spine %.1f, same leaf %.1f", pc.BusBWGBps, ps.BusBWGBps)
	}
	// NCCL cannot see it: its model predicts the same for both.
	ns, _ := costmodel.PredictNCCL(same, allReduce, 1<<30)
	nc, _ := costmodel.PredictNCCL(cross, allReduce, 1<<30)
	if ns.TimeUs != nc.TimeUs {
		t.Fatalf("NCCL's model sees the spine: %v vs %v", ns.TimeUs, nc.TimeUs)
	}
}

func TestLookup(t *testing.T) {
	c := newCluster(t, "dgx-h100", 2, flat)
	p := mustBuild(t, c, c.names, 8)
	for _, tc := range []struct {
		name   string
		coll   ginv1.Collective
		ranks  int
		nodes  int
		bytes  uint64
		ok     bool
		bucket uint32
	}{
		{"0 bytes", allReduce, 16, 2, 0, true, 0},
		{"1 byte", allReduce, 16, 2, 1, true, 0},
		{"3 bytes", allReduce, 16, 2, 3, true, 1},
		{"2^40", allReduce, 16, 2, 1 << 40, true, 40},
		{"2^40+", allReduce, 16, 2, 1<<40 + 1, true, 40},
		{"max", allReduce, 16, 2, ^uint64(0), true, 40},
		{"one node", allReduce, 8, 1, 1 << 20, true, 20},
		{"one GPU per node", ginv1.Collective_COLLECTIVE_BROADCAST, 2, 2, 1 << 20, true, 20},
		{"unknown shape", allReduce, 12, 2, 1 << 20, false, 0},
		{"unknown collective", ginv1.Collective_COLLECTIVE_UNSPECIFIED, 16, 2, 1 << 20, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := planread.Lookup(p, tc.coll, tc.ranks, tc.nodes, tc.bytes)
			if ok != tc.ok {
				t.Fatalf("ok %v", ok)
			}
			if ok && (r.MinLog2Bytes > tc.bucket || r.MaxLog2Bytes < tc.bucket) {
				t.Fatalf("rule %d..%d for bucket %d", r.MinLog2Bytes, r.MaxLog2Bytes, tc.bucket)
			}
		})
	}
	if _, ok := planread.Lookup(nil, allReduce, 16, 2, 8); ok {
		t.Fatal("nil plan")
	}
}

func TestBadInput(t *testing.T) {
	c := newCluster(t, "dgx-h100", 2, flat)
	g := c.graph(t)
	for _, tc := range []struct {
		name  string
		job   string
		nodes []string
		ppn   int
		want  string
	}{
		{"unknown node", "j", []string{"node000", "nope"}, 8, "nope"},
		{"too many GPUs", "j", c.names, 9, "has 8 GPUs"},
		{"empty nodes", "j", nil, 8, "no nodes"},
		{"empty job", "", c.names, 8, "job id"},
		{"duplicate node", "j", []string{"node000", "node000"}, 8, "twice"},
		{"negative", "j", c.names, -1, "gpus per node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(g, tc.job, tc.nodes, tc.ppn)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := Build(nil, "j", c.names, 8); err == nil {
		t.Fatal("nil graph")
	}
}

func TestExplain(t *testing.T) {
	c := newCluster(t, "dgx-a100", 2, flat)
	p := mustBuild(t, c, c.names, 8)
	lines := planread.Explain(p)
	if len(lines) != len(p.Rules)+2 || !strings.Contains(lines[0], "job-1") {
		t.Fatalf("%d lines for %d rules: %q", len(lines), len(p.Rules), lines[0])
	}
	for _, l := range lines {
		t.Log(l)
	}
}

// TestOverrideBases: each way a model-only bucket is decided, on real
// simulated clusters (fabric faults, a cross-spine placement) and on shapes
// a simulated profile cannot express (a V100 pair of a validated regime),
// with the reason each gives. A measured override is TestMeasuredDecisions.
func TestOverrideBases(t *testing.T) {
	degraded := newCluster(t, "dgx-h100", 2, flat)
	if err := degraded.srcs[0].SetPortState("mlx5_0", 1, true, 200); err != nil {
		t.Fatal(err)
	}
	degraded.recollect(t, 0)
	healthy := newCluster(t, "dgx-h100", 2, flat)
	spine := newCluster(t, "dgx-h100", 8, sim.FabricSpec{LeafGroups: 2, Spines: 2, Oversubscription: 4})
	shape := func(c *cluster, nodes []string, gpn int) costmodel.Shape {
		s, err := costmodel.ShapeOf(c.graph(t), nodes, gpn)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	v100 := costmodel.Shape{NRanks: 16, NNodes: 2, CompCap: 70, IntraNVLink: true, IntraGBps: 50, NICsPerNode: 1, NICGbps: 100, InterHops: 1, Oversubscription: 1}
	for _, tc := range []struct {
		name     string
		s        costmodel.Shape
		bytes    uint64
		override ginv1.Algorithm // 0: NCCL's choice kept
		want     []string
	}{
		{"a degraded NIC overrides NVLSTree", shape(degraded, degraded.names, 8), 64 << 20, ginv1.Algorithm_ALGORITHM_TREE,
			[]string{"tree/ll128: ", "faster than NCCL's nvls_tree/simple; the fabric decides it (slowest NIC 200 Gb/s of 400; on a healthy fabric"}},
		{"the same shape healthy: within the margin", shape(healthy, healthy.names, 8), 4 << 20, 0,
			[]string{"leave it to NCCL: tree/ll128 is within 3% of NCCL's nvls_tree/simple"}},
		{"across an oversubscribed spine", shape(spine, []string{spine.names[0], spine.names[7]}, 8), 1 << 30, ginv1.Algorithm_ALGORITHM_TREE,
			[]string{"the fabric decides it (3 switch hops (across leaves); spine oversubscription 4:1; on a healthy fabric"}},
		{"validated regime: 2 × 8 V100, 1 NIC", v100, 1 << 30, ginv1.Algorithm_ALGORITHM_TREE,
			[]string{"tree/simple: 31% faster than NCCL's ring/simple; validated: tree vs ring on sm70, 2 nodes × 8 GPUs, 1 GiB (nccl-tests#22; held-out worst error 27.7%)"}},
		{"unvalidated: 2 × 4 H100 tree over NVLSTree", shape(healthy, healthy.names, 4), 8 << 20, 0,
			[]string{"GIN's model prefers tree/ll128 by 19% over NCCL's nvls_tree/simple, not validated on this shape (no published tree run against nvls_tree at 2 nodes × 4 sm90 GPUs); NCCL's choice kept"}},
		{"unvalidated: 1 × 2 H100 ring over NVLS", shape(healthy, healthy.names[:1], 2), 1 << 30, 0,
			[]string{"GIN's model prefers ring/simple by", "over NCCL's nvls/simple, not validated on this shape (no published ring run against nvls at 1 node × 2 sm90 GPUs)"}},
		{"unvalidated: 10 × 8 H100", costmodel.Shape{NRanks: 80, NNodes: 10, CompCap: 90, IntraNVLink: true, IntraGBps: 450, NVSwitch: true,
			NICsPerNode: 8, NICGbps: 400, InterHops: 1, Oversubscription: 1}, 32 << 20, 0,
			[]string{"GIN's model prefers tree/ll128 by 45% over NCCL's nvls_tree/simple, not validated", "at 10 nodes × 8 sm90 GPUs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := decide(tc.s, allReduce, tc.bytes, OverrideMargin)
			if err != nil {
				t.Fatal(err)
			}
			if d.algo != tc.override {
				t.Errorf("algorithm %v, want %v (%s)", d.algo, tc.override, d.reason)
			}
			for _, w := range tc.want {
				if !strings.Contains(d.reason, w) {
					t.Errorf("reason %q, want %q", d.reason, w)
				}
			}
			if tc.override == 0 && (d.proto != 0 || d.nccl == "") {
				t.Errorf("a kept choice carries protocol %v, nccl %q", d.proto, d.nccl)
			}
		})
	}
}
