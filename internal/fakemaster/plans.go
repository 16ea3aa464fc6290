package fakemaster

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/planread"
)

// Plans answers GetOrCreatePlan as a master does.
type Plans struct {
	ginv1.UnimplementedPlanServiceServer
	Hint string // set: a follower naming this leader address
	Fail error  // set: refuse with this
	// Plan builds the leader's answer; nil: a minimal verifiable plan.
	Plan  func(jobID string) *ginv1.Plan
	Calls atomic.Int32
}

// GetOrCreatePlan implements ginv1.PlanServiceServer.
func (m *Plans) GetOrCreatePlan(ctx context.Context, req *ginv1.GetOrCreatePlanRequest) (*ginv1.GetOrCreatePlanResponse, error) {
	m.Calls.Add(1)
	switch {
	case m.Fail != nil:
		return nil, m.Fail
	case m.Hint != "":
		_ = grpc.SetTrailer(ctx, metadata.Pairs(apierr.LeaderHintKey, m.Hint))
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
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
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
