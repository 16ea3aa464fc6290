package authz_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/authz"
	"github.com/gin-topology/gin/internal/pki"
)

// holdingWatch answers each Watch with one message and holds it open.
type holdingWatch struct {
	ginv1.UnimplementedTopologyServiceServer
	release chan struct{}
}

func (h holdingWatch) Watch(_ *ginv1.WatchRequest, st ginv1.TopologyService_WatchServer) error {
	if err := st.Send(&ginv1.WatchResponse{}); err != nil {
		return err
	}
	select {
	case <-st.Context().Done():
	case <-h.release:
	}
	return nil
}

// The reader certificate every job shares: one host's watches past the
// per-host bound are refused, another host's with the same certificate
// still open (issue #21: 64 watches on the shared reader certificate locked
// every other job out), and the identity's total is bounded too.
func TestStreamsOfASharedIdentityAreFairAcrossHosts(t *testing.T) {
	c, src := newCluster(t)
	const limit = 2
	a := authz.NewWithLimit(authz.Table(), limit)
	srv := grpc.NewServer(grpc.Creds(pki.ServerCredentials(src)), grpc.ChainUnaryInterceptor(a.Unary), grpc.ChainStreamInterceptor(a.Stream))
	release := make(chan struct{})
	defer close(release)
	ginv1.RegisterTopologyServiceServer(srv, holdingWatch{release: release})
	lis, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	port := lis.Addr().(*net.TCPAddr).Port
	creds, err := pki.ClientCredentials(c.files(t, pki.Identity{Role: pki.RoleReader}), nil)
	if err != nil {
		t.Fatal(err)
	}
	// from dials the server from local address ip (any 127/8 address is
	// this host's loopback, each a host to the server).
	from := func(ip string) ginv1.TopologyServiceClient {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(port), grpc.WithTransportCredentials(creds),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return ginv1.NewTopologyServiceClient(conn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	watch := func(cl ginv1.TopologyServiceClient) error {
		st, err := cl.Watch(ctx, &ginv1.WatchRequest{})
		if err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
	total := limit * authz.StreamHostsPerIdentity
	hosts := make([]ginv1.TopologyServiceClient, authz.StreamHostsPerIdentity+1)
	for i := range hosts {
		hosts[i] = from("127.0.0." + strconv.Itoa(i+2))
	}
	// The first job's host takes its share, and no more.
	for i := range limit {
		if err := watch(hosts[0]); err != nil {
			t.Fatalf("watch %d from the first host: %v", i, err)
		}
	}
	err = watch(hosts[0])
	if status.Code(err) != codes.ResourceExhausted || apierr.Reason(err) != apierr.ReasonStreamLimit || !strings.Contains(err.Error(), "from one host") {
		t.Fatalf("watch %d from one host: %v, want RESOURCE_EXHAUSTED per host", limit+1, err)
	}
	// Every other job's host still watches, up to the identity's total.
	for h := 1; h < authz.StreamHostsPerIdentity; h++ {
		for i := range limit {
			if err := watch(hosts[h]); err != nil {
				t.Fatalf("watch %d from host %d while the first host is at its bound: %v", i, h, err)
			}
		}
	}
	err = watch(hosts[authz.StreamHostsPerIdentity])
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "the most one identity may") {
		t.Fatalf("watch %d of the identity: %v, want RESOURCE_EXHAUSTED for the identity's total", total+1, err)
	}
}
