package authz_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/authz"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/testkit"
)

// denyList is a deny list the test changes as it goes.
type denyList struct {
	mu sync.Mutex
	m  map[string]string
}

func (d *denyList) Denied(serial string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.m[serial]
	return r, ok
}

func (d *denyList) add(serial, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.m[serial] = reason
}

// TestDeniedCertificates: a certificate on the deny list is refused by the
// interceptor (UNAUTHENTICATED naming its serial) for unary calls and
// streams; EndDenied closes the connections it already holds, which ends
// a stream opened before the deny; other certificates are not affected.
func TestDeniedCertificates(t *testing.T) {
	c, src := newCluster(t)
	list := &denyList{m: map[string]string{}}
	a := authz.New(authz.Table()).WithDenyList(list)
	srv := grpc.NewServer(grpc.Creds(a.Credentials(pki.ServerCredentials(src))), grpc.ChainUnaryInterceptor(a.Unary), grpc.ChainStreamInterceptor(a.Stream))
	release := make(chan struct{})
	defer close(release)
	ginv1.RegisterAgentServiceServer(srv, holdingAgent{release: release})
	ginv1.RegisterAdminServiceServer(srv, adminStub{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type client struct {
		conn   *grpc.ClientConn
		serial string
	}
	dial := func(id pki.Identity) client {
		files := c.files(t, id)
		creds, err := pki.ClientCredentials(files, nil)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		s, err := pki.NewSource(files, nil)
		if err != nil {
			t.Fatal(err)
		}
		return client{conn, s.Serial()}
	}
	agent := dial(pki.Identity{Role: pki.RoleAgent, Name: "node001"})
	other := dial(pki.Identity{Role: pki.RoleAgent, Name: "node002"})
	admin := dial(pki.Identity{Role: pki.RoleAdmin})
	open := func(cl client) (ginv1.AgentService_SessionClient, error) {
		st, err := ginv1.NewAgentServiceClient(cl.conn).Session(ctx)
		if err != nil {
			return nil, err
		}
		_, err = st.Recv()
		return st, err
	}
	held, err := open(agent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open(other); err != nil {
		t.Fatal(err)
	}
	if n := a.OpenConns(); n != 2 {
		t.Fatalf("%d tracked connections, want 2", n)
	}

	list.add(agent.serial, "lost")
	want := "certificate serial " + agent.serial + " (spiffe://gin/agent/node001) is denied: lost"
	// New calls are refused at once, before EndDenied.
	if _, err := open(agent); status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), want) {
		t.Fatalf("a new stream with the denied certificate: %v, want Unauthenticated %q", err, want)
	}
	// EndDenied closes the connection the held stream runs on, and only it.
	if n := a.EndDenied(); n != 1 {
		t.Fatalf("EndDenied closed %d connections, want 1", n)
	}
	if _, err := held.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("the stream opened before the deny: %v, want Unavailable", err)
	}
	// The client reconnects; its calls are refused with the reason.
	testkit.WaitFor(t, 10*time.Second, "the agent's reconnection is refused by the interceptor", func() bool {
		_, err := open(agent)
		return status.Code(err) == codes.Unauthenticated && strings.Contains(err.Error(), want)
	})
	// The other agent still opens streams.
	if _, err := open(other); err != nil {
		t.Fatalf("another agent after the deny: %v", err)
	}
	if _, err := ginv1.NewAdminServiceClient(admin.conn).GetClusterInfo(ctx, &ginv1.GetClusterInfoRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("admin after the deny: %v, want to pass the interceptor", err)
	}
	list.add(admin.serial, "")
	if _, err := ginv1.NewAdminServiceClient(admin.conn).GetClusterInfo(ctx, &ginv1.GetClusterInfoRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("unary call with a denied admin certificate: %v, want Unauthenticated", err)
	}
}
