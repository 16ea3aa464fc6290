package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/planread"
	"github.com/gin-topology/gin/internal/testkit"
)

// planMaster is a master's PlanService: job "404" has no plan, every other
// job gets a small verified plan; it counts requests.
type planMaster struct {
	ginv1.UnimplementedPlanServiceServer
	calls atomic.Int32
}

func (m *planMaster) GetOrCreatePlan(_ context.Context, req *ginv1.GetOrCreatePlanRequest) (*ginv1.GetOrCreatePlanResponse, error) {
	m.calls.Add(1)
	if req.GetJobId() == "404" {
		return nil, status.Error(codes.NotFound, `plan for job "404"`)
	}
	p := &ginv1.Plan{FormatVersion: planread.FormatVersion, JobId: req.GetJobId(), Nodes: []string{"gpu-node-17"}}
	p.ContentHash = planread.Hash(p)
	return &ginv1.GetOrCreatePlanResponse{Plan: p}, nil
}

// TestAgentServesPlans runs the agent with a plan socket against a master
// and asks it as the prolog does (gin-agent plan): the first ask reaches
// the master, the next ones do not; the plan survives a restart of the
// agent with no master at all.
func TestAgentServesPlans(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pm := &planMaster{}
	srv := grpc.NewServer()
	ginv1.RegisterAgentServiceServer(srv, &master{got: make(chan *ginv1.NodeInventory, 1)})
	ginv1.RegisterPlanServiceServer(srv, pm)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	tmp, err := os.MkdirTemp("", "gpa")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	sock, dir := filepath.Join(tmp, "agent.sock"), filepath.Join(tmp, "plans")
	var errb *syncBuffer // the running agent's log
	start := func(masterAddr, metricsBind string) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		errb = new(syncBuffer)
		errb := errb
		done := make(chan int, 1)
		go func() {
			done <- runContext(ctx, []string{"--source", testInventory, "--node-name", "gpu-node-17", "--metrics-bind", metricsBind,
				"--plan-socket", sock, "--plan-dir", dir}, errb, errb, env(map[string]string{"GIN_MASTER_HOST": masterAddr}))
		}()
		exited := -1
		testkit.WaitFor(t, 15*time.Second, "the plan socket", func() bool {
			select {
			case exited = <-done:
				return true
			default:
			}
			return strings.Contains(errb.String(), "serving plans")
		}, errb.String)
		if exited >= 0 {
			t.Fatalf("gin-agent exited %d:\n%s", exited, errb.String())
		}
		return func() {
			cancel()
			if code := <-done; code != exitOK {
				t.Errorf("gin-agent exit %d:\n%s", code, errb.String())
			}
		}
	}
	stop := start(lis.Addr().String(), "127.0.0.1:0")
	want := (&ginv1.Plan{FormatVersion: planread.FormatVersion, JobId: "5", Nodes: []string{"gpu-node-17"}})
	want.ContentHash = planread.Hash(want)
	for range 3 {
		code, out, errs := runArgs(t, nil, "plan", "--job", "5", "--nodes", "gpu-node-17", "--plan-socket", sock)
		if code != exitOK || out != "plan "+want.ContentHash+" for job 5\n" {
			t.Fatalf("gin-agent plan: exit %d, %q, %q", code, out, errs)
		}
	}
	if n := pm.calls.Load(); n != 1 {
		t.Fatalf("%d requests reached the master for one job, want 1", n)
	}
	code, _, errs := runArgs(t, nil, "plan", "--job", "404", "--plan-socket", sock)
	if code != exitError || !strings.Contains(errs, "NOT_FOUND") {
		t.Fatalf("job without a plan: exit %d, %q", code, errs)
	}
	// The plan path's counts on /metrics: four answers, two fetches.
	m := regexp.MustCompile(`serving Prometheus metrics" addr=(\S+)`).FindStringSubmatch(errb.String())
	if m == nil {
		t.Fatalf("no metrics address in the logs:\n%s", errb.String())
	}
	resp, err := http.Get("http://" + m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`gin_agent_plan_requests_total{hostname="gpu-node-17",status="ok"} 3`,
		`gin_agent_plan_requests_total{hostname="gpu-node-17",status="not_found"} 1`,
		`gin_agent_plan_requests_total{hostname="gpu-node-17",status="unavailable"} 0`,
		`gin_agent_plan_fetches_total{hostname="gpu-node-17",result="ok"} 1`,
		`gin_agent_plan_fetches_total{hostname="gpu-node-17",result="not_found"} 1`,
		`gin_agent_plan_fetches_total{hostname="gpu-node-17",result="error"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	stop()

	// Restarted with every master gone: the kept plan is served.
	stop = start("127.0.0.1:1", "")
	defer stop()
	code, out, errs := runArgs(t, nil, "plan", "--job", "5", "--plan-socket", sock)
	if code != exitOK || !strings.Contains(out, want.ContentHash) {
		t.Fatalf("after restart: exit %d, %q, %q", code, out, errs)
	}
	if code, _, errs := runArgs(t, nil, "plan", "--plan-socket", sock); code != exitUsage || !strings.Contains(errs, "empty job id") {
		t.Fatalf("no job: exit %d, %q", code, errs)
	}
}
