package nodeplans

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/fakemaster"
	"github.com/gin-topology/gin/internal/plansock"
)

// servePlans serves a fake master whose leader answers with planFor.
func servePlans(t *testing.T, m *fakemaster.Plans) string {
	if m.Plan == nil {
		m.Plan = func(job string) *ginv1.Plan { return planFor(job, time.Time{}) }
	}
	return fakemaster.Serve(t, m)
}

func TestMastersFetch(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(t *testing.T) []string
		notFound bool
		wantErr  string
	}{
		{"an older follower's NOT_LEADER, then the leader", func(t *testing.T) []string {
			return []string{servePlans(t, &fakemaster.Plans{NotLeader: true}), servePlans(t, &fakemaster.Plans{})}
		}, false, ""},
		{"a dead master, then the leader", func(t *testing.T) []string {
			return []string{fakemaster.DeadAddr(t), servePlans(t, &fakemaster.Plans{})}
		}, false, ""},
		{"not found", func(t *testing.T) []string {
			return []string{servePlans(t, &fakemaster.Plans{Fail: status.Error(codes.NotFound, "plan for job \"1\"")})}
		}, true, ""},
		{"all down", func(t *testing.T) []string { return []string{fakemaster.DeadAddr(t), fakemaster.DeadAddr(t)} }, false, "Unavailable"},
		{"a refusal is final", func(t *testing.T) []string {
			return []string{servePlans(t, &fakemaster.Plans{Fail: status.Error(codes.InvalidArgument, "nodes: bad")}), servePlans(t, &fakemaster.Plans{})}
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
