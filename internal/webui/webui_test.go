package webui

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/graph"
)

// fakeBackend answers like the master's read services, or fails with err.
type fakeBackend struct {
	err      error
	asks     []string
	follower bool       // GetClusterInfo answers as a follower: no reachability
	mu       sync.Mutex // a browser asks concurrently
	// live are the running jobs JobLive answers (the others are not
	// live); liveErr fails JobLive.
	live    map[string]*ginv1.GetJobLiveResponse
	liveErr error
}

func (f *fakeBackend) ask(what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asks = append(f.asks, what)
}

func (f *fakeBackend) ListNodes(context.Context, *ginv1.ListNodesRequest) (*ginv1.ListNodesResponse, error) {
	f.ask("ListNodes")
	if f.err != nil {
		return nil, f.err
	}
	return &ginv1.ListNodesResponse{Nodes: []*ginv1.NodeSummary{{Name: "n1", State: ginv1.NodeState_NODE_STATE_DOWN, GpuCount: 0}}}, nil
}

func (f *fakeBackend) GetNode(_ context.Context, r *ginv1.GetNodeRequest) (*ginv1.GetNodeResponse, error) {
	f.ask("GetNode " + r.GetName())
	if f.err != nil {
		return nil, f.err
	}
	return &ginv1.GetNodeResponse{Summary: &ginv1.NodeSummary{Name: r.GetName()}}, nil
}

func (f *fakeBackend) GetMatrix(_ context.Context, r *ginv1.GetMatrixRequest) (*ginv1.GetMatrixResponse, error) {
	f.ask("GetMatrix " + r.GetNodes())
	return &ginv1.GetMatrixResponse{}, f.err
}

func (f *fakeBackend) GetClusterInfo(context.Context, *ginv1.GetClusterInfoRequest) (*ginv1.GetClusterInfoResponse, error) {
	f.ask("GetClusterInfo")
	// The leader's answer: itself, a master it hears from, one it stopped
	// hearing from 12.3 s ago, one it never heard from since its election.
	resp := &ginv1.GetClusterInfoResponse{ServerId: "m1", LeaderId: "m1", Members: []*ginv1.Member{
		{Id: "m1", Leader: true, Voter: true, Reachable: new(true), LastContactMs: new(uint64(0))},
		{Id: "m2", Voter: true, Reachable: new(true), LastContactMs: new(uint64(800))},
		{Id: "m3", Voter: true, Reachable: new(false), LastContactMs: new(uint64(12300))},
		{Id: "m4", Voter: true, Reachable: new(false)},
	}}
	if f.follower {
		resp.ServerId = "m2"
		for _, m := range resp.Members {
			m.Reachable, m.LastContactMs = nil, nil
		}
	}
	return resp, f.err
}

func (f *fakeBackend) PinnedPlans(context.Context) ([]*ginv1.Plan, error) {
	f.ask("PinnedPlans")
	if f.err != nil {
		return nil, f.err
	}
	var ps []*ginv1.Plan
	for i := range MaxPlans + 5 {
		ps = append(ps, &ginv1.Plan{JobId: fmt.Sprintf("j%04d", i), Nodes: []string{"n1"},
			Rules: []*ginv1.PlanRule{{Reason: "tree: 2 nodes halve the inter-node bytes"}}})
	}
	return ps, nil
}

func (f *fakeBackend) Topology(context.Context) (*graph.Graph, *ginv1.FabricTopology, error) {
	f.ask("Topology")
	return &graph.Graph{}, nil, f.err
}

func (f *fakeBackend) Measurements(context.Context) ([]*ginv1.Measurement, error) {
	f.ask("Measurements")
	return nil, f.err
}

func (f *fakeBackend) Estimate(_ context.Context, r *ginv1.EstimateRequest) (*ginv1.EstimateResponse, error) {
	f.ask(fmt.Sprintf("Estimate %d", r.GetGpus()))
	return &ginv1.EstimateResponse{}, f.err
}

func (f *fakeBackend) JobLive(_ context.Context, job string) (*ginv1.GetJobLiveResponse, error) {
	f.ask("JobLive " + job)
	if f.liveErr != nil {
		return nil, f.liveErr
	}
	return f.live[job], nil
}

