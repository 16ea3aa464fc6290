package master

import (
	"context"
	"testing"
	"time"
)

// Two agents with node001's identity hold sessions on the leader and on a
// follower at once: past the grace the leader counts and logs it (issue
// #21: no warning at all); a node held once is not counted, and the count
// goes back to 0 when one session ends.
func TestTwoSessionsOfOneNodeOnTwoMastersAreFound(t *testing.T) {
	ms := startClusterWith(t, 3, func(c *Config) { c.HeartbeatInterval = 500 * time.Millisecond })
	waitUntil(t, "3 masters to form", func() bool { return formed(ms) })
	leader := leaderOf(ms)
	follower := followerOf(ms, leader)
	leader.s.dups.mu.Lock()
	leader.s.dups.grace = time.Second
	leader.s.dups.mu.Unlock()
	n1, n2 := simInventory(t, "dgx-h100", "node001"), simInventory(t, "dgx-h100", "node002")
	n1.Generation, n2.Generation = 1, 1
	if _, err := leader.s.putInventory(context.Background(), n1); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.s.putInventory(context.Background(), n2); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the follower holds both nodes", func() bool {
		_, ok1 := follower.s.store.Head("node001")
		_, ok2 := follower.s.store.Head("node002")
		return ok1 && ok2
	})
	if _, ack := openSession(t, dialPlain(t, leader.s.Addr()), n1); ack == nil {
		t.Fatal("node001 on the leader: no HelloAck")
	}
	onFollower, ack := openSession(t, dialPlain(t, follower.s.Addr()), n1)
	if ack == nil {
		t.Fatal("node001 on the follower: no HelloAck")
	}
	if _, ack := openSession(t, dialPlain(t, follower.s.Addr()), n2); ack == nil {
		t.Fatal("node002 on the follower: no HelloAck")
	}
	waitUntil(t, "the leader to count node001 held twice", func() bool {
		now, total := leader.s.dups.counts()
		return now == 1 && total == 1
	})
	_ = onFollower.stream.CloseSend()
	waitUntil(t, "the count to drop when one session ends", func() bool {
		now, total := leader.s.dups.counts()
		return now == 0 && total == 1
	})
}
