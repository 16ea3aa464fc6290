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
//
// The leader's liveness (its check, the reports' age, the grace) runs on a
// clock the test moves, one heartbeat interval at a time and only once the
// follower's report has arrived at the current instant and a check has run:
// a report delayed by load is waited for, never aged past reportLost.
func TestTwoSessionsOfOneNodeOnTwoMastersAreFound(t *testing.T) {
	const interval, grace = 500 * time.Millisecond, time.Second
	clock := newFakeClock()
	ms := startClusterWith(t, 3, func(c *Config) { c.HeartbeatInterval, c.LivenessClock = interval, clock })
	waitUntil(t, "3 masters to form", func() bool { return formed(ms) })
	leader := leaderOf(ms)
	follower := followerOf(ms, leader)
	d := &leader.s.dups
	d.mu.Lock()
	d.grace = grace
	d.mu.Unlock()
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

	live := leader.s.live
	// reported: the follower's latest report, at the clock's current
	// instant, lists node001 (want) or not.
	reported := func(want bool) func() bool {
		return func() bool {
			now := clock.Now()
			live.mu.Lock()
			defer live.mu.Unlock()
			r := live.reporters[follower.s.cfg.ID]
			if r == nil || !r.at.Equal(now) {
				return false
			}
			_, ok := r.nodes["node001"]
			return ok == want
		}
	}
	// step moves the clock one interval, once the follower's report is
	// fresh, and returns after the leader's duplicate check ran at the new
	// instant (the report it reads is at most one interval old, within
	// reportLost).
	step := func(what string, held bool) time.Time {
		t.Helper()
		waitUntil(t, what, reported(held))
		clock.Advance(interval)
		at := clock.Now()
		waitUntil(t, "the leader's duplicate check at "+at.String(), func() bool {
			d.mu.Lock()
			defer d.mu.Unlock()
			return d.done.Equal(at)
		})
		return at
	}
	first := func() (time.Time, bool) {
		d.mu.Lock()
		defer d.mu.Unlock()
		at, ok := d.since["node001"]
		return at, ok
	}

	// Seen twice, then counted only once the grace has passed on the
	// leader's clock.
	at := step("the follower's report of node001", true)
	since, ok := first()
	if !ok {
		t.Fatal("the leader's check did not see node001 held twice")
	}
	for at.Sub(since) < grace {
		if now, total := d.counts(); now != 0 || total != 0 {
			t.Fatalf("node001 counted %d (total %d) %s after it was seen held twice, within the grace %s", now, total, at.Sub(since), grace)
		}
		at = step("the follower's report of node001", true)
	}
	if now, total := d.counts(); now != 1 || total != 1 {
		t.Fatalf("node001 held twice for %s (grace %s): counted %d, total %d; want 1, 1", at.Sub(since), grace, now, total)
	}
	// node002, held once, is not counted; node001's follower session ends:
	// the count drops, the total stays.
	_ = onFollower.stream.CloseSend()
	step("the follower's report without node001", false)
	if now, total := d.counts(); now != 0 || total != 1 {
		t.Fatalf("after node001's second session ended: counted %d, total %d; want 0, 1", now, total)
	}
}
