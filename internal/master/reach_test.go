package master

import (
	"context"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// membersOf is m's GetClusterInfo answer, by member id.
func membersOf(t *testing.T, m *member) map[string]*ginv1.Member {
	t.Helper()
	resp, err := m.s.admin.GetClusterInfo(context.Background(), &ginv1.GetClusterInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*ginv1.Member{}
	for _, mem := range resp.GetMembers() {
		out[mem.GetId()] = mem
	}
	return out
}

// A stopped follower is reported unreachable by the leader, with a last
// contact that keeps growing, while the others stay reachable; a
// follower's own answer leaves reachability unset (only the leader knows).
func TestLeaderReportsAStoppedFollowerUnreachable(t *testing.T) {
	ms := startCluster(t, 3)
	waitUntil(t, "3 masters to form", func() bool { return formed(ms) })
	leader := leaderNow(t, ms)
	waitUntil(t, "every member reachable", func() bool {
		for _, mem := range membersOf(t, leader) {
			if !mem.GetReachable() || mem.LastContactMs == nil {
				return false
			}
		}
		return true
	})
	gone := followerOf(ms, leader)
	for id, mem := range membersOf(t, gone) {
		if mem.Reachable != nil || mem.LastContactMs != nil {
			t.Fatalf("follower %s answers reachability of %s (%v, %v); only the leader knows", gone.s.cfg.ID, id, mem.Reachable, mem.LastContactMs)
		}
	}
	gone.crash()
	id := gone.s.cfg.ID
	var first uint64
	waitUntil(t, id+" unreachable", func() bool {
		if leaderOf(ms) != leader {
			t.Fatal("leadership moved; the test needs the same leader")
		}
		mem := membersOf(t, leader)[id]
		first = mem.GetLastContactMs()
		return mem.Reachable != nil && !mem.GetReachable() && mem.LastContactMs != nil
	})
	waitUntil(t, id+"'s last contact to grow", func() bool {
		return membersOf(t, leader)[id].GetLastContactMs() > first
	})
	waitUntil(t, "the other members reachable", func() bool {
		for mid, mem := range membersOf(t, leader) {
			if mid != id && !mem.GetReachable() {
				return false
			}
		}
		return true
	})
}
