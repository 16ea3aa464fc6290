package main

import (
	"context"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/calib"
	"github.com/gin-topology/gin/internal/costmodel"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/graph"
)

// TestJobReportSuspects: two DGX H100 nodes, node000's mlx5_0 retrained
// at 200 Gb/s (as --dev-fault node000/mlx5_0=200 does). A production
// all_reduce at GIN's healthy-fabric prediction reads "as expected"; one
// 40% below it reads "slower than GIN expected by 40%", and the suspects
// name the degraded NIC on node000 and nothing on node001.
func TestJobReportSuspects(t *testing.T) {
	spec := sim.FabricSpec{LeafGroups: 1, Spines: 2, Oversubscription: 1}
	c, err := sim.NewCluster("test", &spec, sim.NodesOf("dgx-h100", "node", 0, 2))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Sources[0].SetPortState("mlx5_0", 1, true, 200); err != nil {
		t.Fatal(err)
	}
	invs, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build(invs, c.Fabric)
	if err != nil {
		t.Fatal(err)
	}
	names := c.Names()
	key, err := calib.KeyOf(g, nil, names, 8, "2.27.3")
	if err != nil {
		t.Fatal(err)
	}
	s, err := costmodel.ShapeOf(g, names, 8)
	if err != nil {
		t.Fatal(err)
	}
	m := &ginv1.Measurement{Id: "m1", Shape: key, Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, ForcedBy: "default", Nodes: names,
		Source: "nccl-inspector:nccl-inspector-9 job 9"}
	curve := calib.CellCurve(costmodel.Ideal(s), m)
	bus := costmodel.BusFactor(ginv1.Collective_COLLECTIVE_ALL_REDUCE, 16)
	for _, tc := range []struct {
		bytes  uint64
		factor float64 // measured busbw over the healthy prediction
	}{{1 << 30, 1.0}, {4 << 30, 0.6}} {
		us := curve(tc.bytes)
		m.Points = append(m.Points, &ginv1.MeasuredPoint{Bytes: tc.bytes, TimeUs: us / tc.factor, BusBwGbps: float64(tc.bytes) / us / 1000 * bus * tc.factor})
	}
	r := buildJobReport("9", g, invs, []*ginv1.Measurement{m})
	if len(r.Rows) != 2 || r.Rows[0].Verdict != "as expected" || r.Rows[1].Verdict != "slower than GIN expected by 40%" {
		t.Fatalf("rows %+v", r.Rows)
	}
	var found bool
	for _, sp := range r.Suspects {
		if sp.Node == names[0] && strings.Contains(sp.What, "NIC mlx5_0 port 1 at 200 Gb/s, the job's other compute NICs at 400 Gb/s") {
			found = true
		}
		if sp.Node == names[1] {
			t.Errorf("a healthy node is a suspect: %+v", sp)
		}
	}
	if !found {
		t.Fatalf("suspects %+v do not name %s's mlx5_0", r.Suspects, names[0])
	}
	if !isJobSource(m.GetSource(), "9") || isJobSource(m.GetSource(), "90") || isJobSource("a.log:1 job 9", "9") {
		t.Error("isJobSource")
	}
}
