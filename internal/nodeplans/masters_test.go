package nodeplans

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/plansock"
)

// planMaster answers GetOrCreatePlan as a master does: a follower with
// FAILED_PRECONDITION + NOT_LEADER and the leader hint in a trailer, the
// leader with a verifiable plan, or a fixed refusal.
type planMaster struct {
	ginv1.UnimplementedPlanServiceServer
	hint  string
	fail  error
	calls atomic.Int32
}

func (m *planMaster) GetOrCreatePlan(ctx context.Context, req *ginv1.GetOrCreatePlanRequest) (*ginv1.GetOrCreatePlanResponse, error) {
	m.calls.Add(1)
	switch {
	case m.fail != nil:
		return nil, m.fail
	case m.hint != "":
		_ = grpc.SetTrailer(ctx, metadata.Pairs(apierr.LeaderHintKey, m.hint))
		st, _ := status.New(codes.FailedPrecondition, "not the leader").WithDetails(apierr.NotLeaderInfo("m2"))
		return nil, st.Err()
	}
	return &ginv1.GetOrCreatePlanResponse{Plan: planFor(req.GetJobId(), time.Time{})}, nil
}

func servePlans(t *testing.T, m *planMaster) string {
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

func deadAddr(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := lis.Addr().String()
	_ = lis.Close()
	return a
}

func TestMastersFetch(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(t *testing.T) []string
		notFound bool
		wantErr  string
	}{
		{"a follower's hint leads to the leader", func(t *testing.T) []string {
			return []string{servePlans(t, &planMaster{hint: servePlans(t, &planMaster{})})}
		}, false, ""},
		{"a dead master, then the leader", func(t *testing.T) []string {
			return []string{deadAddr(t), servePlans(t, &planMaster{})}
		}, false, ""},
		{"not found", func(t *testing.T) []string {
			return []string{servePlans(t, &planMaster{fail: status.Error(codes.NotFound, "plan for job \"1\"")})}
		}, true, ""},
		{"all down", func(t *testing.T) []string { return []string{deadAddr(t), deadAddr(t)} }, false, "Unavailable"},
		{"a refusal is final", func(t *testing.T) []string {
			return []string{servePlans(t, &planMaster{fail: status.Error(codes.InvalidArgument, "nodes: bad")}), servePlans(t, &planMaster{})}
		}, false, "nodes: bad"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMasters(tc.setup(t), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			p, err := m.FetchPlan(ctx, plansock.Request{JobID: "1", Nodes: "n[1-2]"})
			switch {
			case tc.notFound:
				if !errors.Is(err, plansock.ErrNotFound) {
					t.Fatalf("err = %v, want not found", err)
				}
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
			case err != nil || p.GetJobId() != "1":
				t.Fatalf("FetchPlan = %v, %v", p, err)
			}
		})
	}
}
