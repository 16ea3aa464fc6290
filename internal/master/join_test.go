package master

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	ginraft "github.com/gin-topology/gin/internal/raft"
)

// Join checks the server id against the Raft server-id limit (not another
// field's), and a refused Join changes neither the membership nor the state.
func TestJoinRejectsBadServerIDs(t *testing.T) {
	s, conn := startServer(t, time.Second)
	admin := ginv1.NewAdminServiceClient(conn)
	tests := []struct {
		name string
		id   string
	}{
		{"empty", ""},
		{"one byte over the limit", strings.Repeat("m", ginraft.MaxServerIDLen+1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			before, members := s.store.Index(), len(s.node.Stats().Members)
			_, err := admin.Join(ctx, &ginv1.JoinRequest{ServerId: tc.id, RaftAddress: "127.0.0.1:1"})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "server_id") {
				t.Fatalf("Join(%d-byte id) = %v, want InvalidArgument about server_id", len(tc.id), err)
			}
			if s.store.Index() != before || len(s.node.Stats().Members) != members {
				t.Fatal("a refused Join changed the state or the membership")
			}
		})
	}
}

// unchanged fails the test if the membership or the replicated state moved.
func unchanged(t *testing.T, s *Server, index uint64, members []ginraft.Member) {
	t.Helper()
	if s.store.Index() != index {
		t.Fatalf("a refused Join changed the state: index %d, was %d", s.store.Index(), index)
	}
	got := s.node.Stats().Members
	if len(got) != len(members) {
		t.Fatalf("a refused Join changed the membership: %v, was %v", got, members)
	}
	for i := range got {
		if got[i] != members[i] {
			t.Fatalf("a refused Join changed the membership: %v, was %v", got, members)
		}
	}
}

// freeAddr is a loopback TCP address where nothing listens.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// listening is a loopback TCP address where something accepts.
func listening(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l.Addr().String()
}

// Join names the cluster: a master of another cluster, or one naming none
// once the cluster has an id, is refused and changes nothing.
func TestJoinRequiresTheClusterID(t *testing.T) {
	s, conn := startServer(t, time.Second)
	admin := ginv1.NewAdminServiceClient(conn)
	cid := s.store.ClusterID()
	tests := []struct {
		name, clusterID, want string
	}{
		{"no cluster id", "", "names no cluster id, this is cluster " + cid},
		{"another cluster", "0123456789abcdef", "belongs to cluster 0123456789abcdef, this is cluster " + cid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			before, members := s.store.Index(), s.node.Stats().Members
			_, err := admin.Join(ctx, &ginv1.JoinRequest{ServerId: "m9", RaftAddress: listening(t), ClientAddress: listening(t), ClusterId: tc.clusterID})
			if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Join = %v, want FailedPrecondition saying %q", err, tc.want)
			}
			unchanged(t, s, before, members)
		})
	}
}

// The leader dials a joining server's Raft address before adding it: one
// nobody can reach is refused and never becomes a voter (even admitted).
func TestJoinRefusesAnUnreachableRaftAddress(t *testing.T) {
	s, conn := startServer(t, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := ginv1.NewAdminServiceClient(conn).AdmitServer(ctx, &ginv1.AdmitServerRequest{ServerId: "m9"}); err != nil {
		t.Fatal(err)
	}
	before, members := s.store.Index(), s.node.Stats().Members
	dead := freeAddr(t)
	_, err := ginv1.NewAdminServiceClient(conn).Join(ctx, &ginv1.JoinRequest{ServerId: "m9", RaftAddress: dead, ClientAddress: listening(t), ClusterId: s.store.ClusterID()})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), dead) || !strings.Contains(err.Error(), "cannot be dialled") {
		t.Fatalf("Join with nothing on %s = %v, want FailedPrecondition naming the address", dead, err)
	}
	unchanged(t, s, before, members)
}

