package main

import (
	"bytes"
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
			if sp.Kind != "topology" || sp.Component != "mlx5_0 port 1" || sp.NIC != "mlx5_0" || sp.Rank != -1 || sp.GPU != -1 ||
				sp.Slowdown != 0 || sp.Since != "" || len(sp.Evidence) != 1 || sp.Evidence[0] != sp.What {
				t.Errorf("topology suspect %+v", sp)
			}
		}
		if sp.Node == names[1] {
			t.Errorf("a healthy node is a suspect: %+v", sp)
		}
	}
	if !found {
		t.Fatalf("suspects %+v do not name %s's mlx5_0", r.Suspects, names[0])
	}

	// While the job runs too: the live suspects come first, the live
	// ranks' nodes join the job's, and the table prints the live part,
	// then the rows, then the topology notes.
	r.addLive(liveResp(straggler(2.5, false), slowLink(1.3, true)))
	var kinds []string
	for _, sp := range r.Suspects {
		kinds = append(kinds, sp.Kind)
	}
	if got := strings.Join(kinds, " "); got != "slow-link straggler topology" {
		t.Errorf("suspects %s, want the live ones (confirmed first) before the topology notes", got)
	}
	if !r.Live.Running || r.Live.RanksReporting != 3 || strings.Join(r.Nodes, ",") != "node000,node001,node003,node004" {
		t.Errorf("live %+v nodes %v", r.Live, r.Nodes)
	}
	var out bytes.Buffer
	a := &app{globals: defaultGlobals(), stdout: &out}
	if err := a.printJobReport(r); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 10 || lines[0] != "job 9 on node[000-001,003-004]: 2 rows" ||
		lines[1] != "live: 3 ranks reporting (1 missing), last report 03:45:00Z" ||
		lines[2] != "suspect slow-link node003 mlx5_2: 1.3x since 03:44:40Z, confirmed" ||
		!strings.HasPrefix(lines[3], "  rank 5 ") || !strings.HasPrefix(lines[5], "suspect straggler node001 gpu2: 2.5x since 03:44:55Z") ||
		!strings.HasPrefix(lines[7], "RANKS ") ||
		lines[10] != "suspect node000: NIC mlx5_0 port 1 at 200 Gb/s, the job's other compute NICs at 400 Gb/s" {
		t.Errorf("table output:\n%s", out.String())
	}
	if !isJobSource(m.GetSource(), "9") || isJobSource(m.GetSource(), "90") || isJobSource("a.log:1 job 9", "9") {
		t.Error("isJobSource")
	}
}
