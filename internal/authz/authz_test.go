package authz_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/authz"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/testkit"
)

// apiMethods is every method of every service in the gin.* proto packages
// (as registered by the generated code) and of gRPC health.
func apiMethods(t *testing.T) []string {
	t.Helper()
	_ = ginv1.File_gin_v1_admin_proto // link the generated files
	_ = healthpb.File_grpc_health_v1_health_proto
	var methods []string
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		pkg := string(fd.Package())
		if !strings.HasPrefix(pkg, "gin.") && pkg != "grpc.health.v1" {
			return true
		}
		for i := 0; i < fd.Services().Len(); i++ {
			sd := fd.Services().Get(i)
			for j := 0; j < sd.Methods().Len(); j++ {
				methods = append(methods, "/"+string(sd.FullName())+"/"+string(sd.Methods().Get(j).Name()))
			}
		}
		return true
	})
	if len(methods) < 20 {
		t.Fatalf("found only %d methods: the generated descriptors did not register", len(methods))
	}
	return methods
}

// TestEveryMethodHasARow fails when a method of the API has no row in the
// table (it would be refused to everyone), and when a row names a method
// that does not exist (a renamed method left its old row behind).
func TestEveryMethodHasARow(t *testing.T) {
	table := authz.Table()
	seen := map[string]bool{}
	for _, m := range apiMethods(t) {
		seen[m] = true
		roles, ok := table[m]
		if !ok {
			t.Errorf("%s has no row in internal/authz/table.go", m)
			continue
		}
		if len(roles) == 0 {
			t.Errorf("%s: empty row", m)
		}
	}
	for m := range table {
		if !seen[m] {
			t.Errorf("table row %s names no method of the API", m)
		}
	}
}

// TestWriteRows pins the rules the security design names.
func TestWriteRows(t *testing.T) {
	table := authz.Table()
	tests := []struct {
		method string
		want   []pki.Role
	}{
		{ginv1.AdminService_Join_FullMethodName, []pki.Role{pki.RoleMaster}},
		{ginv1.AdminService_RemoveServer_FullMethodName, []pki.Role{pki.RoleAdmin}},
		{ginv1.AdminService_ImportFabric_FullMethodName, []pki.Role{pki.RoleAdmin}},
		{ginv1.AgentService_Session_FullMethodName, []pki.Role{pki.RoleAgent}},
		{ginv1.PlanService_DeletePlan_FullMethodName, []pki.Role{pki.RoleScheduler, pki.RoleAdmin}},
	}
	for _, tt := range tests {
		if got := table[tt.method]; !equalRoles(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.method, got, tt.want)
		}
	}
	for m, roles := range table {
		if strings.Contains(m, "Delete") || strings.Contains(m, "Import") || strings.Contains(m, "Join") || strings.Contains(m, "Remove") {
			for _, r := range roles {
				if r == pki.RoleReader {
					t.Errorf("%s is a write and allows reader", m)
				}
			}
		}
	}
}

func equalRoles(a, b []pki.Role) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// adminStub and agentStub reach the handler only when the interceptor lets
// the call through; they answer Unimplemented, which the test tells apart
// from the interceptor's codes.
type adminStub struct {
	ginv1.UnimplementedAdminServiceServer
}
type agentStub struct {
	ginv1.UnimplementedAgentServiceServer
}

type cluster struct {
	dir string
	ca  *pki.CA
}

