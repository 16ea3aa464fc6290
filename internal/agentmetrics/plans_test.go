package agentmetrics

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/nodeplans"
	"github.com/gin-topology/gin/internal/plansock"
)

// unreachable is the masters when none answers.
type unreachable struct{}

func (unreachable) FetchPlan(context.Context, plansock.Request) (*ginv1.Plan, error) {
	return nil, errors.New("dial tcp 10.0.0.1:5000: connect: connection refused")
}

// notFound is the masters for a job without a plan.
type notFound struct{}

func (notFound) FetchPlan(_ context.Context, r plansock.Request) (*ginv1.Plan, error) {
	return nil, plansock.ErrNotFound
}

// TestPlanCollector runs the agent's real plan path (store and socket)
// against masters that fail, asks for plans as ranks do, and reads the
// counts through the collector.
func TestPlanCollector(t *testing.T) {
	tests := []struct {
		name    string
		masters nodeplans.Fetcher
		jobs    []string // requested in order; a job asked twice is answered from the kept failure
		want    string
	}{
		{"masters unreachable", unreachable{}, []string{"7", "7", "8"}, `
gin_agent_plan_fetches_total{hostname="node001",result="error"} 2
gin_agent_plan_fetches_total{hostname="node001",result="not_found"} 0
gin_agent_plan_fetches_total{hostname="node001",result="ok"} 0
gin_agent_plan_requests_total{hostname="node001",status="bad_request"} 0
gin_agent_plan_requests_total{hostname="node001",status="not_found"} 0
gin_agent_plan_requests_total{hostname="node001",status="ok"} 0
gin_agent_plan_requests_total{hostname="node001",status="unavailable"} 3
gin_agent_plan_requests_refused_total{hostname="node001"} 0
gin_agent_plan_socket_log_lines_suppressed_total{hostname="node001"} 0
`},
		{"no plan for the job", notFound{}, []string{"9"}, `
gin_agent_plan_fetches_total{hostname="node001",result="error"} 0
gin_agent_plan_fetches_total{hostname="node001",result="not_found"} 1
gin_agent_plan_fetches_total{hostname="node001",result="ok"} 0
gin_agent_plan_requests_total{hostname="node001",status="bad_request"} 0
gin_agent_plan_requests_total{hostname="node001",status="not_found"} 1
gin_agent_plan_requests_total{hostname="node001",status="ok"} 0
gin_agent_plan_requests_total{hostname="node001",status="unavailable"} 0
gin_agent_plan_requests_refused_total{hostname="node001"} 0
gin_agent_plan_socket_log_lines_suppressed_total{hostname="node001"} 0
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, err := nodeplans.Open(nodeplans.Options{Fetcher: tt.masters})
			if err != nil {
				t.Fatal(err)
			}
			dir, err := os.MkdirTemp("", "gpm") // short: sun_path holds 108 bytes
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			path := filepath.Join(dir, "agent.sock")
			srv, err := plansock.Listen(path, store, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ctx) }()
			t.Cleanup(func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Serve: %v", err)
				}
			})
			for _, job := range tt.jobs {
				if _, err := plansock.Fetch(ctx, path, plansock.Request{JobID: job}); err != nil {
					t.Fatalf("job %s: %v", job, err)
				}
			}
			c := NewPlans("node001", srv, store)
			if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP gin_agent_plan_fetches_total Plans asked of the masters for a job the agent did not hold, by result: ok, not_found (the job has no plan), error (masters unreachable or failing, or a plan that failed verification).
# TYPE gin_agent_plan_fetches_total counter
# HELP gin_agent_plan_requests_total Plan requests answered on the agent's plan socket (ranks, the Slurm prolog), by answer status: ok, not_found, unavailable, bad_request.
# TYPE gin_agent_plan_requests_total counter
# HELP gin_agent_plan_requests_refused_total Plan requests refused without asking the masters because their user (not root) had asked for more distinct jobs this node does not hold than the store's bound (nodeplans.MaxJobsPerUID in nodeplans.FailureTTL).
# TYPE gin_agent_plan_requests_refused_total counter
# HELP gin_agent_plan_socket_log_lines_suppressed_total Plan socket log lines a caller caused (no plan served, connection refused, answer not delivered) left out by their rate limit (1/s after a burst of 10); every answer is still counted in gin_agent_plan_requests_total.
# TYPE gin_agent_plan_socket_log_lines_suppressed_total counter
`+tt.want)); err != nil {
				t.Error(err)
			}
			problems, err := testutil.CollectAndLint(c)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("lint: %s: %s", p.Metric, p.Text)
			}
		})
	}
}
