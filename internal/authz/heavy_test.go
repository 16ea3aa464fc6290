package authz_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/authz"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/testkit"
)

// holdingTopology holds every GetMatrix until release is closed and
// answers GetNode at once.
type holdingTopology struct {
	ginv1.UnimplementedTopologyServiceServer
	release chan struct{}
	started chan struct{}
}

func (h holdingTopology) GetMatrix(ctx context.Context, _ *ginv1.GetMatrixRequest) (*ginv1.GetMatrixResponse, error) {
	h.started <- struct{}{}
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return &ginv1.GetMatrixResponse{}, nil
}

func (h holdingTopology) GetNode(context.Context, *ginv1.GetNodeRequest) (*ginv1.GetNodeResponse, error) {
	return &ginv1.GetNodeResponse{}, nil
}

// One identity runs at most its bound of heavy reads at once; one more
// waits, then is refused with READ_LIMIT naming the bound; a light read of
// the same identity and a heavy read of another identity go on.
func TestHeavyReadsPerIdentityAreBounded(t *testing.T) {
	c, src := newCluster(t)
	const limit = 3
	a := authz.New(authz.Table()).WithHeavyReads(limit, 50*time.Millisecond)
	srv := grpc.NewServer(grpc.Creds(pki.ServerCredentials(src)), grpc.ChainUnaryInterceptor(a.Unary), grpc.ChainStreamInterceptor(a.Stream))
	h := holdingTopology{release: make(chan struct{}), started: make(chan struct{}, 2*limit)}
	ginv1.RegisterTopologyServiceServer(srv, h)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	dial := func(id pki.Identity) ginv1.TopologyServiceClient {
		creds, err := pki.ClientCredentials(c.files(t, id), nil)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return ginv1.NewTopologyServiceClient(conn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	reader := dial(pki.Identity{Role: pki.RoleReader})
	held := make(chan error, limit)
	for range limit {
		go func() { _, err := reader.GetMatrix(ctx, &ginv1.GetMatrixRequest{}); held <- err }()
	}
	for range limit {
		<-h.started
	}
	_, err = reader.GetMatrix(ctx, &ginv1.GetMatrixRequest{})
	if status.Code(err) != codes.ResourceExhausted || apierr.Reason(err) != apierr.ReasonReadLimit {
		t.Fatalf("heavy read %d of one identity: %v, want ResourceExhausted (%s)", limit+1, err, apierr.ReasonReadLimit)
	}
	if a.HeavyReadsRefused() != 1 {
		t.Fatalf("HeavyReadsRefused = %d, want 1", a.HeavyReadsRefused())
	}
	if _, err := reader.GetNode(ctx, &ginv1.GetNodeRequest{}); err != nil {
		t.Fatalf("a light read of the same identity: %v", err)
	}
	other := make(chan error, 1)
	go func() {
		_, err := dial(pki.Identity{Role: pki.RoleScheduler}).GetMatrix(ctx, &ginv1.GetMatrixRequest{})
		other <- err
	}()
	<-h.started // another identity's heavy read runs
	close(h.release)
	for range limit {
		if err := <-held; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-other; err != nil {
		t.Fatalf("another identity: %v", err)
	}
	testkit.WaitFor(t, 10*time.Second, "slots freed", func() bool {
		_, err := reader.GetMatrix(ctx, &ginv1.GetMatrixRequest{})
		return err == nil
	})
}
