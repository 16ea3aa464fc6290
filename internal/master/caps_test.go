package master

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/testkit"
)

// TestNodeAndPlanCaps: past --max-nodes a new node's inventory, and past
// --max-plans a new job's plan, are refused with RESOURCE_EXHAUSTED naming
// the flag and nothing is written; nodes and plans already held are still
// updated and served; the limits are exported next to the counts.
func TestNodeAndPlanCaps(t *testing.T) {
	s := startServerWith(t, func(c *Config) { c.HeartbeatInterval, c.MaxNodes, c.MaxPlans = time.Minute, 2, 1 })
	conn := dialPlain(t, s.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	registerNodes(t, s, "dgx-h100", "node001", "node002")
	// refused: the status names the flag and carries the limit's reason,
	// which the rejection count is labelled with.
	refused := func(t *testing.T, err error, flag, reason string) {
		t.Helper()
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), flag) || apierr.Reason(err) != reason {
			t.Fatalf("err = %v (reason %q); want RESOURCE_EXHAUSTED naming %s, reason %s", err, apierr.Reason(err), flag, reason)
		}
		label := strings.ToLower(reason)
		testkit.WaitFor(t, 10*time.Second, "gin_master_rejected_messages_total{reason=\""+label+"\"} 1", func() bool {
			return testutil.ToFloat64(s.metrics.rejected.WithLabelValues(codes.ResourceExhausted.String(), label)) == 1
		})
		if n := testutil.ToFloat64(s.metrics.rejected.WithLabelValues(codes.ResourceExhausted.String(), "too_large")); n != 0 {
			t.Fatalf("a limit counted as too_large (%v)", n)
		}
	}

	t.Run("nodes", func(t *testing.T) {
		before := s.store.Index()
		third := simInventory(t, "dgx-h100", "node003")
		third.Generation = 1
		sess, _ := openSession(t, conn, third)
		_, err := sess.send(third)
		refused(t, err, "--max-nodes", apierr.ReasonNodeLimit)
		if _, ok := s.store.Node("node003"); ok || s.store.Index() != before {
			t.Fatalf("a refused node was written (index %d -> %d)", before, s.store.Index())
		}
		// A node already registered is still updated.
		again := simInventory(t, "dgx-h100", "node001")
		again.Generation = 2
		again.Host.KernelVersion += "-new"
		if _, err := s.putInventory(ctx, again); err != nil {
			t.Fatalf("update of a registered node at the cap: %v", err)
		}
	})

	t.Run("plans", func(t *testing.T) {
		pc := ginv1.NewPlanServiceClient(conn)
		if _, err := pc.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "1", Nodes: "node[001-002]", GpusPerNode: 8}); err != nil {
			t.Fatal(err)
		}
		before := s.store.Index()
		_, err := pc.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "2", Nodes: "node[001-002]", GpusPerNode: 8})
		refused(t, err, "--max-plans", apierr.ReasonPlanLimit)
		if _, ok := s.store.Plan("2"); ok || s.store.Index() != before {
			t.Fatalf("a refused plan was written (index %d -> %d)", before, s.store.Index())
		}
		// The plan held is still served; once deleted, the next job fits.
		if _, err := pc.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "1", Nodes: "node[001-002]", GpusPerNode: 8}); err != nil {
			t.Fatalf("the pinned plan at the cap: %v", err)
		}
		if _, err := pc.DeletePlan(ctx, &ginv1.DeletePlanRequest{JobId: "1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := pc.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "2", Nodes: "node[001-002]", GpusPerNode: 8}); err != nil {
			t.Fatalf("below the cap again: %v", err)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(newMasterCollector(s))
		want := `# HELP gin_master_nodes_limit The most nodes this master registers (--max-nodes); compare with sum(gin_master_nodes).
# TYPE gin_master_nodes_limit gauge
gin_master_nodes_limit{server="m1"} 2
# HELP gin_master_pinned_plans Job plans pinned.
# TYPE gin_master_pinned_plans gauge
gin_master_pinned_plans{server="m1"} 1
# HELP gin_master_pinned_plans_limit The most plans this master pins (--max-plans); compare with gin_master_pinned_plans.
# TYPE gin_master_pinned_plans_limit gauge
gin_master_pinned_plans_limit{server="m1"} 1
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gin_master_nodes_limit", "gin_master_pinned_plans", "gin_master_pinned_plans_limit"); err != nil {
			t.Fatal(err)
		}
	})
}
