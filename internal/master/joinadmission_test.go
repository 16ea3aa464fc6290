package master

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// TestJoinNeedsAnAdmission: a first boot (--bootstrap-expect) forms with
// no admission; a fresh master then joins only once an admin admitted it,
// at the address the admission names; the admission is used once; and a
// member needs none (it cannot be admitted again), while removing an
// admitted master that never joined takes the admission back.
func TestJoinNeedsAnAdmission(t *testing.T) {
	ms := startCluster(t, 3)
	waitUntil(t, "the cluster formed with no admission", func() bool { return formed(ms) })
	leader := leaderOf(ms)
	conn, err := grpc.NewClient(leader.s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	admin := ginv1.NewAdminServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// m4: a real master, not serving yet (its Raft port answers the dial).
	var join []string
	for _, m := range ms {
		join = append(join, m.s.Addr())
	}
	m4s, err := New(Config{ID: "m4", Bind: "127.0.0.1:0", RaftBind: "127.0.0.1:0", DataDir: t.TempDir(), Join: join,
		FastRaft: true, HeartbeatInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	m4 := &member{s: m4s, done: make(chan error, 1)}
	joinReq := &ginv1.JoinRequest{ServerId: "m4", RaftAddress: m4s.node.Addr(), ClientAddress: m4s.Addr(), ClusterId: leader.s.store.ClusterID()}
	refused := func(what, want string) {
		t.Helper()
		before := len(leader.s.node.Stats().Members)
		_, err := admin.Join(ctx, joinReq)
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: Join = %v, want FailedPrecondition saying %q", what, err, want)
		}
		if got := len(leader.s.node.Stats().Members); got != before {
			t.Fatalf("%s: a refused Join changed the membership: %d servers, was %d", what, got, before)
		}
	}
	refused("no admission", "no admin admitted it: joining needs an admin's word (ginctl members add m4")
	if _, err := admin.AdmitServer(ctx, &ginv1.AdmitServerRequest{ServerId: "m4", RaftAddress: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	refused("admitted at another address", "was admitted at Raft address 127.0.0.1:1, this join names "+m4s.node.Addr())
	// Bad admissions change nothing.
	for _, bad := range []*ginv1.AdmitServerRequest{{ServerId: ""}, {ServerId: "m5", RaftAddress: "no-port"}, {ServerId: strings.Repeat("x", 200)}} {
		if _, err := admin.AdmitServer(ctx, bad); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("AdmitServer(%q, %q) = %v, want InvalidArgument", bad.GetServerId(), bad.GetRaftAddress(), err)
		}
	}
	if _, err := admin.AdmitServer(ctx, &ginv1.AdmitServerRequest{ServerId: ms[0].s.cfg.ID}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("AdmitServer of a member = %v, want FailedPrecondition (a member needs none)", err)
	}

	// Admitted at its address: it joins by itself once it serves.
	if _, err := admin.AdmitServer(ctx, &ginv1.AdmitServerRequest{ServerId: "m4", RaftAddress: m4s.node.Addr()}); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithCancel(context.Background())
	m4.cancel = scancel
	go func() { m4.done <- m4s.Serve(sctx) }()
	t.Cleanup(m4.stop)
	all := append(ms, m4)
	waitUntil(t, "m4 a voter", func() bool { l := leaderOf(all); return l != nil && len(l.s.node.Stats().Members) == 4 })
	waitUntil(t, "m4's admission used up on every master", func() bool {
		for _, m := range all {
			if _, ok := m.s.store.Admission("m4"); ok {
				return false
			}
		}
		return true
	})

	// An admission that is never used is taken back by members remove.
	if _, err := admin.AdmitServer(ctx, &ginv1.AdmitServerRequest{ServerId: "m7"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RemoveServer(ctx, &ginv1.RemoveServerRequest{ServerId: "m7"}); err != nil {
		t.Fatalf("members remove of an admitted master: %v", err)
	}
	if _, ok := leader.s.store.Admission("m7"); ok {
		t.Fatal("members remove left m7's admission")
	}
	if _, err := admin.RemoveServer(ctx, &ginv1.RemoveServerRequest{ServerId: "m7"}); status.Code(err) != codes.NotFound {
		t.Fatalf("members remove of a name neither member nor admitted: %v, want NotFound", err)
	}
}
