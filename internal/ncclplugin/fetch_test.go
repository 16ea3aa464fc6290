package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gin-topology/gin/internal/fakemaster"
)

func TestFetchMovesOnAndStopsOnRefusals(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T) (addrs []string, leader *fakemaster.Plans)
		wantErr string // "" = a plan from the leader
	}{
		{"an older follower's NOT_LEADER, then the leader", func(t *testing.T) ([]string, *fakemaster.Plans) {
			leader := &fakemaster.Plans{}
			return []string{fakemaster.Serve(t, &fakemaster.Plans{NotLeader: true}), fakemaster.Serve(t, leader)}, leader
		}, ""},
		{"an unreachable master, then the leader", func(t *testing.T) ([]string, *fakemaster.Plans) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			dead := lis.Addr().String()
			_ = lis.Close()
			leader := &fakemaster.Plans{}
			return []string{dead, fakemaster.Serve(t, leader)}, leader
		}, ""},
		{"a refusal is final, the next master is not asked", func(t *testing.T) ([]string, *fakemaster.Plans) {
			other := &fakemaster.Plans{}
			refusing := &fakemaster.Plans{Fail: status.Error(codes.InvalidArgument, "nodes: unknown node n9")}
			return []string{fakemaster.Serve(t, refusing), fakemaster.Serve(t, other)}, other
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
				if n := leader.Calls.Load(); n != 0 {
					t.Fatalf("the next master was asked %d times after a final refusal", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.plan.GetJobId() != "j1" || leader.Calls.Load() != 1 {
				t.Fatalf("plan %v from %s; leader asked %d times", got.plan, got.source, leader.Calls.Load())
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
