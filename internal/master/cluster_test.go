package master

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/testkit"
)

type member struct {
	s      *Server
	cancel context.CancelFunc
	done   chan error
	dead   bool
}

// startCluster starts n masters on loopback with real Raft over TCP, each
// with --bootstrap-expect n and --join naming all of them.
func startCluster(t testing.TB, n int) []*member {
	t.Helper()
	return startClusterWith(t, n, func(*Config) {})
}

func startClusterWith(t testing.TB, n int, mod func(*Config)) []*member {
	t.Helper()
	var ms []*member
	var addrs []string
	for i := range n {
		cfg := Config{ID: fmt.Sprintf("m%d", i+1), Bind: "127.0.0.1:0", RaftBind: "127.0.0.1:0", DataDir: t.TempDir(),
			BootstrapExpect: n, FastRaft: true, HeartbeatInterval: time.Second, Logger: slog.New(slog.DiscardHandler)}
		mod(&cfg)
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, &member{s: s, done: make(chan error, 1)})
		addrs = append(addrs, s.Addr())
	}
	for _, m := range ms {
		m.s.cfg.Join = addrs
		ctx, cancel := context.WithCancel(context.Background())
		m.cancel = cancel
		go func() { m.done <- m.s.Serve(ctx) }()
		t.Cleanup(func() { m.stop() })
	}
	return ms
}

func (m *member) stop() {
	if m.dead {
		return
	}
	m.dead = true
	m.cancel()
	<-m.done
	_ = m.s.Close()
}

// crash stops a master without a leadership transfer (as kill -9 would).
func (m *member) crash() {
	m.dead = true
	m.s.grpc.Stop()
	m.cancel()
	<-m.done
	_ = m.s.node.Shutdown()
}

func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testkit.WaitFor(t, 30*time.Second, what, cond)
}

func leaderOf(ms []*member) *member {
	for _, m := range ms {
		if !m.dead && m.s.node.IsLeader() {
			return m
		}
	}
	return nil
}

// leaderNow waits until one of ms leads and returns it: under load a
// leader can step down between two statements of a test, and a nil leader
// would panic the test instead of waiting out the election.
func leaderNow(t testing.TB, ms []*member) *member {
	t.Helper()
	var l *member
	waitUntil(t, "a leader", func() bool { l = leaderOf(ms); return l != nil })
	return l
}

func formed(ms []*member) bool {
	for _, m := range ms {
		if m.dead {
			continue
		}
		if len(m.s.store.Servers()) != len(ms) || m.s.store.ClusterID() == "" {
			return false
		}
	}
	return leaderOf(ms) != nil
}

