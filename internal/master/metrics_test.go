package master

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/testkit"
)

func TestMetricsAndHealth(t *testing.T) {
	s, err := New(Config{ID: "m1", Bind: "127.0.0.1:0", RaftBind: "127.0.0.1:0", HTTPBind: "127.0.0.1:0", DataDir: t.TempDir(),
		Bootstrap: true, FastRaft: true, HeartbeatInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-served; _ = s.Close() })
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := s.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "m1 to lead", s.node.IsLeader)
	registerNodes(t, s, "dgx-h100", "node001")
	// One request rejected over gRPC is counted by the interceptor.
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := ginv1.NewPlanServiceClient(conn).GetPlan(ctx, &ginv1.GetPlanRequest{JobId: "bad id"}); err == nil {
		t.Fatal("bad job id accepted")
	}
	// The rejections stats handler counts an RPC at its end, after the status
	// went out to the client: wait for the count before reading /metrics.
	testkit.WaitFor(t, 30*time.Second, "the rejected GetPlan to be counted", func() bool {
		return testutil.ToFloat64(s.metrics.rejected.WithLabelValues("InvalidArgument", "invalid")) >= 1
	})

	for _, c := range []prometheus.Collector{newMasterCollector(s), newHealthCollector(s.newCheck())} {
		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + s.HTTPAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d %s", code, body)
	}
	_, body := get("/metrics")
	for _, want := range []string{
		`gin_master_raft_state{server="m1",state="Leader"} 1`,
		`gin_master_nodes{server="m1",state="up"} 1`,
		`gin_master_nvlinks{server="m1",state="up"} 144`,
		`gin_master_apply_duration_seconds_count`,
		`gin_master_build_info{server="m1"`,
		`gin_master_rejected_messages_total{code="InvalidArgument",reason="invalid"} 1`,
		// A single master leads: no follower reports, nothing unreached.
		`gin_master_reported_agents{server="m1"} 0`,
		`gin_master_leader_unreached_seconds{server="m1"} 0`,
		// A healthy WAL: every operation's series exists, at 0.
		`gin_master_raft_log_store_errors_total{op="store_logs",server="m1"} 0`,
		`gin_master_raft_log_store_errors_total{op="get_log",server="m1"} 0`,
		// The node verdicts (health_metrics.go): a healthy simulated node.
		`gin_health_node_verdict{node="node001",reason="",verdict="pass"} 1`,
		`gin_health_nodes{verdict="pass"} 1`,
		`gin_health_nodes{verdict="fail"} 0`,
		`gin_health_findings{check="nvlink-down",severity="fail"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
