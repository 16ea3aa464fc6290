package master

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/pki"
)

// TestAgentPlanQuotas: one agent certificate cannot fill the plan store
// (issue #33 item 3: 643 plans/s with 90-day TTLs filled --max-plans).
// An agent's plans live at most MaxAgentPlanTTL; it may not add to
// MaxPlansPerAgentNode plans naming its node; agents fill at most
// agentPlanShare of --max-plans, the rest kept for the scheduler and
// admins. Each refusal names its bound, and an admin still pins.
func TestAgentPlanQuotas(t *testing.T) {
	p := newTestPKI(t)
	agentID := pki.Identity{Role: pki.RoleAgent, Name: "node001"}
	adminID := pki.Identity{Role: pki.RoleAdmin, Name: "ops"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := func(t *testing.T, maxPlans int) (agent, admin ginv1.PlanServiceClient) {
		t.Helper()
		s := startServerWith(t, func(c *Config) {
			c.TLS = p.source(t, pki.Identity{Role: pki.RoleMaster, Name: "m1"})
			c.MaxPlans = maxPlans
		})
		registerNodes(t, s, "dgx-h100", "node001", "node002")
		return ginv1.NewPlanServiceClient(p.dial(t, s.Addr(), agentID)), ginv1.NewPlanServiceClient(p.dial(t, s.Addr(), adminID))
	}
	pin := func(pc ginv1.PlanServiceClient, job, nodes string, ttl time.Duration) (*ginv1.Plan, error) {
		r, err := pc.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: job, Nodes: nodes, TtlSeconds: uint32(ttl / time.Second)})
		return r.GetPlan(), err
	}
	refusedFor := func(t *testing.T, err error, want ...string) {
		t.Helper()
		if status.Code(err) != codes.ResourceExhausted || apierr.Reason(err) != apierr.ReasonAgentPlanLimit {
			t.Fatalf("%v, want RESOURCE_EXHAUSTED %s", err, apierr.ReasonAgentPlanLimit)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%q does not name %q", err, w)
			}
		}
	}

	t.Run("TTL", func(t *testing.T) {
		agent, admin := start(t, 100)
		if _, err := pin(agent, "long", "node001", MaxAgentPlanTTL+time.Hour); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), MaxAgentPlanTTL.String()) {
			t.Fatalf("an agent's %s plan: %v, want INVALID_ARGUMENT naming %s", MaxAgentPlanTTL+time.Hour, err, MaxAgentPlanTTL)
		}
		pl, err := pin(agent, "default", "node001", 0)
		if err != nil {
			t.Fatal(err)
		}
		if life := pl.GetExpiresAt().AsTime().Sub(pl.GetCreatedAt().AsTime()); life > MaxAgentPlanTTL {
			t.Fatalf("an agent's plan lives %s, more than %s", life, MaxAgentPlanTTL)
		}
		if _, err := pin(admin, "long", "node001", MaxPlanTTL); err != nil {
			t.Fatalf("an admin's %s plan: %v", MaxPlanTTL, err)
		}
	})

	t.Run("plans naming the agent's node", func(t *testing.T) {
		agent, admin := start(t, 100_000)
		for i := range MaxPlansPerAgentNode {
			if _, err := pin(agent, fmt.Sprintf("a%d", i), "node001", 0); err != nil {
				t.Fatalf("agent plan %d: %v", i, err)
			}
		}
		_, err := pin(agent, "one-more", "node001", 0)
		refusedFor(t, err, "node001", fmt.Sprint(MaxPlansPerAgentNode))
		// The scheduler's and admins' plans are not the agent's quota.
		if _, err := pin(admin, "one-more", "node001", 0); err != nil {
			t.Fatalf("an admin's plan on the agent's full node: %v", err)
		}
		// The epilog's delete gives the agent room again.
		for _, job := range []string{"a0", "one-more"} {
			if _, err := admin.DeletePlan(ctx, &ginv1.DeletePlanRequest{JobId: job}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := pin(agent, "after-delete", "node001", 0); err != nil {
			t.Fatalf("an agent's plan after a delete: %v", err)
		}
	})

	t.Run("share of --max-plans", func(t *testing.T) {
		const maxPlans = 20 // agents may fill 18
		agent, admin := start(t, maxPlans)
		for i := range 17 {
			if _, err := pin(admin, fmt.Sprintf("s%d", i), "node002", 0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := pin(agent, "a17", "node001", 0); err != nil {
			t.Fatalf("the agent's plan at 17 of 20: %v", err)
		}
		_, err := pin(agent, "a18", "node001", 0)
		refusedFor(t, err, "18 plans are", "90%", "(20)")
		for i := 18; i < maxPlans; i++ {
			if _, err := pin(admin, fmt.Sprintf("s%d", i), "node002", 0); err != nil {
				t.Fatalf("an admin's plan %d of %d: %v", i+1, maxPlans, err)
			}
		}
		if _, err := pin(admin, "past", "node002", 0); status.Code(err) != codes.ResourceExhausted || apierr.Reason(err) != apierr.ReasonPlanLimit {
			t.Fatalf("past --max-plans: %v, want %s", err, apierr.ReasonPlanLimit)
		}
	})
}
