package master

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/authz"
	"github.com/gin-topology/gin/internal/inventory"
	"github.com/gin-topology/gin/internal/pki"
)

type testPKI struct {
	dir string
	ca  *pki.CA
	mu  sync.Mutex
	// sources are the certificates source issued, by identity.
	sources map[pki.Identity]*pki.Source
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.CreateCA(dir, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &testPKI{dir: dir, ca: ca, sources: map[pki.Identity]*pki.Source{}}
}

// source is id's certificate in p.dir, issued on first use.
func (p *testPKI) source(t testing.TB, id pki.Identity) *pki.Source {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.sources[id]; ok {
		return s
	}
	s := p.sourceIn(t, p.dir, id)
	p.sources[id] = s
	return s
}

// sourceIn issues a certificate for id into dir (another dir than p.dir:
// a second certificate of the same identity, as a renewal makes).
func (p *testPKI) sourceIn(t testing.TB, dir string, id pki.Identity) *pki.Source {
	t.Helper()
	cert, key, err := p.ca.IssueToDir(dir, pki.CertRequest{Identity: id}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	src, err := pki.NewSource(pki.Files{CA: filepath.Join(p.dir, pki.CAFile), Cert: cert, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func (p *testPKI) dial(t *testing.T, addr string, id pki.Identity) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(pki.ClientCredentialsFrom(p.source(t, id))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func startTLSServer(t *testing.T, p *testPKI) *Server {
	t.Helper()
	return startServerWith(t, func(c *Config) { c.TLS = p.source(t, pki.Identity{Role: pki.RoleMaster, Name: "m1"}) })
}

// startServerWith starts a single bootstrapped master with mod applied to
// its configuration and waits until it leads and is registered.
func startServerWith(t *testing.T, mod func(*Config)) *Server {
	t.Helper()
	cfg := Config{ID: "m1", Bind: "127.0.0.1:0", RaftBind: "127.0.0.1:0", DataDir: t.TempDir(),
		Bootstrap: true, FastRaft: true, HeartbeatInterval: time.Second, MissedHeartbeats: 3}
	mod(&cfg)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-served
		_ = s.Close()
	})
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := s.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	for !s.node.IsLeader() || s.store.ClusterID() == "" || !registered(s) {
		select {
		case <-wctx.Done():
			t.Fatal("no leadership")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return s
}

// TestEveryServedMethodHasARow: every method the master's gRPC server
// serves has a row in the authorization table.
func TestEveryServedMethodHasARow(t *testing.T) {
	s, _ := startServer(t, time.Second)
	table := authz.Table()
	n := 0
	for svc, info := range s.grpc.GetServiceInfo() {
		for _, m := range info.Methods {
			n++
			if _, ok := table["/"+svc+"/"+m.Name]; !ok {
				t.Errorf("/%s/%s is served and has no row in internal/authz/table.go", svc, m.Name)
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d methods served", n)
	}
}

// TestTLSMaster runs a master with mTLS and the table: plaintext clients
// are refused, roles are enforced, and an agent certificate for node001
// cannot write node002.
func TestTLSMaster(t *testing.T) {
	p := newTestPKI(t)
	s := startTLSServer(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	plain, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := ginv1.NewAdminServiceClient(plain).RemoveServer(ctx, &ginv1.RemoveServerRequest{ServerId: "m1"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext RemoveServer: %v, want Unavailable (no TLS, no connection)", err)
	}

	reader := p.dial(t, s.Addr(), pki.Identity{Role: pki.RoleReader})
	if _, err := ginv1.NewTopologyServiceClient(reader).ListNodes(ctx, &ginv1.ListNodesRequest{}); err != nil {
		t.Fatalf("reader ListNodes: %v", err)
	}
	for name, call := range map[string]func() error{
		"ImportFabric{}": func() error {
			_, err := ginv1.NewAdminServiceClient(reader).ImportFabric(ctx, &ginv1.ImportFabricRequest{})
			return err
		},
		"RemoveServer": func() error {
			_, err := ginv1.NewAdminServiceClient(reader).RemoveServer(ctx, &ginv1.RemoveServerRequest{ServerId: "m1"})
			return err
		},
		"DeletePlan": func() error {
			_, err := ginv1.NewPlanServiceClient(reader).DeletePlan(ctx, &ginv1.DeletePlanRequest{JobId: "777"})
			return err
		},
	} {
		if err := call(); status.Code(err) != codes.PermissionDenied {
			t.Errorf("reader %s: %v, want PermissionDenied", name, err)
		}
	}
	admin := p.dial(t, s.Addr(), pki.Identity{Role: pki.RoleAdmin})
	if _, err := ginv1.NewAdminServiceClient(admin).Join(ctx, &ginv1.JoinRequest{ServerId: "m9", RaftAddress: "127.0.0.1:1"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("forged Join with an admin certificate: %v, want PermissionDenied", err)
	}
	m2 := p.dial(t, s.Addr(), pki.Identity{Role: pki.RoleMaster, Name: "m2"})
	if _, err := ginv1.NewAdminServiceClient(m2).Join(ctx, &ginv1.JoinRequest{ServerId: "m9", RaftAddress: "127.0.0.1:1"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("Join as m9 with m2's certificate: %v, want PermissionDenied", err)
	}
	if info, err := ginv1.NewAdminServiceClient(admin).GetClusterInfo(ctx, &ginv1.GetClusterInfoRequest{}); err != nil || len(info.GetMembers()) != 1 {
		t.Fatalf("membership changed: %v, %v", info.GetMembers(), err)
	}

	agent := p.dial(t, s.Addr(), pki.Identity{Role: pki.RoleAgent, Name: "node001"})
	// node001's certificate says hello as node002: refused, nothing stored.
	_, ack := openSession(t, agent, simInventory(t, "dgx-h100", "node002"))
	if ack != nil {
		t.Fatalf("node001's certificate opened a session as node002: %v", ack)
	}
	if _, ok := s.store.Node("node002"); ok {
		t.Fatal("node002 was stored")
	}
	st, err := ginv1.NewAgentServiceClient(agent).Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inv := simInventory(t, "dgx-h100", "node002")
	hash, _ := inventory.ContentHash(inv)
	_ = st.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Hello{Hello: &ginv1.Hello{NodeName: "node002", MachineId: inv.GetHost().GetMachineId(), InventoryHash: hash}}})
	if _, err := st.Recv(); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("hello as node002 with node001's certificate: %v, want PermissionDenied", err)
	}
	// As itself it registers.
	sess, ack := openSession(t, agent, simInventory(t, "dgx-h100", "node001"))
	if ack == nil {
		t.Fatal("node001 could not open its own session")
	}
	if _, err := sess.send(simInventory(t, "dgx-h100", "node001")); err != nil {
		t.Fatalf("node001 inventory: %v", err)
	}
	if _, ok := s.store.Node("node001"); !ok {
		t.Fatal("node001 was not stored")
	}
	// An agent pins plans only for jobs on its own node.
	pc := ginv1.NewPlanServiceClient(agent)
	if _, err := pc.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "9", Nodes: "node[002-003]"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("node001's agent pinning a plan for node[002-003]: %v, want PermissionDenied", err)
	}
	if _, err := pc.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "9", Nodes: "node001"}); err != nil {
		t.Fatalf("node001's agent pinning a plan for node001: %v", err)
	}
	if _, err := ginv1.NewPlanServiceClient(reader).GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "10", Nodes: "node001"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("reader GetOrCreatePlan: %v, want PermissionDenied", err)
	}
	// A reader cannot open an agent session at all.
	rs, err := ginv1.NewAgentServiceClient(reader).Session(ctx)
	if err == nil {
		_, err = rs.Recv()
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("reader Session: %v, want PermissionDenied", err)
	}
}

// TestTLSClusterJoinsAndReplicates: three masters with TLS on form one
// cluster through --join (gRPC Join with their master certificates, Raft
// over the TLS transport) and replicate a write.
func TestTLSClusterJoinsAndReplicates(t *testing.T) {
	p := newTestPKI(t)
	var ms []*member
	start := func(id string, bootstrap bool, join []string) *member {
		t.Helper()
		s, err := New(Config{ID: id, Bind: "127.0.0.1:0", RaftBind: "127.0.0.1:0", DataDir: t.TempDir(), Bootstrap: bootstrap, Join: join,
			FastRaft: true, HeartbeatInterval: time.Second, TLS: p.source(t, pki.Identity{Role: pki.RoleMaster, Name: id})})
		if err != nil {
			t.Fatal(err)
		}
		m := &member{s: s, done: make(chan error, 1)}
		ctx, cancel := context.WithCancel(context.Background())
		m.cancel = cancel
		go func() { m.done <- s.Serve(ctx) }()
		t.Cleanup(m.stop)
		ms = append(ms, m)
		return m
	}
	m1 := start("m1", true, nil)
	waitUntil(t, "m1 leads", func() bool { return m1.s.node.IsLeader() && m1.s.store.ClusterID() != "" })
	// Joining needs an admin's word: a master certificate and the cluster
	// id (which any reader may read) are not enough.
	m9 := p.dial(t, m1.s.Addr(), pki.Identity{Role: pki.RoleMaster, Name: "m9"})
	jctx, jcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer jcancel()
	_, err := ginv1.NewAdminServiceClient(m9).Join(jctx, &ginv1.JoinRequest{ServerId: "m9", RaftAddress: listening(t), ClusterId: m1.s.store.ClusterID()})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no admin admitted it") {
		t.Fatalf("Join as m9 without an admission: %v, want FailedPrecondition (no admin admitted it)", err)
	}
	// Only an admin admits: a master certificate may not.
	if _, err := ginv1.NewAdminServiceClient(m9).AdmitServer(jctx, &ginv1.AdmitServerRequest{ServerId: "m9"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("AdmitServer with a master certificate: %v, want PermissionDenied", err)
	}
	admin := ginv1.NewAdminServiceClient(p.dial(t, m1.s.Addr(), pki.Identity{Role: pki.RoleAdmin}))
	for _, id := range []string{"m2", "m3", "m9"} {
		if _, err := admin.AdmitServer(jctx, &ginv1.AdmitServerRequest{ServerId: id}); err != nil {
			t.Fatalf("admit %s: %v", id, err)
		}
	}
	start("m2", false, []string{m1.s.Addr()})
	start("m3", false, []string{m1.s.Addr()})
	waitUntil(t, "three voters over TLS", func() bool {
		l := leaderOf(ms)
		return l != nil && len(l.s.node.Stats().Members) == 3
	})
	agent := p.dial(t, leaderNow(t, ms).s.Addr(), pki.Identity{Role: pki.RoleAgent, Name: "node001"})
	sess, ack := openSession(t, agent, simInventory(t, "dgx-h100", "node001"))
	if ack == nil {
		t.Fatal("no hello ack from the leader")
	}
	if _, err := sess.send(simInventory(t, "dgx-h100", "node001")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "node001 on every master", func() bool {
		for _, m := range ms {
			if _, ok := m.s.store.Node("node001"); !ok {
				return false
			}
		}
		return true
	})

	// An agent on a follower: the follower relays with its master
	// certificate; the leader has committed before the ack.
	fol := followerOf(ms, leaderNow(t, ms))
	onFollower := p.dial(t, fol.s.Addr(), pki.Identity{Role: pki.RoleAgent, Name: "node002"})
	fsess, fack := openSession(t, onFollower, simInventory(t, "dgx-h100", "node002"))
	if fack == nil {
		t.Fatal("no hello ack from a follower")
	}
	inv2 := simInventory(t, "dgx-h100", "node002")
	inv2.Generation = 1
	if iack, err := fsess.send(inv2); err != nil || iack.GetAcceptedGeneration() != 1 {
		t.Fatalf("inventory through a follower over mTLS: %v, %v", iack, err)
	}
	rec, ok := leaderNow(t, ms).s.store.Node("node002")
	if !ok {
		t.Fatal("the follower acknowledged node002 before the leader held it")
	}
	// Bound to the agent's certificate, not to the relaying master's.
	if got, want := rec.GetBinding().GetIdentity(), (pki.Identity{Role: pki.RoleAgent, Name: "node002"}).String(); got != want {
		t.Fatalf("node002 registered through a follower is bound to %q, want %q", got, want)
	}
	// So the same agent is welcome on the leader too.
	onLeader, err := grpc.NewClient(leaderNow(t, ms).s.Addr(), grpc.WithTransportCredentials(pki.ClientCredentialsFrom(
		p.sourceIn(t, t.TempDir(), pki.Identity{Role: pki.RoleAgent, Name: "node002"}))))
	if err != nil {
		t.Fatal(err)
	}
	defer onLeader.Close()
	if _, lack := openSession(t, onLeader, inv2); lack == nil || !lack.GetInSync() {
		t.Fatalf("node002's agent on the leader: hello ack %v, want in sync", lack)
	}
	// Only master certificates relay: an agent calling RelayService for
	// another node is refused by the table.
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	lagent := p.dial(t, leaderNow(t, ms).s.Addr(), pki.Identity{Role: pki.RoleAgent, Name: "node004"})
	_, err = ginv1.NewRelayServiceClient(lagent).PutInventory(rctx, &ginv1.RelayServicePutInventoryRequest{NodeName: "node003",
		Update: &ginv1.RelayServicePutInventoryRequest_Inventory{Inventory: simInventory(t, "dgx-h100", "node003")}})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("RelayService.PutInventory with an agent certificate: %v, want PermissionDenied", err)
	}
	if _, ok := leaderNow(t, ms).s.store.Node("node003"); ok {
		t.Fatal("a refused relay registered node003")
	}
	// A master certificate that names no member (m9 never joined) relays
	// nothing: every RelayService call is refused naming the members, and
	// counted.
	relay := ginv1.NewRelayServiceClient(p.dial(t, leaderNow(t, ms).s.Addr(), pki.Identity{Role: pki.RoleMaster, Name: "m9"}))
	calls := map[string]func() error{
		"PutInventory": func() error {
			_, err := relay.PutInventory(rctx, &ginv1.RelayServicePutInventoryRequest{NodeName: "node003", ServerId: "m9",
				Update: &ginv1.RelayServicePutInventoryRequest_Inventory{Inventory: simInventory(t, "dgx-h100", "node003")}})
			return err
		},
		"ImportFabricScan": func() error {
			_, err := relay.ImportFabricScan(rctx, &ginv1.RelayServiceImportFabricScanRequest{NodeName: "node003"})
			return err
		},
		"ReportSessions": func() error {
			_, err := relay.ReportSessions(rctx, &ginv1.ReportSessionsRequest{ServerId: "m9", Full: true})
			return err
		},
	}
	for method, call := range calls {
		err := call()
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "m9 is not a server of this cluster's Raft configuration") {
			t.Fatalf("RelayService.%s with the certificate of m9 (not a member): %v, want PermissionDenied naming the configuration", method, err)
		}
		if got := testutil.ToFloat64(leaderNow(t, ms).s.metrics.members.counter.WithLabelValues(method)); got != 1 {
			t.Fatalf("gin_master_member_calls_refused_total{method=%q} = %v, want 1", method, got)
		}
	}
	if _, ok := leaderNow(t, ms).s.store.Node("node003"); ok {
		t.Fatal("a relay from a member-less master certificate registered node003")
	}

	// With TLS on, the leader's dial of a joining server's Raft address is
	// the Raft handshake: the master there must be the one that joins.
	// m9 (a valid master certificate, admitted above) naming m2's Raft
	// port, or a port that does not speak TLS, is refused and not added.
	leader := leaderNow(t, ms)
	m9 = p.dial(t, leader.s.Addr(), pki.Identity{Role: pki.RoleMaster, Name: "m9"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, raftAddr := range []string{followerOf(ms, leader).s.node.Addr(), listening(t)} {
		_, err := ginv1.NewAdminServiceClient(m9).Join(ctx, &ginv1.JoinRequest{ServerId: "m9", RaftAddress: raftAddr, ClusterId: leader.s.store.ClusterID()})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "cannot be dialled") {
			t.Fatalf("Join as m9 naming Raft address %s: %v, want FailedPrecondition (cannot be dialled)", raftAddr, err)
		}
	}
	if l := leaderOf(ms); l == nil || len(l.s.node.Stats().Members) != 3 {
		t.Fatal("a refused Join changed the membership")
	}
}

// TestReadersNeverSeeMachineID: GetNode and GetGraph hand out inventories
// without host.machine_id (the one identity check of agent sessions),
// everything else unchanged; the stored record keeps it.
func TestReadersNeverSeeMachineID(t *testing.T) {
	s, conn := startServer(t, time.Second)
	registerNodes(t, s, "dgx-h100", "node001")
	rec, _ := s.store.Node("node001")
	held := rec.GetInventory()
	if held.GetHost().GetMachineId() == "" {
		t.Fatal("the simulated node has no machine id: nothing to test")
	}
	ctx := context.Background()
	tc := ginv1.NewTopologyServiceClient(conn)
	node, err := tc.GetNode(ctx, &ginv1.GetNodeRequest{Name: "node001"})
	if err != nil {
		t.Fatal(err)
	}
	graph, err := tc.GetGraph(ctx, &ginv1.GetGraphRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(graph.GetInventories()) != 1 {
		t.Fatalf("%d inventories", len(graph.GetInventories()))
	}
	want := proto.CloneOf(held)
	want.Host.MachineId = ""
	for name, got := range map[string]*ginv1.NodeInventory{"GetNode": node.GetInventory(), "GetGraph": graph.GetInventories()[0]} {
		if got.GetHost().GetMachineId() != "" {
			t.Errorf("%s hands out machine_id %q", name, got.GetHost().GetMachineId())
		}
		if !proto.Equal(got, want) {
			t.Errorf("%s: the inventory differs in more than machine_id", name)
		}
	}
	if rec, _ := s.store.Node("node001"); rec.GetInventory().GetHost().GetMachineId() != held.GetHost().GetMachineId() {
		t.Fatal("the stored record lost its machine id")
	}
}

// TestHelloDeadline: a session that never says hello is ended with
// DEADLINE_EXCEEDED after Config.HelloTimeout (issue #11: 80,000 Hello-less
// streams were all held), and the master still serves.
func TestHelloDeadline(t *testing.T) {
	s := startServerWith(t, func(c *Config) { c.HelloTimeout = 300 * time.Millisecond })
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const streams = 50
	errs := make(chan error, streams)
	for range streams {
		go func() {
			st, err := ginv1.NewAgentServiceClient(conn).Session(ctx)
			if err == nil {
				_, err = st.Recv() // never sends
			}
			errs <- err
		}()
	}
	for range streams {
		if err := <-errs; status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "no hello") {
			t.Fatalf("a silent session ended with %v, want DeadlineExceeded (no hello)", err)
		}
	}
	_, ack := openSession(t, conn, simInventory(t, "dgx-h100", "node001"))
	if ack == nil {
		t.Fatal("a session that says hello was refused after the silent ones")
	}
}
