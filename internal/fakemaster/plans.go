package fakemaster

import (
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/testdata"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/planread"
)

// Plans answers GetOrCreatePlan as a master does.
type Plans struct {
	ginv1.UnimplementedPlanServiceServer
	// NotLeader set: a master older than forwarding (or one during an
	// election), answering NOT_LEADER.
	NotLeader bool
	Fail      error // set: refuse with this
	// Plan builds the leader's answer; nil: a minimal verifiable plan.
	Plan  func(jobID string) *ginv1.Plan
	Calls atomic.Int32
}

// GetOrCreatePlan implements ginv1.PlanServiceServer.
func (m *Plans) GetOrCreatePlan(_ context.Context, req *ginv1.GetOrCreatePlanRequest) (*ginv1.GetOrCreatePlanResponse, error) {
	m.Calls.Add(1)
	switch {
	case m.Fail != nil:
		return nil, m.Fail
	case m.NotLeader:
		st, _ := status.New(codes.FailedPrecondition, "not the leader; leader is m2").WithDetails(apierr.NotLeaderInfo("m2"))
		return nil, st.Err()
	}
	if m.Plan != nil {
		return &ginv1.GetOrCreatePlanResponse{Plan: m.Plan(req.GetJobId())}, nil
	}
	p := &ginv1.Plan{FormatVersion: planread.FormatVersion, JobId: req.GetJobId()}
	p.ContentHash = planread.Hash(p)
	return &ginv1.GetOrCreatePlanResponse{Plan: p}, nil
}

// Serve serves m on a loopback port until the test ends and returns its
// address.
func Serve(t testing.TB, m *Plans) string {
	t.Helper()
	return serve(t, m)
}

// ServeTLS serves m over TLS (grpc-go's test certificate, which no client
// of ours trusts): a plaintext client fails as against a master serving
// mutual TLS, in the handshake, before any answer.
func ServeTLS(t testing.TB, m *Plans) string {
	t.Helper()
	creds, err := credentials.NewServerTLSFromFile(testdata.Path("x509/server1_cert.pem"), testdata.Path("x509/server1_key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, m, grpc.Creds(creds))
}

// ClientTLS are TLS credentials that take any server certificate: a
// client that speaks TLS to whatever listens (a plaintext master, an
// HTTP port).
func ClientTLS() credentials.TransportCredentials {
	return credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}) //nolint:gosec // tests only: the handshake's failure is what is tested
}

func serve(t testing.TB, m *Plans, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(opts...)
	ginv1.RegisterPlanServiceServer(s, m)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// DeadAddr is a loopback address where nothing listens (a port just closed).
func DeadAddr(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := lis.Addr().String()
	_ = lis.Close()
	return a
}
