package master

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/state"
)

// formedWithNodes starts three plaintext masters, registers names through
// the leader and waits until every master holds them.
func formedWithNodes(t *testing.T, names ...string) (ms []*member, leader, follower *member) {
	t.Helper()
	ms = startCluster(t, 3)
	waitUntil(t, "3 masters to form", func() bool { return formed(ms) })
	leader = registerOnLeader(t, ms, names...)
	index := leader.s.store.Index()
	for _, m := range ms {
		waitUntil(t, m.s.cfg.ID+" to apply the nodes", func() bool { return m.s.store.Index() >= index })
	}
	return ms, leader, followerOf(ms, leader)
}

// registerOnLeader registers names on the leader, asking the next one
// when a leadership just formed moves on, and returns the leader that
// committed them.
func registerOnLeader(t *testing.T, ms []*member, names ...string) *member {
	t.Helper()
	var leader *member
	waitUntil(t, "the nodes to be registered", func() bool {
		leader = leaderNow(t, ms)
		for _, n := range names {
			inv := simInventory(t, "dgx-h100", n)
			inv.Generation = 1
			if _, err := leader.s.putInventory(context.Background(), inv); err != nil {
				return false
			}
		}
		return true
	})
	return leader
}

// TestWritesSentToAFollowerCommit is issue #25's one way to reach the
// leader: every write a client sends to a follower (plan, calibration,
// deny, node delete, fabric, member removal) and every consistent read is
// answered by the leader through the follower, with no NOT_LEADER and no
// leader hint for the client to follow.
func TestWritesSentToAFollowerCommit(t *testing.T) {
	ms, leader, follower := formedWithNodes(t, "node001", "node002", "node003")
	conn, err := grpc.NewClient(follower.s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	plans, calib, admin, topo := ginv1.NewPlanServiceClient(conn), ginv1.NewCalibrationServiceClient(conn),
		ginv1.NewAdminServiceClient(conn), ginv1.NewTopologyServiceClient(conn)
	// onLeader is the state of whichever master leads now, once it holds
	// every committed entry (under load leadership may move during the
	// test; a write committed by one leader is on the next).
	onLeader := func() *state.Store {
		l := leaderNow(t, ms)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := l.s.node.Barrier(ctx); err != nil {
			t.Logf("barrier on %s: %v", l.s.cfg.ID, err)
		}
		return l.s.store
	}
	var measurement string
	cases := []struct {
		name      string
		call      func(context.Context, ...grpc.CallOption) error
		committed func() bool // on the leader
	}{
		{"pin a plan", func(ctx context.Context, o ...grpc.CallOption) error {
			_, err := plans.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "job1", Nodes: "node[001-002]"}, o...)
			return err
		}, func() bool { _, ok := onLeader().Plan("job1"); return ok }},
		{"delete the plan", func(ctx context.Context, o ...grpc.CallOption) error {
			_, err := plans.DeletePlan(ctx, &ginv1.DeletePlanRequest{JobId: "job1"}, o...)
			return err
		}, func() bool { _, ok := onLeader().Plan("job1"); return !ok }},
		{"import a measurement", func(ctx context.Context, o ...grpc.CallOption) error {
			r, err := calib.ImportMeasurement(ctx, &ginv1.ImportMeasurementRequest{
				Nodes: "node[001-002]", GpusPerNode: 8, Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE,
				Algorithm: ginv1.Algorithm_ALGORITHM_TREE, ForcedBy: "flag", NcclVersion: "2.21.5", Source: "x.log:1",
				Points: []*ginv1.MeasuredPoint{{Bytes: 1 << 20, TimeUs: 60, BusBwGbps: 30}, {Bytes: 1 << 30, TimeUs: 11000, BusBwGbps: 180}},
			}, o...)
			measurement = r.GetMeasurement().GetId()
			return err
		}, func() bool { _, ok := onLeader().Measurement(measurement); return measurement != "" && ok }},
		{"delete the measurement", func(ctx context.Context, o ...grpc.CallOption) error {
			_, err := calib.DeleteMeasurement(ctx, &ginv1.DeleteMeasurementRequest{Id: measurement}, o...)
			return err
		}, func() bool { _, ok := onLeader().Measurement(measurement); return !ok }},
		{"deny a certificate", func(ctx context.Context, o ...grpc.CallOption) error {
			_, err := admin.DenyCertificate(ctx, &ginv1.DenyCertificateRequest{Serial: "0A1B2C3D", Reason: "lost"}, o...)
			return err
		}, func() bool { _, ok := onLeader().DeniedCertificate("0A1B2C3D"); return ok }},
		{"allow it again", func(ctx context.Context, o ...grpc.CallOption) error {
			_, err := admin.AllowCertificate(ctx, &ginv1.AllowCertificateRequest{Serial: "0A1B2C3D"}, o...)
			return err
		}, func() bool { _, ok := onLeader().DeniedCertificate("0A1B2C3D"); return !ok }},
		{"delete a node", func(ctx context.Context, o ...grpc.CallOption) error {
			_, err := admin.DeleteNode(ctx, &ginv1.DeleteNodeRequest{NodeName: "node003"}, o...)
			return err
		}, func() bool { _, ok := onLeader().Node("node003"); return !ok }},
		{"import a fabric", func(ctx context.Context, o ...grpc.CallOption) error {
			_, err := admin.ImportFabric(ctx, &ginv1.ImportFabricRequest{Fabric: &ginv1.FabricTopology{Source: "forward-test"}}, o...)
			return err
		}, func() bool { return onLeader().View().Fabric().GetSource() == "forward-test" }},
		{"read consistently", func(ctx context.Context, o ...grpc.CallOption) error {
			r, err := topo.ListNodes(ctx, &ginv1.ListNodesRequest{Consistency: ginv1.ReadConsistency_READ_CONSISTENCY_CONSISTENT}, o...)
			if err == nil && (r.GetRead().GetServedBy() == follower.s.cfg.ID || !r.GetRead().GetLeader()) {
				t.Errorf("consistent read through %s served by %q (leader %v), want a leader's answer",
					follower.s.cfg.ID, r.GetRead().GetServedBy(), r.GetRead().GetLeader())
			}
			return err
		}, func() bool { return true }},
	}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var trl metadata.MD
		err := tc.call(ctx, grpc.Trailer(&trl))
		cancel()
		if err != nil {
			t.Fatalf("%s through follower %s: %v, want the leader's answer", tc.name, follower.s.cfg.ID, err)
		}
		if h := apierr.LeaderHint(trl); h != "" {
			t.Errorf("%s: the follower sent leader hint %q with a forwarded answer", tc.name, h)
		}
		if !tc.committed() {
			t.Errorf("%s: answered through the follower but not committed on the leader", tc.name)
		}
	}
	// Removing a member is a write too.
	victim := followerOf(ms, leader)
	for _, m := range ms {
		if m != leader && m != follower {
			victim = m
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := admin.RemoveServer(ctx, &ginv1.RemoveServerRequest{ServerId: victim.s.cfg.ID}); err != nil {
		t.Fatalf("remove %s through follower %s: %v", victim.s.cfg.ID, follower.s.cfg.ID, err)
	}
	if n := len(leaderNow(t, ms).s.node.Stats().Members); n != 2 {
		t.Fatalf("%d members after a removal through a follower, want 2", n)
	}
}

// TestForwardedRefusalsAreTheLeaders: what the leader refuses reaches the
// client as the leader said it, through the follower.
func TestForwardedRefusalsAreTheLeaders(t *testing.T) {
	_, _, follower := formedWithNodes(t, "node001")
	conn := dialPlain(t, follower.s.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The plan's placement is checked on the leader, which knows no
	// node009 (the follower's handler passed it on: no plan pinned).
	_, err := ginv1.NewPlanServiceClient(conn).GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "j", Nodes: "node[001,009]"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("a plan for an unknown node through a follower: %v, want the leader's NOT_FOUND", err)
	}
}

// TestForwardingOverTLSActsForTheCaller: with mTLS the leader checks the
// table against the caller the follower forwards for, not against the
// follower's master certificate: an admin's deny names the admin, an
// agent pins a plan for its own node only, and a reader's write is refused.
func TestForwardingOverTLSActsForTheCaller(t *testing.T) {
	p := newTestPKI(t)
	ms := startClusterWith(t, 3, func(c *Config) {
		c.TLS = p.source(t, pki.Identity{Role: pki.RoleMaster, Name: c.ID})
	})
	waitUntil(t, "3 masters to form over TLS", func() bool { return formed(ms) })
	leader := registerOnLeader(t, ms, "node001", "node002")
	follower := followerOf(ms, leader)
	index := leader.s.store.Index()
	waitUntil(t, "the follower to apply the nodes", func() bool { return follower.s.store.Index() >= index })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	admin := pki.Identity{Role: pki.RoleAdmin, Name: "ops"}
	r, err := ginv1.NewAdminServiceClient(p.dial(t, follower.s.Addr(), admin)).DenyCertificate(ctx,
		&ginv1.DenyCertificateRequest{Serial: "0A1B2C3D", Reason: "lost"})
	if err != nil {
		t.Fatalf("an admin's deny through a follower: %v", err)
	}
	if got := r.GetEntry().GetDeniedBy(); got != admin.String() {
		t.Fatalf("a deny forwarded for %s is recorded as denied by %q", admin, got)
	}

	agent := ginv1.NewPlanServiceClient(p.dial(t, follower.s.Addr(), pki.Identity{Role: pki.RoleAgent, Name: "node001"}))
	if _, err := agent.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "own", Nodes: "node001"}); err != nil {
		t.Fatalf("an agent's plan for its own node through a follower: %v", err)
	}
	if _, err := agent.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "other", Nodes: "node002"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("an agent's plan for another node through a follower: %v, want PERMISSION_DENIED", err)
	}
	reader := ginv1.NewPlanServiceClient(p.dial(t, follower.s.Addr(), pki.Identity{Role: pki.RoleReader}))
	if _, err := reader.DeletePlan(ctx, &ginv1.DeletePlanRequest{JobId: "own"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a reader's plan delete through a follower: %v, want PERMISSION_DENIED", err)
	}
	if _, ok := leader.s.store.Plan("own"); !ok {
		t.Fatal("the reader's refused delete removed the plan")
	}
}

