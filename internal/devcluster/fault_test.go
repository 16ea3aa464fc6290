package devcluster

import (
	"context"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/estimate"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/plan"
)

func TestParseFault(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{in: "node001/mlx5_0=down", want: "node001/mlx5_0:1=down"},
		{in: "node001/mlx5_0:2=200", want: "node001/mlx5_0:2=200"},
		{in: "node002/GPU3/nvlink17=down", want: "node002/GPU3/nvlink17=down"},
		{in: "node001/mlx5_0", err: "want NODE"},
		{in: "node001/mlx5_0=slow", err: "neither down nor a rate"},
		{in: "node001/mlx5_0=0", err: "neither down nor a rate"},
		{in: "node001/mlx5_0:0=down", err: "port"},
		{in: "node001/GPU0/nvlink1=100", err: "only be set down"},
		{in: "node001/GPUx/nvlink1=down", err: "GPU<i>"},
		{in: "/mlx5_0=down", err: "want NODE"},
		{in: "a/b/c/d=down", err: "want NODE"},
		{in: "node003/GPU2/xid=79", want: "node003/GPU2/xid=79"},
		{in: "node003/GPU2/xid=0", err: "not an XID"},
		{in: "node003/GPUz/xid=79", err: "GPU<i>/xid"},
	}
	for _, tc := range tests {
		f, err := ParseFault(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseFault(%q) = %v, %v; want an error with %q", tc.in, f, err, tc.err)
			}
			continue
		}
		if err != nil || f.String() != tc.want {
			t.Errorf("ParseFault(%q) = %v, %v; want %s", tc.in, f, err, tc.want)
		}
	}
}

// TestFaultsChangeEstimatesAndPlans: a degraded or down NIC, or an NVLink
// down, on a simulated node changes what the model predicts for a
// placement over it, and a new plan's reasons.
func TestFaultsChangeEstimatesAndPlans(t *testing.T) {
	build := func(t *testing.T, faults ...string) *graph.Graph {
		t.Helper()
		c, err := sim.NewCluster("dev", &sim.FabricSpec{LeafGroups: 1, Spines: 2, Oversubscription: 1},
			[]sim.FabricNode{{Name: "node001", Profile: "dgx-h100", Index: 0}, {Name: "node002", Profile: "dgx-h100", Index: 1}})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range faults {
			f, err := ParseFault(s)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.apply(c.Sources[map[string]int{"node001": 0, "node002": 1}[f.Node]]); err != nil {
				t.Fatal(err)
			}
		}
		invs, err := c.Collect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		g, err := graph.Build(invs, c.Fabric)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	nodes := []string{"node001", "node002"}
	const size = 1 << 30
	ar := ginv1.Collective_COLLECTIVE_ALL_REDUCE
	for _, tc := range []struct {
		name   string
		faults []string
		gpn    int
		// override: the faulty plan overrides NCCL where the clean one does
		// not, and the rule says the fabric decided it.
		override bool
	}{
		{"NIC degraded to 200 Gb/s", []string{"node001/mlx5_0=200"}, 1, true},
		{"NIC down", []string{"node001/mlx5_0=down"}, 1, false},
		{"NVLinks down", []string{"node001/GPU0/nvlink0=down", "node001/GPU0/nvlink1=down", "node001/GPU0/nvlink2=down"}, 8, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := build(t, tc.faults...)
			ref, err := estimate.ForPlacement(build(t), nodes, tc.gpn, ar, size)
			if err != nil {
				t.Fatal(err)
			}
			got, err := estimate.ForPlacement(g, nodes, tc.gpn, ar, size)
			if err != nil {
				t.Fatal(err)
			}
			if got.GetTimeUs() <= ref.GetTimeUs() {
				t.Errorf("estimate %.1f µs with the fault, %.1f µs without: no slower", got.GetTimeUs(), ref.GetTimeUs())
			}
			faulty, err := plan.Build(g, "j", nodes, 0)
			if err != nil {
				t.Fatal(err)
			}
			clean, err := plan.Build(build(t), "j", nodes, 0)
			if err != nil {
				t.Fatal(err)
			}
			if faulty.GetContentHash() == clean.GetContentHash() {
				t.Error("the plan did not change")
			}
			overrides := func(p *ginv1.Plan) (n int, fabric bool) {
				for _, r := range p.GetRules() {
					if r.GetAlgorithm() != ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
						n++
						fabric = fabric || strings.Contains(r.GetReason(), "the fabric decides it")
					}
				}
				return n, fabric
			}
			if n, _ := overrides(clean); n != 0 {
				t.Errorf("the healthy plan overrides NCCL in %d rules", n)
			}
			if n, fabric := overrides(faulty); tc.override && (n == 0 || !fabric) {
				t.Errorf("the plan with the fault overrides NCCL in %d rules (fabric named: %v), want an override the fabric decides", n, fabric)
			}
		})
	}
}

func TestStartRefusesFaultsOnWhatDoesNotExist(t *testing.T) {
	for _, tc := range []struct {
		fault, want string
	}{
		{"node009/mlx5_0=down", `no node "node009"`},
		{"node001/mlx5_99=down", "mlx5_99"},
		{"node001/GPU42/nvlink0=down", "42"},
	} {
		f, err := ParseFault(tc.fault)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = Start(context.Background(), Config{Bind: "127.0.0.1:0", Agents: 1, Faults: []Fault{f}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--dev-fault %s: %v, want an error naming %q", tc.fault, err, tc.want)
		}
	}
}

// FuzzParseFault: any value parses or fails, never panics, and a parsed
// fault prints as a value that parses to the same fault.
func FuzzParseFault(f *testing.F) {
	for _, s := range []string{"node001/mlx5_0=down", "node001/mlx5_0:2=200", "node002/GPU3/nvlink17=down", "a/b=", "/=", "x/GPU/nvlink=down"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fl, err := ParseFault(s)
		if err != nil {
			return
		}
		again, err := ParseFault(fl.String())
		if err != nil || again != fl {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, fl, fl.String(), again, err)
		}
	})
}