func TestHandlers(t *testing.T) {
	tests := []struct {
		name, method, path string
		err                error
		code               int
		body               string
		asked              string // "" = the backend must not be asked
	}{
		{"nodes as ginctl -o json", "GET", "/ui/api/nodes", nil, 200, `"state":"down"`, "ListNodes"},
		{"zero values kept", "GET", "/ui/api/nodes", nil, 200, `"gpu_count":0`, "ListNodes"},
		{"cluster", "GET", "/ui/api/cluster", nil, 200, `"server_id":"m1"`, "GetClusterInfo"},
		{"cluster: reachability as ginctl -o json", "GET", "/ui/api/cluster", nil, 200, `"reachable":false`, "GetClusterInfo"},
		{"cluster: never heard from, no last contact", "GET", "/ui/api/cluster", nil, 200, `"reachable":false,"last_contact_ms":null`, "GetClusterInfo"},
		{"cluster: last contact", "GET", "/ui/api/cluster", nil, 200, `"last_contact_ms":12300`, "GetClusterInfo"},
		{"plans with their reasons", "GET", "/ui/api/plans", nil, 200, `"reason":"tree: 2 nodes halve the inter-node bytes"`, "PinnedPlans"},
		{"plans bounded, total said", "GET", "/ui/api/plans", nil, 200, `"total":205`, "PinnedPlans"},
		{"node", "GET", "/ui/api/node?name=n1", nil, 200, `"name":"n1"`, "GetNode n1"},
		{"matrix of one node", "GET", "/ui/api/matrix?node=n1", nil, 200, `{`, "GetMatrix n1"},
		{"node missing", "GET", "/ui/api/node?name=n9", status.Error(codes.NotFound, "no node n9"), 404, "no node n9", "GetNode n9"},
		{"replica not serving", "GET", "/ui/api/nodes", status.Error(codes.Unavailable, "not serving"), 503, "not serving", "ListNodes"},
		{"a hostlist is not a node name", "GET", "/ui/api/matrix?node=n[1-999]", nil, 400, "node name", ""},
		{"empty name", "GET", "/ui/api/node", nil, 400, "node name", ""},
		{"control characters", "GET", "/ui/api/node?name=a%0Ab", nil, 400, "node name", ""},
		{"read-only", "POST", "/ui/api/nodes", nil, 405, "", ""},
		{"page with the fabric drawn", "GET", "/ui/", nil, 200, `data-node="n1"`, "ListNodes,Topology"},
		{"page when the replica cannot read", "GET", "/ui/", status.Error(codes.Unavailable, "not serving"), 503, "not serving", "ListNodes"},
		{"expand is bounded", "GET", "/ui/?expand=a%0Ab", nil, 400, "not a leaf switch", ""},
		{"node page", "GET", "/ui/node?name=n1", nil, 200, "Node n1", "GetNode n1,GetMatrix n1,PinnedPlans,Topology"},
		{"node page: a hostlist is not a name", "GET", "/ui/node?name=n[1-2]", nil, 400, "node name", ""},
		{"job page", "GET", "/ui/job?id=j0003", nil, 200, "Job j0003", "PinnedPlans,JobLive j0003,ListNodes,Topology,Measurements"},
		{"job page: unknown job", "GET", "/ui/job?id=nope", nil, 404, "no plan pinned", "PinnedPlans,JobLive nope"},
		{"job page: bad id", "GET", "/ui/job?id=%3Cb%3E", nil, 400, "job id", ""},
		{"estimate sweep", "GET", "/ui/estimate?gpus=5", nil, 200, "up to 5 GPUs", "Estimate 1,Estimate 2,Estimate 4,Estimate 5"},
		{"estimate bounded", "GET", "/ui/estimate?gpus=70000", nil, 400, "gpus", ""},
		{"estimate workload checked", "GET", "/ui/estimate?workload=x", nil, 400, "workload", ""},
		{"no listing of the assets", "GET", "/ui/static/", nil, 404, "", ""},
		{"redirect to the page", "GET", "/ui", nil, 301, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &fakeBackend{err: tc.err}
			mux := http.NewServeMux()
			Register(mux, b, slog.New(slog.DiscardHandler))
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
				t.Fatalf("%s %s = %d %.200q, want %d containing %q", tc.method, tc.path, rec.Code, rec.Body.String(), tc.code, tc.body)
			}
			if got := strings.Join(b.asks, ","); got != tc.asked {
				t.Fatalf("backend asked %q, want %q", got, tc.asked)
			}
			if tc.code == 200 && !strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'self'") {
				t.Fatalf("no CSP on %s", tc.path)
			}
		})
	}
}

// At most MaxPlans plans go out; the last one sent is the MaxPlans-th.
func TestPlansBounded(t *testing.T) {
	mux := http.NewServeMux()
	Register(mux, &fakeBackend{}, slog.New(slog.DiscardHandler))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/api/plans", nil))
	body := rec.Body.String()
	if want := fmt.Sprintf(`"j%04d"`, MaxPlans-1); !strings.Contains(body, want) || strings.Contains(body, fmt.Sprintf(`"j%04d"`, MaxPlans)) {
		t.Fatalf("plans answer does not stop at %d plans", MaxPlans)
	}
}
