package main

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/planread"
)

// planMaster answers GetOrCreatePlan as a master does: a follower with
// FAILED_PRECONDITION + NOT_LEADER and the leader hint in a trailer, the
// leader with a verifiable plan, or a fixed refusal.
type planMaster struct {
	ginv1.UnimplementedPlanServiceServer
	hint  string // set: a follower naming this leader
	fail  error  // set: refuse with this
	calls atomic.Int32
}

func (m *planMaster) GetOrCreatePlan(ctx context.Context, req *ginv1.GetOrCreatePlanRequest) (*ginv1.GetOrCreatePlanResponse, error) {
	m.calls.Add(1)
	switch {
	case m.fail != nil:
		return nil, m.fail
	case m.hint != "":
		_ = grpc.SetTrailer(ctx, metadata.Pairs(apierr.LeaderHintKey, m.hint))
		st, _ := status.New(codes.FailedPrecondition, "not the leader; leader is m2").WithDetails(apierr.NotLeaderInfo("m2"))
		return nil, st.Err()
	}
	p := &ginv1.Plan{FormatVersion: planread.FormatVersion, JobId: req.GetJobId()}
	p.ContentHash = planread.Hash(p)
	return &ginv1.GetOrCreatePlanResponse{Plan: p}, nil
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

func TestFetchFollowsRedirectsAndStopsOnRefusals(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T) (addrs []string, leader *planMaster)
		wantErr string // "" = a plan from the leader
	}{
		{"a follower names a leader missing from the list", func(t *testing.T) ([]string, *planMaster) {
			leader := &planMaster{}
			return []string{servePlans(t, &planMaster{hint: servePlans(t, leader)})}, leader
		}, ""},
		{"an unreachable master, then the leader", func(t *testing.T) ([]string, *planMaster) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			dead := lis.Addr().String()
			_ = lis.Close()
			leader := &planMaster{}
			return []string{dead, servePlans(t, leader)}, leader
		}, ""},
		{"a refusal is final, the next master is not asked", func(t *testing.T) ([]string, *planMaster) {
			other := &planMaster{}
			refusing := &planMaster{fail: status.Error(codes.InvalidArgument, "nodes: unknown node n9")}
			return []string{servePlans(t, refusing), servePlans(t, other)}, other
		}, "InvalidArgument: nodes: unknown node n9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addrs, leader := tc.setup(t)
			cfg := config{jobID: "j1", nodes: "n1", failover: true, initTimeout: 10 * time.Second}
			ctx, cancel := context.WithTimeout(context.Background(), cfg.initTimeout)
			defer cancel()
			got, err := fetch(ctx, cfg, addrs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("fetch = %v, %v; want an error with %q", got, err, tc.wantErr)
				}
				if n := leader.calls.Load(); n != 0 {
					t.Fatalf("the next master was asked %d times after a final refusal", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.plan.GetJobId() != "j1" || leader.calls.Load() != 1 {
				t.Fatalf("plan %v from %s; leader asked %d times", got.plan, got.source, leader.calls.Load())
			}
		})
	}
}

func TestRotate(t *testing.T) {
	tests := []struct {
		addrs []string
		k     int
		want  string
	}{
		{[]string{"a", "b", "c"}, 0, "a,b,c"},
		{[]string{"a", "b", "c"}, 4, "b,c,a"},
		{[]string{"a", "b", "c"}, 2, "c,a,b"},
		{[]string{"a"}, 7, "a"},
		{nil, 3, ""},
	}
	for _, tc := range tests {
		if got := strings.Join(rotate(tc.addrs, tc.k), ","); got != tc.want {
			t.Errorf("rotate(%v, %d) = %s, want %s", tc.addrs, tc.k, got, tc.want)
		}
	}
}
