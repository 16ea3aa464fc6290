package master

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/state"
	"github.com/gin-topology/gin/internal/testkit"
)

func dialWith(t *testing.T, addr string, src *pki.Source) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(pki.ClientCredentialsFrom(src)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// colonLower writes a serial as people paste it: lower case, ':' between bytes.
func colonLower(s string) string {
	var parts []string
	for i := 0; i < len(s); i += 2 {
		parts = append(parts, strings.ToLower(s[i:i+2]))
	}
	return strings.Join(parts, ":")
}

// TestDenyAndDeleteNodeOverTLS is issue #11's deny list and node removal
// on a TLS master: the first registration binds node001 to its
// certificate; only an admin denies; the deny ends the agent's open
// session and refuses its certificate from then on; the node is deleted
// (not while a session is live) and registered again by a new machine
// with a renewed certificate.
func TestDenyAndDeleteNodeOverTLS(t *testing.T) {
	p := newTestPKI(t)
	s := startTLSServer(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	agentSrc := p.source(t, pki.Identity{Role: pki.RoleAgent, Name: "node001"})
	agentSerial := agentSrc.Serial()
	agent := dialWith(t, s.Addr(), agentSrc)
	sess, ack := openSession(t, agent, simInventory(t, "dgx-h100", "node001"))
	if ack == nil {
		t.Fatal("node001 could not open its session")
	}
	if _, err := sess.send(simInventory(t, "dgx-h100", "node001")); err != nil {
		t.Fatal(err)
	}
	rec, _ := s.store.Node("node001")
	wantBinding := &statev1.NodeBinding{Identity: "spiffe://gin/agent/node001", CaKeySha256: pki.KeySHA256(p.ca.Cert), Serial: agentSerial}
	if b := rec.GetBinding(); b.GetIdentity() != wantBinding.GetIdentity() || b.GetCaKeySha256() != wantBinding.GetCaKeySha256() || b.GetSerial() != agentSerial {
		t.Fatalf("binding %v, want %v", b, wantBinding)
	}

	// Readers never get the binding (nor machine_id): not in any answer
	// that carries the node.
	readerConn := p.dial(t, s.Addr(), pki.Identity{Role: pki.RoleReader})
	tc := ginv1.NewTopologyServiceClient(readerConn)
	w, err := tc.Watch(ctx, &ginv1.WatchRequest{SinceIndex: 1})
	if err != nil {
		t.Fatal(err)
	}
	var ev *ginv1.WatchResponse
	for ev.GetNode().GetName() != "node001" { // node001's registration, replayed
		if ev, err = w.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	node, err := tc.GetNode(ctx, &ginv1.GetNodeRequest{Name: "node001"})
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := tc.ListNodes(ctx, &ginv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	graph, err := tc.GetGraph(ctx, &ginv1.GetGraphRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]proto.Message{"GetNode": node, "ListNodes": nodes, "GetGraph": graph, "Watch": ev} {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{wantBinding.GetCaKeySha256(), agentSerial, rec.GetInventory().GetHost().GetMachineId()} {
			if strings.Contains(string(b), secret) {
				t.Errorf("%s hands readers %q", name, secret)
			}
		}
	}
	admin := ginv1.NewAdminServiceClient(p.dial(t, s.Addr(), pki.Identity{Role: pki.RoleAdmin}))
	reader := ginv1.NewAdminServiceClient(readerConn)
	// Non-admins are refused every call of the deny list and node removal.
	for name, call := range map[string]func(ginv1.AdminServiceClient) error{
		"DenyCertificate": func(c ginv1.AdminServiceClient) error {
			_, err := c.DenyCertificate(ctx, &ginv1.DenyCertificateRequest{Serial: agentSerial})
			return err
		},
		"AllowCertificate": func(c ginv1.AdminServiceClient) error {
			_, err := c.AllowCertificate(ctx, &ginv1.AllowCertificateRequest{Serial: agentSerial})
			return err
		},
		"ListDeniedCertificates": func(c ginv1.AdminServiceClient) error {
			_, err := c.ListDeniedCertificates(ctx, &ginv1.ListDeniedCertificatesRequest{})
			return err
		},
		"DeleteNode": func(c ginv1.AdminServiceClient) error {
			_, err := c.DeleteNode(ctx, &ginv1.DeleteNodeRequest{NodeName: "node001"})
			return err
		},
	} {
		for who, c := range map[string]ginv1.AdminServiceClient{"reader": reader, "agent": ginv1.NewAdminServiceClient(agent)} {
			if err := call(c); status.Code(err) != codes.PermissionDenied {
				t.Errorf("%s %s: %v, want PermissionDenied", who, name, err)
			}
		}
	}
	if n := len(s.store.DeniedCertificates()); n != 0 {
		t.Fatalf("refused calls changed the deny list: %d entries", n)
	}

	// A live session: the node is not deleted under it.
	if _, err := admin.DeleteNode(ctx, &ginv1.DeleteNodeRequest{NodeName: "node001"}); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "live agent session") {
		t.Fatalf("delete with a live session: %v, want FailedPrecondition", err)
	}

	resp, err := admin.DenyCertificate(ctx, &ginv1.DenyCertificateRequest{Serial: colonLower(agentSerial), Reason: "machine stolen"})
	if err != nil {
		t.Fatal(err)
	}
	if e := resp.GetEntry(); !resp.GetChanged() || e.GetSerial() != agentSerial || e.GetDeniedBy() != "spiffe://gin/admin" || e.GetReason() != "machine stolen" || e.GetIndex() == 0 {
		t.Fatalf("deny response %v", resp)
	}
	// The session opened before the deny is ended when the entry commits.
	if _, err := sess.stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("the open session after the deny: %v, want Unavailable (connection closed)", err)
	}
	testkit.WaitFor(t, 10*time.Second, "the session is gone from the leader", func() bool { return !s.sessions.has("node001") })
	// And the certificate is refused from then on, on a new connection too.
	wantMsg := "certificate serial " + agentSerial + " (spiffe://gin/agent/node001) is denied: machine stolen"
	again := dialWith(t, s.Addr(), agentSrc)
	st, err := ginv1.NewAgentServiceClient(again).Session(ctx)
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), wantMsg) {
		t.Fatalf("a session with the denied certificate: %v, want Unauthenticated %q", err, wantMsg)
	}
	if _, err := ginv1.NewPlanServiceClient(again).GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "1", Nodes: "node001"}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a unary call with the denied certificate: %v, want Unauthenticated", err)
	}
	list, err := admin.ListDeniedCertificates(ctx, &ginv1.ListDeniedCertificatesRequest{})
	if err != nil || len(list.GetEntries()) != 1 || list.GetEntries()[0].GetSerial() != agentSerial {
		t.Fatalf("deny list %v, %v", list, err)
	}

	// Delete: the record and its binding go; an unknown name is NOT_FOUND.
	if _, err := admin.DeleteNode(ctx, &ginv1.DeleteNodeRequest{NodeName: "node001"}); err != nil {
		t.Fatalf("delete node001: %v", err)
	}
	if _, ok := s.store.Node("node001"); ok {
		t.Fatal("node001 still stored")
	}
	if _, err := admin.DeleteNode(ctx, &ginv1.DeleteNodeRequest{NodeName: "node001"}); status.Code(err) != codes.NotFound {
		t.Fatalf("delete node001 again: %v, want NotFound", err)
	}
	if _, err := admin.DeleteNode(ctx, &ginv1.DeleteNodeRequest{NodeName: "bad name"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("delete an invalid name: %v, want InvalidArgument", err)
	}

	// A new machine with a renewed certificate registers the name again.
	newSrc := p.sourceIn(t, t.TempDir(), pki.Identity{Role: pki.RoleAgent, Name: "node001"}) // renewed: same CA, new key and serial
	inv := simInventory(t, "dgx-h100", "node001")
	inv.Host.MachineId = "a-new-machine"
	sess2, ack := openSession(t, dialWith(t, s.Addr(), newSrc), inv)
	if ack == nil {
		t.Fatal("the new machine could not open a session for node001")
	}
	if _, err := sess2.send(inv); err != nil {
		t.Fatalf("the new machine's inventory: %v", err)
	}
	rec, _ = s.store.Node("node001")
	if rec.GetBinding().GetSerial() != newSrc.Serial() || rec.GetInventory().GetHost().GetMachineId() != "a-new-machine" {
		t.Fatalf("re-registered record: binding %v, machine %q", rec.GetBinding(), rec.GetInventory().GetHost().GetMachineId())
	}

	// Allow takes the entry off; an absent serial is NOT_FOUND.
	if _, err := admin.AllowCertificate(ctx, &ginv1.AllowCertificateRequest{Serial: agentSerial}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AllowCertificate(ctx, &ginv1.AllowCertificateRequest{Serial: agentSerial}); status.Code(err) != codes.NotFound {
		t.Fatalf("allow again: %v, want NotFound", err)
	}
	if _, ok := s.store.Denied(agentSerial); ok {
		t.Fatal("still denied after allow")
	}
}

// TestDenyValidationAndBound: bad serials and reasons are refused at the
// edge (INVALID_ARGUMENT, nothing committed); a full list refuses a new
// serial with RESOURCE_EXHAUSTED and still answers a repeat.
func TestDenyValidationAndBound(t *testing.T) {
	s, conn := startServer(t, time.Second)
	admin := ginv1.NewAdminServiceClient(conn)
	ctx := context.Background()
	for _, tc := range []struct{ serial, reason, want string }{
		{"", "", "serial"},
		{"xyz", "", "hex digit"},
		{"00", "", "zero"},
		{strings.Repeat("AB", 21), "", "more than 20"},
		{"0A", strings.Repeat("r", state.MaxDenyReasonLen+1), "more than 256"},
		{"0A", "bell\a", "reason"},
	} {
		_, err := admin.DenyCertificate(ctx, &ginv1.DenyCertificateRequest{Serial: tc.serial, Reason: tc.reason})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("deny %q/%q: %v, want InvalidArgument naming %q", tc.serial, tc.reason, err, tc.want)
		}
	}
	if n := len(s.store.DeniedCertificates()); n != 0 {
		t.Fatalf("refused requests stored %d entries", n)
	}
	// Fill the list below Raft (the FSM's own bound is tested in
	// internal/state): the edge answers from the store.
	for i := range state.MaxDeniedCertificates {
		serial := pki.FormatSerial(big.NewInt(int64(i + 1)))
		if _, err := s.store.DenyCertificate(1, &statev1.DenyCertificate{Entry: &ginv1.DeniedCertificate{Serial: serial}}); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newMasterCollector(s))
	want := fmt.Sprintf(`# HELP gin_master_denied_certificates Certificate serials on the replicated deny list (ginctl tls deny).
# TYPE gin_master_denied_certificates gauge
gin_master_denied_certificates{server="m1"} %d
# HELP gin_master_denied_certificates_limit The most entries the deny list holds; compare with gin_master_denied_certificates (ginctl tls allow --expired makes room).
# TYPE gin_master_denied_certificates_limit gauge
gin_master_denied_certificates_limit{server="m1"} %d
`, state.MaxDeniedCertificates, state.MaxDeniedCertificates)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gin_master_denied_certificates", "gin_master_denied_certificates_limit"); err != nil {
		t.Fatal(err)
	}
	_, err := admin.DenyCertificate(ctx, &ginv1.DenyCertificateRequest{Serial: "ABCDEF"})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), fmt.Sprint(state.MaxDeniedCertificates)) {
		t.Fatalf("deny past the bound: %v, want ResourceExhausted", err)
	}
	if r, err := admin.DenyCertificate(ctx, &ginv1.DenyCertificateRequest{Serial: "01"}); err != nil || r.GetChanged() {
		t.Fatalf("a repeat on a full list: %v, %v", r, err)
	}
}

