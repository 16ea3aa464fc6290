package main

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
)

// fakeAdminMaster answers GetClusterInfo with a fixed error (or success) and
// counts the calls.
type fakeAdminMaster struct {
	ginv1.UnimplementedAdminServiceServer
	err   error
	calls atomic.Int32
}

func (f *fakeAdminMaster) GetClusterInfo(_ context.Context, _ *ginv1.GetClusterInfoRequest) (*ginv1.GetClusterInfoResponse, error) {
	f.calls.Add(1)
	if f.err != nil {
		return nil, f.err
	}
	return &ginv1.GetClusterInfoResponse{ServerId: "leader"}, nil
}

func serveAdmin(t *testing.T, f *fakeAdminMaster) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	ginv1.RegisterAdminServiceServer(s, f)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

func TestDoMovesOnOnlyForNotLeaderAndUnavailable(t *testing.T) {
	// A master older than forwarding answers a write NOT_LEADER.
	notLeader, err := status.New(codes.FailedPrecondition, "not the leader; leader is m2").WithDetails(apierr.NotLeaderInfo("m2"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		first      error
		wantCode   codes.Code
		secondUsed bool
	}{
		{"an older follower's NOT_LEADER", notLeader.Err(), codes.OK, true},
		{"the first master is unavailable", status.Error(codes.Unavailable, "shutting down"), codes.OK, true},
		{"a refusal is final", status.Error(codes.FailedPrecondition, "stale generation"), codes.FailedPrecondition, false},
		{"bad input is final", status.Error(codes.InvalidArgument, "job_id: empty"), codes.InvalidArgument, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := &fakeAdminMaster{err: tc.first}, &fakeAdminMaster{}
			c, err := newMasterClient([]string{serveAdmin(t, a), serveAdmin(t, b)})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = c.Do(ctx, func(ctx context.Context, conn *grpc.ClientConn) error {
				_, err := ginv1.NewAdminServiceClient(conn).GetClusterInfo(ctx, &ginv1.GetClusterInfoRequest{})
				return err
			})
			if status.Code(err) != tc.wantCode {
				t.Fatalf("Do = %v, want code %v", err, tc.wantCode)
			}
			if used := b.calls.Load() > 0; used != tc.secondUsed {
				t.Fatalf("second master called = %v, want %v", used, tc.secondUsed)
			}
		})
	}
}