// TestForwardingWaitsOutAFailover: a write sent to a follower right after
// the leader died commits on the next leader, through the same follower
// (the follower retries while the dead leader is unreachable and while
// none is elected), as clients' own walks did before forwarding.
func TestForwardingWaitsOutAFailover(t *testing.T) {
	ms, leader, _ := formedWithNodes(t, "node001")
	leader.crash()
	var follower *member
	for _, m := range ms {
		if !m.dead {
			follower = m
			break
		}
	}
	conn := dialPlain(t, follower.s.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := ginv1.NewPlanServiceClient(conn).GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "after-failover", Nodes: "node001"}); err != nil {
		t.Fatalf("a write through %s right after the leader died: %v, want it committed by the next leader", follower.s.cfg.ID, err)
	}
	next := leaderNow(t, ms)
	if err := next.s.node.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := next.s.store.Plan("after-failover"); !ok {
		t.Fatalf("the next leader %s does not hold the plan the follower acknowledged", next.s.cfg.ID)
	}
}

// TestForwardingDoesNotHoldTheClientsDeadline: a follower waits for a
// leader to forward to only while it may still help the client. A leader
// known by id whose client address this master's state lacks (its data dir
// is full, so it applied no registration since) is not waited for, and an
// election is waited out for at most half of what is left of the caller's
// deadline, so the client can still ask another master.
func TestForwardingDoesNotHoldTheClientsDeadline(t *testing.T) {
	refusal := status.Error(codes.FailedPrecondition, "not the leader")
	tests := []struct {
		name      string
		leaderID  string
		deadline  time.Duration // 0: none
		wantCalls func(int) bool
	}{
		{"leader known, address unknown", "m2", 0, func(n int) bool { return n == 1 }},
		{"election, bounded by the deadline", "", 2 * time.Second, func(n int) bool { return n >= 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			calls := 0
			f := &forwarder{id: "m1", leads: func() bool { return false }, notLeader: func() error { return refusal },
				leader: func() (*grpc.ClientConn, error) {
					// A forwarder that keeps waiting is stopped (and fails
					// below) instead of holding the test for its hour.
					if calls++; tt.deadline == 0 && calls > 3 {
						stop()
					}
					return nil, errNoLeader
				},
				leaderID: func() string { return tt.leaderID }, hold: time.Hour, wait: 10 * time.Millisecond}
			_, err := f.forward(ctx, ginv1.PlanService_DeletePlan_FullMethodName, &ginv1.DeletePlanRequest{JobId: "1"}, refusal)
			if tt.deadline > 0 && ctx.Err() != nil {
				t.Fatalf("forward returned after the caller's deadline (%d leader lookups)", calls)
			}
			if err != refusal || !tt.wantCalls(calls) {
				t.Fatalf("forward = %v after %d leader lookups, want this master's refusal", err, calls)
			}
		})
	}
}
