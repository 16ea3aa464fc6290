package master

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/redirect"
)

// TestReadsRefusedUntilCaughtUp (issue #21 point 6): a master restarted
// while the rest of the cluster is down has heard from no leader since it
// started; its reads would come from a state older than the cluster's, so
// it refuses them UNAVAILABLE saying it is catching up (a refusal clients
// walk past, redirect.MoveOn) instead of answering "0 nodes, staleness 0s".
// Once the others are back and it applied what the leader committed, it
// answers again, off the leader, with a staleness above 0 and the lag it
// knows.
func TestReadsRefusedUntilCaughtUp(t *testing.T) {
	ms := startCluster(t, 3)
	waitUntil(t, "three masters form", func() bool { return formed(ms) })
	l := leaderNow(t, ms)
	f := followerOf(ms, l)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list := func() (*ginv1.ListNodesResponse, error) {
		return ginv1.NewTopologyServiceClient(dialPlain(t, f.s.Addr())).ListNodes(ctx, &ginv1.ListNodesRequest{Consistency: ginv1.ReadConsistency_READ_CONSISTENCY_ANY})
	}
	var resp *ginv1.ListNodesResponse
	waitUntil(t, "the follower answers", func() bool { var err error; resp, err = list(); return err == nil })
	if r := resp.GetRead(); r.GetLeader() || r.GetStaleness().AsDuration() <= 0 || r.GetServedBy() != f.s.cfg.ID {
		t.Fatalf("a follower's read info %v, want served by %s off the leader with staleness > 0", r, f.s.cfg.ID)
	}
	before := resp.GetRead().GetIndex()

	for _, m := range ms {
		m.crash()
	}
	f.restart(t)
	_, err := list()
	if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "heard from no leader since it started") {
		t.Fatalf("read on a restarted master without a quorum: %v, want UNAVAILABLE, catching up", err)
	}
	if !redirect.MoveOn(err) {
		t.Fatalf("clients stop at the refusal %v, want them to ask the next master", err)
	}

	for _, m := range ms {
		if m != f {
			m.restart(t)
		}
	}
	waitUntil(t, "the restarted master answers again", func() bool {
		var err error
		resp, err = list()
		if err != nil && status.Code(err) != codes.Unavailable {
			t.Fatalf("read while catching up: %v, want UNAVAILABLE or an answer", err)
		}
		return err == nil && resp.GetRead().GetIndex() >= before
	})
	if r := resp.GetRead(); !r.GetLeader() && r.GetStaleness().AsDuration() <= 0 {
		t.Fatalf("read after catching up %v, want staleness > 0 off the leader", r)
	}
}
