package plan

import (
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/calib"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/planread"
	"github.com/gin-topology/gin/internal/plantable"
	"github.com/gin-topology/gin/internal/state"
)

// gb200Partitions is the published case's shape: three GB200 trays, each
// its own NVLink domain (one per rack here), over InfiniBand.
func gb200Partitions(t *testing.T) *cluster {
	t.Helper()
	nodes := []sim.FabricNode{
		{Name: "gb-a", Profile: "gb200-nvl72", Index: 0},
		{Name: "gb-b", Profile: "gb200-nvl72", Index: sim.TraysPerRack},
		{Name: "gb-c", Profile: "gb200-nvl72", Index: 2 * sim.TraysPerRack},
	}
	sc, err := sim.NewCluster("test", &flat, nodes)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{names: sc.Names(), srcs: sc.Sources, fab: sc.Fabric, invs: make([]*ginv1.NodeInventory, len(nodes))}
	for i := range c.srcs {
		c.recollect(t, i)
	}
	return c
}

// publishedRun is one of nccl#1801's runs as an imported measurement:
// all_reduce on the 12 GPUs, NCCL 2.27.3, the given busbw at 1-16 GiB.
func publishedRun(t *testing.T, c *cluster, a ginv1.Algorithm, busbw float64, created uint64) *ginv1.Measurement {
	t.Helper()
	key, err := calib.KeyOf(c.graph(t), nil, c.names, 4, "2.27.3")
	if err != nil {
		t.Fatal(err)
	}
	m := &ginv1.Measurement{Shape: key, Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, Algorithm: a, ForcedBy: "flag",
		Nodes: c.names, CreatedIndex: created}
	for b := uint64(1 << 30); b <= 16<<30; b <<= 1 {
		algbw := busbw / (2 * 11.0 / 12)
		m.Points = append(m.Points, &ginv1.MeasuredPoint{Bytes: b, TimeUs: float64(b) / algbw / 1000, BusBwGbps: busbw})
	}
	m.Id = state.MeasurementID(m)
	if err := state.CheckMeasurement(m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGB200ChoicesResolve: with the two published runs (ring 197 GB/s,
// tree 234 GB/s, NCCL_NVLS_ENABLE=0, forced by flag) imported, the 16 GiB
// all_reduce rule reads "NVLSTree if NCCL offers it (NCCL's own choice,
// not measured), else tree/simple (measured 19% faster than ring)", and
// resolves to NCCL's choice where NVLSTree is usable, to tree/simple where
// it is not, and to NCCL's choice on another NCCL release series.
func TestGB200ChoicesResolve(t *testing.T) {
	c := gb200Partitions(t)
	g := c.graph(t)
	ms := []*ginv1.Measurement{
		publishedRun(t, c, ginv1.Algorithm_ALGORITHM_RING, 197, 1),
		publishedRun(t, c, ginv1.Algorithm_ALGORITHM_TREE, 234, 2),
	}
	p, err := BuildWith(g, "gb200", c.names, 4, calib.NewIndex(g, nil, ms))
	if err != nil {
		t.Fatal(err)
	}
	if err := planread.Verify(p); err != nil {
		t.Fatal(err)
	}
	r := ruleAt(t, p, 12, 3, 16<<30)
	if got := planread.Choices(r); got != "nccl(nvls_tree),tree/simple" {
		t.Fatalf("choices %q, want nccl(nvls_tree),tree/simple\n%v", got, r)
	}
	for _, w := range []string{"NVLSTree if NCCL offers it (NCCL's own choice", "not measured", "else tree/simple: measured 16% faster than",
		"ring/simple", "1.19× the bandwidth", "applied on NCCL 2.27.x only"} {
		if !strings.Contains(r.GetReason(), w) {
			t.Errorf("reason %q lacks %q", r.GetReason(), w)
		}
	}
	if r.GetAlgorithm() != ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
		t.Errorf("the rule's own cell %v: a reader without choices should leave it to NCCL, as before", r.GetAlgorithm())
	}
	if tc := r.GetChoices()[1]; tc.GetMinNcclVersion() != 22703 || tc.GetMaxNcclVersion() != 22703 || tc.GetBasis() != "measured" {
		t.Errorf("tree choice %v: want NCCL 2.27.3 measured", tc)
	}
	cell := plantable.CellOf(r, true)
	bit := func(a, p int) plantable.Mask { return 1 << (a*plantable.MaxProtos + p) }
	ringTree := bit(1, 0) | bit(1, 1) | bit(1, 2) | bit(0, 0) | bit(0, 1) | bit(0, 2)
	for _, tc := range []struct {
		name    string
		mask    plantable.Mask
		running uint32
		algo    int
	}{
		{"NVLSTree offered", ringTree | bit(5, 2), 22703, -1},
		{"NCCL_NVLS_ENABLE=0", ringTree, 22703, 0},
		{"NCCL_NVLS_ENABLE=0 on NCCL 2.29", ringTree, 22905, -1},
	} {
		if got := cell.Resolve(tc.mask, 7, 3, tc.running); got.Algo != tc.algo {
			t.Errorf("%s: resolved %+v, want algo %d", tc.name, got, tc.algo)
		}
	}
	// Without measurements nothing changes: NCCL's model choice, one cell.
	p0, err := Build(g, "gb200", c.names, 4)
	if err != nil {
		t.Fatal(err)
	}
	if r0 := ruleAt(t, p0, 12, 3, 16<<30); len(r0.GetChoices()) != 0 {
		t.Errorf("a plan without measurements has choices: %v", r0)
	}
}

// TestProductionDataDropsOverride: an imported forced tree run 20%
// faster than NCCL's default makes the plan override NCCL; production
// data of the job's forced tree/simple, imported later and no faster than
// the default, drops the override, and the reason names it.
func TestProductionDataDropsOverride(t *testing.T) {
	c := newCluster(t, "dgx-h100", 2, flat)
	g := c.graph(t)
	def := measured(t, c, c.names, 8, 0, "default", 1, 1)
	tree := measured(t, c, c.names, 8, ginv1.Algorithm_ALGORITHM_TREE, "flag", 0.8, 2)
	p, err := BuildWith(g, "job-1", c.names, 8, calib.NewIndex(g, nil, []*ginv1.Measurement{def, tree}))
	if err != nil {
		t.Fatal(err)
	}
	if r := ruleAt(t, p, 16, 2, 64<<20); r.GetAlgorithm() != ginv1.Algorithm_ALGORITHM_TREE {
		t.Fatalf("before production data: %v", r)
	}
	prod := measured(t, c, c.names, 8, ginv1.Algorithm_ALGORITHM_TREE, "log", 0.99, 3)
	prod.Protocol, prod.Source = ginv1.Protocol_PROTOCOL_SIMPLE, "nccl-inspector:nccl-inspector-77 job 9 (forced by the pinned plan)"
	prod.Id = state.MeasurementID(prod)
	p, err = BuildWith(g, "job-2", c.names, 8, calib.NewIndex(g, nil, []*ginv1.Measurement{def, tree, prod}))
	if err != nil {
		t.Fatal(err)
	}
	r := ruleAt(t, p, 16, 2, 64<<20)
	if r.GetAlgorithm() != ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
		t.Fatalf("after production data the plan still overrides: %v", r)
	}
	for _, w := range []string{"leave it to NCCL: measured", "is not 5% faster", "production, NCCL Inspector"} {
		if !strings.Contains(r.GetReason(), w) {
			t.Errorf("reason %q lacks %q", r.GetReason(), w)
		}
	}
}
