package webui

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/calib"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/estimate"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/plan"
)

// simBackend answers the page's reads from a simulated cluster through the
// same graph, planner and estimator the master uses.
type simBackend struct {
	invs   map[string]*ginv1.NodeInventory
	g      *graph.Graph
	fabric *ginv1.FabricTopology
	nodes  []*ginv1.NodeSummary
	plans  []*ginv1.Plan
	ms     []*ginv1.Measurement
	busy   map[string]bool
	live   map[string]*ginv1.GetJobLiveResponse
}

// newSimBackend simulates n nodes of profile in a fat tree of spec; fault
// changes the sources before collection; down lists DOWN nodes; jobs are
// planned as job id → hostlist of names.
func newSimBackend(t testing.TB, profile string, n int, spec sim.FabricSpec, fault func(*sim.Cluster) error, down []string, jobs map[string][]string) *simBackend {
	t.Helper()
	c, err := sim.NewCluster("webui", &spec, sim.NodesOf(profile, "node", 1, n))
	if err != nil {
		t.Fatal(err)
	}
	if fault != nil {
		if err := fault(c); err != nil {
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
	b := &simBackend{invs: map[string]*ginv1.NodeInventory{}, g: g, fabric: c.Fabric, busy: map[string]bool{}}
	for _, d := range down {
		b.busy[d] = true
	}
	for _, inv := range invs {
		b.invs[inv.GetNodeName()] = inv
		s := &ginv1.NodeSummary{Name: inv.GetNodeName(), State: ginv1.NodeState_NODE_STATE_UP, GpuCount: uint32(len(inv.GetGpus())),
			GpuModel: inv.GetGpus()[0].GetModel(), SystemModel: inv.GetHost().GetSystemModel(), StateReason: "registered"}
		if b.busy[s.Name] {
			s.State, s.StateReason = ginv1.NodeState_NODE_STATE_DOWN, "missed 3 heartbeats"
		}
		info, _ := g.NodeInfo(s.Name)
		s.NvlinkDomain, s.LeafSwitch = info.NVLinkDomain, info.LeafSwitch
		s.NvlinksUp, s.NvlinksTotal = uint32(info.NVLinksUp), uint32(info.NVLinksTotal)
		s.ComputePortsUp, s.ComputePortsTotal = uint32(info.ComputePortsUp), uint32(info.ComputePortsTotal)
		b.nodes = append(b.nodes, s)
	}
	for job, nodes := range jobs {
		p, err := plan.Build(g, job, nodes, 0)
		if err != nil {
			t.Fatal(err)
		}
		b.plans = append(b.plans, p)
	}
	return b
}

func (b *simBackend) ListNodes(context.Context, *ginv1.ListNodesRequest) (*ginv1.ListNodesResponse, error) {
	return &ginv1.ListNodesResponse{Nodes: b.nodes}, nil
}

func (b *simBackend) GetNode(_ context.Context, r *ginv1.GetNodeRequest) (*ginv1.GetNodeResponse, error) {
	inv, ok := b.invs[r.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "node %q", r.GetName())
	}
	for _, s := range b.nodes {
		if s.Name == r.GetName() {
			return &ginv1.GetNodeResponse{Summary: s, Inventory: inv}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "node %q", r.GetName())
}

func (b *simBackend) GetMatrix(_ context.Context, r *ginv1.GetMatrixRequest) (*ginv1.GetMatrixResponse, error) {
	m, err := b.g.Matrix([]string{r.GetNodes()}, r.GetIncludeNics())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	devs, cells := graph.MatrixToProto(m)
	return &ginv1.GetMatrixResponse{Devices: devs, Cells: cells}, nil
}

func (b *simBackend) GetClusterInfo(context.Context, *ginv1.GetClusterInfoRequest) (*ginv1.GetClusterInfoResponse, error) {
	return &ginv1.GetClusterInfoResponse{ServerId: "sim", LeaderId: "sim"}, nil
}

func (b *simBackend) PinnedPlans(context.Context) ([]*ginv1.Plan, error) { return b.plans, nil }

func (b *simBackend) Topology(context.Context) (*graph.Graph, *ginv1.FabricTopology, error) {
	return b.g, b.fabric, nil
}

func (b *simBackend) Measurements(context.Context) ([]*ginv1.Measurement, error) { return b.ms, nil }

func (b *simBackend) JobLive(_ context.Context, job string) (*ginv1.GetJobLiveResponse, error) {
	return b.live[job], nil
}

// measure stores a ring/simple all_reduce measurement of nodes' shape, as
// CalibrationService would (its key from calib.KeyOf).
func (b *simBackend) measure(t *testing.T, nodes []string, points ...*ginv1.MeasuredPoint) {
	t.Helper()
	model := map[string]string{}
	for _, n := range b.nodes {
		model[n.Name] = n.GpuModel
	}
	key, err := calib.KeyOf(b.g, func(n string) string { return model[n] }, nodes, 0, "2.21.5")
	if err != nil {
		t.Fatal(err)
	}
	b.ms = append(b.ms, &ginv1.Measurement{Id: "m1", Shape: key, Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE,
		Algorithm: ginv1.Algorithm_ALGORITHM_RING, Protocol: ginv1.Protocol_PROTOCOL_SIMPLE, ForcedBy: "flag",
		Nodes: nodes, Source: "all_reduce_perf.log", Points: points})
}

func (b *simBackend) Estimate(_ context.Context, r *ginv1.EstimateRequest) (*ginv1.EstimateResponse, error) {
	pes, err := estimate.ForGPUCountWith(b.g, int(r.GetGpus()), b.busy, r.GetWorkload(), estimate.Options{})
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &ginv1.EstimateResponse{Placements: pes}, nil
}

// withVerdicts is a simBackend whose health check has verdicts.
type withVerdicts struct {
	*simBackend
	fail string
}

func (w withVerdicts) NodeVerdicts(context.Context) (map[string]*ginv1.NodeVerdict, error) {
	out := map[string]*ginv1.NodeVerdict{}
	for _, n := range w.nodes {
		out[n.Name] = &ginv1.NodeVerdict{Node: n.Name, Verdict: ginv1.Verdict_VERDICT_PASS}
	}
	out[w.fail] = &ginv1.NodeVerdict{Node: w.fail, Verdict: ginv1.Verdict_VERDICT_FAIL, Findings: []*ginv1.Finding{{
		Check: "ecc-uncorrected", Severity: ginv1.Verdict_VERDICT_FAIL, Subject: "GPU0", Seen: "GPU memory errors above the threshold",
		Impact: "a job here may crash", Fix: "drain and replace the GPU"}}}
	return out, nil
}

func get(t *testing.T, b Backend, path string) (int, string) {
	t.Helper()
	mux := http.NewServeMux()
	Register(mux, b, slog.New(slog.DiscardHandler))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Code, rec.Body.String()
}

func devFault(c *sim.Cluster) error {
	for i, n := range c.Nodes {
		if n.Name == "node002" {
			return c.Sources[i].SetNVLinkState(3, 7, false)
		}
	}
	return fmt.Errorf("no node002")
}

func TestPagesOnSimCluster(t *testing.T) {
	b := newSimBackend(t, "dgx-h100", 4, sim.DefaultFabricSpec(), devFault, []string{"node004"},
		map[string][]string{"4242": {"node001", "node002"}})
	// Measured on two other nodes of the same shape (two nodes under one
	// leaf group): the job's chart overlays them.
	b.measure(t, []string{"node003", "node004"}, &ginv1.MeasuredPoint{Bytes: 1 << 20, TimeUs: 100, BusBwGbps: 19.7},
		&ginv1.MeasuredPoint{Bytes: 1 << 30, TimeUs: 5000, BusBwGbps: 402.6})
	// Across the spine: another shape, not overlaid.
	b.measure(t, []string{"node001", "node003"}, &ginv1.MeasuredPoint{Bytes: 1 << 20, TimeUs: 120, BusBwGbps: 16.4})
	if _, body := get(t, b, "/ui/job?id=4242"); strings.Count(body, "data-measured=") != 2 {
		t.Errorf("job chart overlays %d measured points, want the 2 of its shape", strings.Count(body, "data-measured="))
	}
	tests := []struct {
		path string
		b    Backend
		want []string
	}{
		{"/ui/", b, []string{`data-node="node002"`, `data-state="warn"`, `data-node="node004" data-state="down"`, "4 nodes: 2 pass, 1 warn, 1 down"}},
		{"/ui/node?name=node002", b, []string{`data-link="node002/GPU3/nvlink7" data-state="down"`, "GPU3/nvlink7", `href="job?id=4242"`, ">NV17<", "PCIe tree", "Findings from the inventory"}},
		{"/ui/node?name=node001", withVerdicts{b, "node001"}, []string{"ecc-uncorrected: GPU memory errors above the threshold (a job here may crash)", "drain and replace the GPU", "Findings of the health check"}},
		{"/ui/", withVerdicts{b, "node001"}, []string{`data-node="node001" data-state="fail"`}},
		{"/ui/job?id=4242", b, []string{`n pass job" data-node="node001"`, `n warn job" data-node="node002"`, "all_reduce on 16 ranks over 2 nodes", "data-choice=", `data-series="ring"`,
			`data-measured="measured ring 1G: 402.6 GB/s (all_reduce_perf.log)"`}},
		{"/ui/estimate?gpus=16", b, []string{`data-series="one-leaf"`, `data-series="spine"`, "<td>one-leaf</td><td>yes</td>"}},
	}
	for _, tc := range tests {
		code, body := get(t, tc.b, tc.path)
		if code != 200 {
			t.Fatalf("GET %s = %d %.300s", tc.path, code, body)
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s lacks %q", tc.path, w)
			}
		}
	}
	if code, _ := get(t, b, "/ui/node?name=node999"); code != 404 {
		t.Errorf("unknown node answered %d, want 404", code)
	}
}