func (c *cluster) files(t *testing.T, id pki.Identity) pki.Files {
	t.Helper()
	cert, key, err := c.ca.IssueToDir(c.dir, pki.CertRequest{Identity: id}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return pki.Files{CA: filepath.Join(c.dir, pki.CAFile), Cert: cert, Key: key}
}

// newCluster makes a cluster CA and the source of master m1's certificate.
func newCluster(t *testing.T) (*cluster, *pki.Source) {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.CreateCA(dir, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{dir: dir, ca: ca}
	src, err := pki.NewSource(c.files(t, pki.Identity{Role: pki.RoleMaster, Name: "m1"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, src
}

func serve(t *testing.T, opts ...grpc.ServerOption) string {
	t.Helper()
	a := authz.New(authz.Table())
	srv := grpc.NewServer(append(opts, grpc.ChainUnaryInterceptor(a.Unary), grpc.ChainStreamInterceptor(a.Stream))...)
	ginv1.RegisterAdminServiceServer(srv, adminStub{})
	ginv1.RegisterAgentServiceServer(srv, agentStub{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func TestInterceptorOverMTLS(t *testing.T) {
	c, src := newCluster(t)
	addr := serve(t, grpc.Creds(pki.ServerCredentials(src)))
	dial := func(t *testing.T, creds credentials.TransportCredentials) *grpc.ClientConn {
		t.Helper()
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	as := func(t *testing.T, id pki.Identity) *grpc.ClientConn {
		t.Helper()
		creds, err := pki.ClientCredentials(c.files(t, id), nil)
		if err != nil {
			t.Fatal(err)
		}
		return dial(t, creds)
	}
	admin := as(t, pki.Identity{Role: pki.RoleAdmin})
	reader := as(t, pki.Identity{Role: pki.RoleReader})
	agent := as(t, pki.Identity{Role: pki.RoleAgent, Name: "node001"})
	master := as(t, pki.Identity{Role: pki.RoleMaster, Name: "m2"})
	noCert := dial(t, credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})) //nolint:gosec // the attacker
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	unary := func(conn *grpc.ClientConn, method string) error {
		switch method {
		case "ImportFabric":
			_, err := ginv1.NewAdminServiceClient(conn).ImportFabric(ctx, &ginv1.ImportFabricRequest{})
			return err
		case "Join":
			_, err := ginv1.NewAdminServiceClient(conn).Join(ctx, &ginv1.JoinRequest{})
			return err
		case "RemoveServer":
			_, err := ginv1.NewAdminServiceClient(conn).RemoveServer(ctx, &ginv1.RemoveServerRequest{})
			return err
		case "GetClusterInfo":
			_, err := ginv1.NewAdminServiceClient(conn).GetClusterInfo(ctx, &ginv1.GetClusterInfoRequest{})
			return err
		case "Session":
			s, err := ginv1.NewAgentServiceClient(conn).Session(ctx)
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}
		t.Fatalf("unknown method %s", method)
		return nil
	}
	tests := []struct {
		name   string
		conn   *grpc.ClientConn
		method string
		want   codes.Code // Unimplemented = the call passed the interceptor
	}{
		{"admin imports a fabric", admin, "ImportFabric", codes.Unimplemented},
		{"reader imports a fabric", reader, "ImportFabric", codes.PermissionDenied},
		{"agent imports a fabric", agent, "ImportFabric", codes.PermissionDenied},
		{"admin removes a server", admin, "RemoveServer", codes.Unimplemented},
		{"agent removes a server", agent, "RemoveServer", codes.PermissionDenied},
		{"master joins", master, "Join", codes.Unimplemented},
		{"admin joins (forged join)", admin, "Join", codes.PermissionDenied},
		{"agent joins (forged join)", agent, "Join", codes.PermissionDenied},
		{"reader reads", reader, "GetClusterInfo", codes.Unimplemented},
		{"agent opens a session", agent, "Session", codes.Unimplemented},
		{"reader opens a session", reader, "Session", codes.PermissionDenied},
		{"admin opens a session", admin, "Session", codes.PermissionDenied},
		// Refused in the TLS handshake (RequireAndVerifyClientCert): the
		// handler and the interceptor are never reached.
		{"no certificate", noCert, "GetClusterInfo", codes.Unavailable},
		{"no certificate writes", noCert, "RemoveServer", codes.Unavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := unary(tt.conn, tt.method)
			if status.Code(err) != tt.want {
				t.Fatalf("%s: %v, want %v", tt.method, err, tt.want)
			}
		})
	}
}

// TestNoIdentityIsUnauthenticated: a call that reaches the interceptor
// without a verified certificate (a listener wired without TLS by mistake)
// is Unauthenticated, for unary calls and streams.
func TestNoIdentityIsUnauthenticated(t *testing.T) {
	addr := serve(t)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = ginv1.NewAdminServiceClient(conn).RemoveServer(ctx, &ginv1.RemoveServerRequest{ServerId: "m1"})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("RemoveServer without a certificate: %v, want Unauthenticated", err)
	}
	s, err := ginv1.NewAgentServiceClient(conn).Session(ctx)
	if err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Session without a certificate: %v, want Unauthenticated", err)
	}
}

// TestUnknownMethodIsDenied: deny by default; a method without a row is
// refused even to an admin.
func TestUnknownMethodIsDenied(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.CreateCA(dir, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := ca.Issue(pki.CertRequest{Identity: pki.Identity{Role: pki.RoleAdmin}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(certPEM)
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	ctx := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf, ca.Cert}}}}})
	full := authz.New(authz.Table())
	got, err := full.Authorize(ctx, ginv1.AdminService_RemoveServer_FullMethodName)
	if err != nil {
		t.Fatalf("admin RemoveServer: %v", err)
	}
	if id, ok := authz.Identity(got); !ok || id.Role != pki.RoleAdmin {
		t.Fatalf("identity in context: %v, %v", id, ok)
	}
	empty := authz.New(map[string][]pki.Role{})
	if _, err := empty.Authorize(ctx, ginv1.AdminService_RemoveServer_FullMethodName); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a method without a row: %v, want PermissionDenied", err)
	}
	if _, err := full.Authorize(context.Background(), ginv1.AdminService_RemoveServer_FullMethodName); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no peer: %v, want Unauthenticated", err)
	}
}