// TestDeleteNodeWithoutTLS: without TLS the machine_id binding holds until
// the node is deleted; the watch names the deleted node.
func TestDeleteNodeWithoutTLS(t *testing.T) {
	s, conn := startServer(t, time.Second)
	registerNodes(t, s, "dgx-h100", "node001")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := ginv1.NewTopologyServiceClient(conn).Watch(ctx, &ginv1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	inv := simInventory(t, "dgx-h100", "node001")
	inv.Host.MachineId = "another-machine"
	if _, ack := openSession(t, conn, inv); ack != nil {
		t.Fatal("another machine took node001 over")
	}
	if _, err := ginv1.NewAdminServiceClient(conn).DeleteNode(ctx, &ginv1.DeleteNodeRequest{NodeName: "node001"}); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetKind() == ginv1.WatchEventKind_WATCH_EVENT_KIND_NODE_DELETED {
			if ev.GetNode().GetName() != "node001" {
				t.Fatalf("deleted event names %q", ev.GetNode().GetName())
			}
			break
		}
	}
	sess, ack := openSession(t, conn, inv)
	if ack == nil {
		t.Fatal("the other machine could not register node001 after the delete")
	}
	if _, err := sess.send(inv); err != nil {
		t.Fatal(err)
	}
	if rec, _ := s.store.Node("node001"); rec.GetInventory().GetHost().GetMachineId() != "another-machine" || rec.GetBinding() != nil {
		t.Fatalf("re-registered: %v", rec.GetInventory().GetHost())
	}
}
