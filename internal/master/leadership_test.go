package master

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// leaderGoroutines counts the goroutines of this process that run a
// leader-only loop (started by establishLeadership), whichever server owns
// them.
func leaderGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "master.(*Server).establishLeadership.func") {
			count++
		}
	}
	return count
}

// Leadership has a lifecycle: the leader runs every leader-only loop, a
// follower none; when leadership moves, the old leader's loops all return
// (counted as goroutines) and the new leader's start; when the servers stop,
// no leader-only goroutine is left.
func TestLeadershipLostStopsEveryLeaderLoop(t *testing.T) {
	if n := leaderGoroutines(); n != 0 {
		t.Fatalf("%d leader-only goroutines before the test", n)
	}
	ms := startClusterWith(t, 3, func(c *Config) { c.DeadServerTimeout = time.Hour })
	waitUntil(t, "the cluster", func() bool { return formed(ms) })
	leader := leaderOf(ms)
	// Every loop but the one-shot setup keeps running while this server leads.
	long := int64(len(leader.s.leaderLoops()) - 1)
	if long != 4 {
		t.Fatalf("%d long-running leader loops with a dead-server timeout, want 4 (liveness, plan expiry, live jobs, dead-server cleanup)", long)
	}
	running := func(m *member) func() bool {
		return func() bool { return m.s.lead.running.Load() == long }
	}
	waitUntil(t, "the leader's loops (setup done)", running(leader))
	for _, m := range ms {
		if m != leader {
			if n := m.s.lead.running.Load(); n != 0 {
				t.Fatalf("follower %s runs %d leader-only goroutines", m.s.cfg.ID, n)
			}
		}
	}
	if n := leaderGoroutines(); int64(n) != long {
		t.Fatalf("%d leader-only goroutines in the process, want %d (the leader's)", n, long)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := leader.s.node.TransferLeadership(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the old leader's loops to stop", func() bool { return leader.s.lead.running.Load() == 0 })
	var next *member
	waitUntil(t, "a new leader running its loops", func() bool {
		next = leaderOf(ms)
		return next != nil && next != leader && running(next)()
	})
	waitUntil(t, "only the new leader's loops in the process", func() bool { return int64(leaderGoroutines()) == long })

	for _, m := range ms {
		m.stop()
	}
	if n := leaderGoroutines(); n != 0 {
		t.Fatalf("%d leader-only goroutines left after every server stopped", n)
	}
}

// A leader that loses its quorum (both followers gone, not a hand-off)
// steps down and stops every leader-only loop.
func TestLeaderWithoutQuorumStopsItsLoops(t *testing.T) {
	ms := startCluster(t, 3)
	waitUntil(t, "the cluster", func() bool { return formed(ms) })
	leader := leaderOf(ms)
	long := int64(len(leader.s.leaderLoops()) - 1)
	waitUntil(t, "the leader's loops", func() bool { return leader.s.lead.running.Load() == long })
	for _, m := range ms {
		if m != leader {
			m.crash()
		}
	}
	waitUntil(t, "the leader to step down and stop its loops", func() bool {
		return !leader.s.node.IsLeader() && leader.s.lead.running.Load() == 0
	})
}