func TestThreeMastersFormFailOverAndKeepAcknowledgedWrites(t *testing.T) {
	ms := startCluster(t, 3)
	waitUntil(t, "3 masters to bootstrap, elect and register", func() bool { return formed(ms) })
	leader := leaderOf(ms)
	cid := leader.s.store.ClusterID()
	for _, m := range ms {
		if got := m.s.store.ClusterID(); got != cid {
			t.Fatalf("%s has cluster id %q, leader %q", m.s.cfg.ID, got, cid)
		}
	}

	// A follower holds agent sessions: it answers the hello itself and
	// relays the inventory to the leader, and acknowledges it only once
	// the leader has committed it.
	var follower *member
	for _, m := range ms {
		if m != leader {
			follower = m
			break
		}
	}
	conn, err := grpc.NewClient(follower.s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	inv := simInventory(t, "dgx-h100", "node000")
	sess, ack := openSession(t, conn, inv)
	if ack == nil || ack.GetHeldGeneration() != 0 || ack.GetInSync() {
		t.Fatalf("follower's hello ack = %v, want held generation 0, not in sync", ack)
	}
	inv.Generation = 1
	iack, err := sess.send(inv)
	if err != nil || iack.GetAcceptedGeneration() != 1 {
		t.Fatalf("inventory through a follower: ack %v, %v; want generation 1", iack, err)
	}
	if rec, ok := leader.s.store.Node("node000"); !ok || rec.GetInventory().GetGeneration() != 1 || rec.GetUpdatedIndex() != iack.GetIndex() {
		t.Fatalf("the leader holds %v when the follower acknowledged index %d; want generation 1 committed first", rec, iack.GetIndex())
	}
	// A refusal of the leader reaches the agent as the leader said it.
	bad := proto.CloneOf(inv)
	bad.Generation = 2
	bad.Gpus[0].PciBusId = "unknown"
	if _, err := sess.send(bad); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad inventory through a follower: %v, want INVALID_ARGUMENT", err)
	}
	if rec, _ := leader.s.store.Node("node000"); rec.GetInventory().GetGeneration() != 1 {
		t.Fatalf("a refused inventory changed the leader's copy to generation %d", rec.GetInventory().GetGeneration())
	}
	// A unary write sent to the follower is forwarded to the leader
	// (forward.go): the client follows no hint.
	var trl metadata.MD
	if _, err := ginv1.NewPlanServiceClient(conn).GetOrCreatePlan(context.Background(),
		&ginv1.GetOrCreatePlanRequest{JobId: "pinned-through-a-follower", Nodes: "node000"}, grpc.Trailer(&trl)); err != nil {
		t.Fatalf("GetOrCreatePlan on a follower = %v, want the leader's plan", err)
	}
	if _, ok := leader.s.store.Plan("pinned-through-a-follower"); !ok {
		t.Fatal("a plan pinned through a follower is not on the leader")
	}
	if got := trl.Get(apierr.LeaderHintKey); len(got) != 0 {
		t.Fatalf("a forwarded answer carries leader hint %v", got)
	}

	// Acknowledged writes on the leader.
	acked := []string{"node001", "node002", "node003"}
	for _, n := range acked {
		i := simInventory(t, "dgx-h100", n)
		i.Generation = 1
		if _, err := leader.s.putInventory(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}

	// A server of another cluster cannot join.
	lconn, err := grpc.NewClient(leader.s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer lconn.Close()
	if _, err := ginv1.NewAdminServiceClient(lconn).Join(context.Background(), &ginv1.JoinRequest{ServerId: "x", RaftAddress: "127.0.0.1:1", ClusterId: "another"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("join from another cluster: %v, want FailedPrecondition", err)
	}

	// The leader crashes: a new one is elected and has every acknowledged write.
	start := time.Now()
	leader.crash()
	var next *member
	waitUntil(t, "a new leader", func() bool { next = leaderOf(ms); return next != nil })
	t.Logf("new leader %s after %s", next.s.cfg.ID, time.Since(start))
	if err := next.s.node.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, n := range acked {
		if _, ok := next.s.store.Node(n); !ok {
			t.Fatalf("acknowledged write %s lost after failover", n)
		}
	}
	i := simInventory(t, "pcie-8gpu", "node004")
	i.Generation = 1
	if _, err := next.s.putInventory(context.Background(), i); err != nil {
		t.Fatalf("write after failover: %v", err)
	}
	// The dead server can be removed.
	nconn, err := grpc.NewClient(next.s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer nconn.Close()
	if _, err := ginv1.NewAdminServiceClient(nconn).RemoveServer(context.Background(), &ginv1.RemoveServerRequest{ServerId: leader.s.cfg.ID}); err != nil {
		t.Fatalf("remove the dead server: %v", err)
	}
	if n := len(next.s.node.Stats().Members); n != 2 {
		t.Fatalf("%d members after removal, want 2", n)
	}
}

func TestPlannedShutdownTransfersLeadership(t *testing.T) {
	ms := startCluster(t, 3)
	waitUntil(t, "the cluster", func() bool { return formed(ms) })
	leader := leaderOf(ms)
	leader.stop() // SIGTERM path: Close transfers leadership first
	var next *member
	waitUntil(t, "a new leader", func() bool { next = leaderOf(ms); return next != nil })
	if next == leader {
		t.Fatal("the stopped server is still leader")
	}
}

// A voter failing heartbeats past the timeout is removed by the leader; when
// it comes back (same data directory) it rejoins through --join.
func TestDeadServerCleanupAndRejoin(t *testing.T) {
	ms := startClusterWith(t, 3, func(c *Config) { c.DeadServerTimeout = time.Second })
	waitUntil(t, "the cluster", func() bool { return formed(ms) })
	leader := leaderOf(ms)
	victim := followerOf(ms, leader)
	id, dir := victim.s.cfg.ID, victim.s.cfg.DataDir
	victim.crash()
	waitUntil(t, "the dead server to be removed", func() bool {
		l := leaderOf(ms)
		return l != nil && len(l.s.node.Stats().Members) == 2
	})

	// It comes back with its data directory (and a new Raft port).
	var join []string
	for _, m := range ms {
		if !m.dead {
			join = append(join, m.s.Addr())
		}
	}
	s, err := New(Config{ID: id, Bind: "127.0.0.1:0", RaftBind: "127.0.0.1:0", DataDir: dir, Join: join,
		FastRaft: true, HeartbeatInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	back := &member{s: s, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	back.cancel = cancel
	go func() { back.done <- s.Serve(ctx) }()
	t.Cleanup(back.stop)
	waitUntil(t, "the server to rejoin", func() bool {
		l := leaderOf(ms)
		if l == nil || len(l.s.node.Stats().Members) != 3 {
			return false
		}
		lid, _ := s.node.Leader()
		return lid != ""
	})
}

// A master an operator removed while it runs loses its leader and tries to
// join again through --join: refused, its name opens nothing, until an
// admin admits it again (ginctl members add); then it rejoins without a
// restart. (Dead-server cleanup admits the server it removes itself:
// TestDeadServerCleanupAndRejoin.)
func TestRemovedRunningServerRejoinsOnceAdmitted(t *testing.T) {
	ms := startCluster(t, 3)
	waitUntil(t, "the cluster", func() bool { return formed(ms) })
	leader := leaderOf(ms)
	victim := followerOf(ms, leader)
	conn, err := grpc.NewClient(leader.s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	admin := ginv1.NewAdminServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.RemoveServer(ctx, &ginv1.RemoveServerRequest{ServerId: victim.s.cfg.ID}); err != nil {
		t.Fatalf("remove %s: %v", victim.s.cfg.ID, err)
	}
	waitUntil(t, "the removal", func() bool {
		l := leaderOf(ms)
		return l != nil && len(l.s.node.Stats().Members) == 2
	})
	// Its own Join, as formCluster sends it, is refused naming the step.
	_, err = admin.Join(ctx, &ginv1.JoinRequest{ServerId: victim.s.cfg.ID, RaftAddress: victim.s.node.Addr(), ClientAddress: victim.s.Addr(), ClusterId: leader.s.store.ClusterID()})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "ginctl members add "+victim.s.cfg.ID) {
		t.Fatalf("the removed master's Join: %v, want FailedPrecondition naming ginctl members add", err)
	}
	if n := len(leader.s.node.Stats().Members); n != 2 {
		t.Fatalf("a refused Join changed the membership: %d servers", n)
	}
	if _, err := admin.AdmitServer(ctx, &ginv1.AdmitServerRequest{ServerId: victim.s.cfg.ID, RaftAddress: victim.s.node.Addr()}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the removed server to rejoin", func() bool {
		l := leaderOf(ms)
		if l == nil || len(l.s.node.Stats().Members) != 3 {
			return false
		}
		lid, _ := victim.s.node.Leader()
		return lid == l.s.cfg.ID
	})
	// Used once: the admission is gone once it registered.
	waitUntil(t, "the admission used up", func() bool { _, ok := leaderNow(t, ms).s.store.Admission(victim.s.cfg.ID); return !ok })
}

// followerOf is some member other than leader.
func followerOf(ms []*member, leader *member) *member {
	for _, m := range ms {
		if m != leader {
			return m
		}
	}
	return nil
}