// Join never changes the Raft or client address of an existing server;
// the refusal names both addresses.
func TestJoinNeverMovesAnExistingServer(t *testing.T) {
	ms := startCluster(t, 3)
	waitUntil(t, "the cluster", func() bool { return formed(ms) })
	leader := leaderOf(ms)
	victim := followerOf(ms, leader)
	rec, ok := leader.s.store.Server(victim.s.cfg.ID)
	if !ok {
		t.Fatalf("%s not registered", victim.s.cfg.ID)
	}
	conn, err := grpc.NewClient(leader.s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	other := listening(t)
	tests := []struct {
		name, raft, client, have string
	}{
		{"another raft address", other, rec.GetClientAddress(), rec.GetRaftAddress()},
		{"another client address", rec.GetRaftAddress(), other, rec.GetClientAddress()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			before, members := leader.s.store.Index(), leader.s.node.Stats().Members
			_, err := ginv1.NewAdminServiceClient(conn).Join(ctx, &ginv1.JoinRequest{ServerId: victim.s.cfg.ID, RaftAddress: tc.raft, ClientAddress: tc.client, ClusterId: leader.s.store.ClusterID()})
			if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), tc.have) || !strings.Contains(err.Error(), other) ||
				!strings.Contains(err.Error(), "ginctl members remove "+victim.s.cfg.ID) {
				t.Fatalf("Join moving %s = %v, want FailedPrecondition naming %s and %s", victim.s.cfg.ID, err, tc.have, other)
			}
			if leaderOf(ms) == leader {
				unchanged(t, leader.s, before, members)
			}
		})
	}
	// The legitimate repeat (same addresses, as registerSelf sends) is
	// still accepted.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := ginv1.NewAdminServiceClient(conn).Join(ctx, &ginv1.JoinRequest{ServerId: victim.s.cfg.ID, RaftAddress: rec.GetRaftAddress(), ClientAddress: rec.GetClientAddress(), ClusterId: leader.s.store.ClusterID()}); err != nil && !apierr.IsNotLeader(err) {
		t.Fatalf("repeated Join with the same addresses: %v", err)
	}
}

// Leader-hint poisoning: a Join naming the leader with another client
// address (an attacker's) must not change the hint followers hand clients.
func TestJoinCannotPoisonLeaderHints(t *testing.T) {
	ms := startCluster(t, 3)
	waitUntil(t, "the cluster", func() bool { return formed(ms) })
	leader := leaderOf(ms)
	rec, _ := leader.s.store.Server(leader.s.cfg.ID)
	attacker := listening(t)
	conn, err := grpc.NewClient(leader.s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = ginv1.NewAdminServiceClient(conn).Join(ctx, &ginv1.JoinRequest{ServerId: leader.s.cfg.ID, RaftAddress: rec.GetRaftAddress(), ClientAddress: attacker, ClusterId: leader.s.store.ClusterID()})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Join pointing %s's client address at %s = %v, want FailedPrecondition", leader.s.cfg.ID, attacker, err)
	}
	if leaderOf(ms) != leader {
		t.Skip("leadership moved during the test; the hint check needs a stable leader")
	}
	// A committed write after the attempt: once a follower has applied it,
	// it has applied anything the attempt could have written.
	if _, err := leader.s.putInventory(ctx, simInventory(t, "dgx-h100", "node001")); err != nil {
		t.Fatal(err)
	}
	index := leader.s.store.Index()
	for _, f := range ms {
		if f == leader {
			continue
		}
		waitUntil(t, f.s.cfg.ID+" to apply the write", func() bool { return f.s.store.Index() >= index })
		fconn, err := grpc.NewClient(f.s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		job := "hint-" + f.s.cfg.ID
		_, err = ginv1.NewPlanServiceClient(fconn).GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: job, Nodes: "node001"})
		_ = fconn.Close()
		if err != nil {
			t.Fatalf("%s: GetOrCreatePlan = %v, want it forwarded to the leader", f.s.cfg.ID, err)
		}
		if _, ok := leader.s.store.Plan(job); !ok {
			t.Fatalf("%s forwarded a plan that is not on the leader (attacker %s)", f.s.cfg.ID, attacker)
		}
		if got := f.s.leaderHint(); got != leader.s.Addr() {
			t.Fatalf("%s knows the leader at %q, want %s (attacker %s)", f.s.cfg.ID, got, leader.s.Addr(), attacker)
		}
	}
}
