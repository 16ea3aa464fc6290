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
// follower answers with the leader's view, so `ginctl members` shows the
// stopped master whichever master answers.
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
	// A follower answers with the leader's view (it asks the leader).
	for id, mem := range membersOf(t, gone) {
		if !mem.GetReachable() || mem.LastContactMs == nil {
			t.Fatalf("follower %s: %s reachable %v, last contact %v; want the leader's view (reachable)", gone.s.cfg.ID, id, mem.Reachable, mem.LastContactMs)
		}
	}
	var other *member
	for _, m := range ms {
		if m != leader && m != gone {
			other = m
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
	// The remaining follower shows the stopped master as the leader sees
	// it: unreachable, with a last contact.
	waitUntil(t, "the other follower to show "+id+" unreachable", func() bool {
		mem := membersOf(t, other)[id]
		return mem.Reachable != nil && !mem.GetReachable() && mem.LastContactMs != nil
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

// Every member's HTTP address (its --http-bind port on the host clients
// dial) is in GetClusterInfo, for `ginctl export prometheus-sd`.
func TestMembersCarryTheirHTTPAddress(t *testing.T) {
	ms := startClusterWith(t, 3, func(c *Config) { c.HTTPBind = "127.0.0.1:0" })
	waitUntil(t, "3 masters to form", func() bool { return formed(ms) })
	leader := leaderNow(t, ms)
	waitUntil(t, "every member's HTTP address registered", func() bool {
		for _, m := range ms {
			mem, ok := membersOf(t, leader)[m.s.cfg.ID]
			if !ok || m.s.httpAdvertise() == "" || mem.GetHttpAddress() != m.s.httpAdvertise() {
				return false
			}
		}
		return true
	})
}