// TestSecurityDocTable: docs/SECURITY.md lists every row of the table
// exactly as it is (one line per method: | `method` | roles |).
func TestSecurityDocTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for m, roles := range authz.Table() {
		names := make([]string, len(roles))
		for i, r := range roles {
			names[i] = "`" + string(r) + "`"
		}
		line := "| `" + m + "` | " + strings.Join(names, ", ") + " |"
		if !strings.Contains(readme, line+"\n") {
			t.Errorf("docs/SECURITY.md lacks the line\n%s", line)
		}
	}
	if got, want := strings.Count(readme, "| `/gin.")+strings.Count(readme, "| `/grpc."), len(authz.Table()); got != want {
		t.Errorf("docs/SECURITY.md has %d method rows, the table %d", got, want)
	}
}

// TestStreamsPerIdentityAreBounded: one identity holds at most the limit of
// open streams; the next is RESOURCE_EXHAUSTED, another identity is not
// affected, and a closed stream frees its place.
func TestStreamsPerIdentityAreBounded(t *testing.T) {
	c, src := newCluster(t)
	const limit = 3
	a := authz.NewWithLimit(authz.Table(), limit)
	srv := grpc.NewServer(grpc.Creds(pki.ServerCredentials(src)), grpc.ChainUnaryInterceptor(a.Unary), grpc.ChainStreamInterceptor(a.Stream))
	release := make(chan struct{})
	ginv1.RegisterAgentServiceServer(srv, holdingAgent{release: release})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	dial := func(id pki.Identity) ginv1.AgentServiceClient {
		creds, err := pki.ClientCredentials(c.files(t, id), nil)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return ginv1.NewAgentServiceClient(conn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n1 := dial(pki.Identity{Role: pki.RoleAgent, Name: "node001"})
	// open starts a session and waits for the handler's first message, so
	// the stream is known to hold its place.
	open := func(cl ginv1.AgentServiceClient) (ginv1.AgentService_SessionClient, error) {
		st, err := cl.Session(ctx)
		if err != nil {
			return nil, err
		}
		_, err = st.Recv()
		return st, err
	}
	var held []context.CancelFunc
	for i := range limit {
		sctx, scancel := context.WithCancel(ctx)
		held = append(held, scancel)
		st, err := n1.Session(sctx)
		if err == nil {
			_, err = st.Recv()
		}
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	if _, err := open(n1); status.Code(err) != codes.ResourceExhausted || apierr.Reason(err) != apierr.ReasonStreamLimit {
		t.Fatalf("stream %d of one identity: %v, want ResourceExhausted (%s)", limit+1, err, apierr.ReasonStreamLimit)
	}
	if _, err := open(dial(pki.Identity{Role: pki.RoleAgent, Name: "node002"})); err != nil {
		t.Fatalf("another identity: %v", err)
	}
	held[0]()
	testkit.WaitFor(t, 10*time.Second, "a closed stream frees its place", func() bool {
		_, err := open(n1)
		return err == nil
	})
	close(release)
}

// holdingAgent answers each session with one message and holds it open.
type holdingAgent struct {
	ginv1.UnimplementedAgentServiceServer
	release chan struct{}
}

func (h holdingAgent) Session(st ginv1.AgentService_SessionServer) error {
	if err := st.Send(&ginv1.SessionResponse{}); err != nil {
		return err
	}
	select {
	case <-st.Context().Done():
	case <-h.release:
	}
	return nil
}
