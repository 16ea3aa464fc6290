package master

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// livenessClock is a liveness clock only the test moves (every master of
// a cluster reads it; only the leader's liveness acts on it).
type livenessClock struct{ ns atomic.Int64 }

func newLivenessClock() *livenessClock {
	c := &livenessClock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *livenessClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *livenessClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// A node registered through a follower, on a leader elected long before,
// is heard from at the commit of its registration: it is not marked DOWN
// before the missed heartbeats have passed since then, although no report
// of the follower lists its session yet (the 25,000-agent run saw one
// marked DOWN 1.5 s after its registration). With no session anywhere
// (its agent gone right after registering), it is marked DOWN once they
// have passed. Relayed writes are the leader's only news here: no agent
// holds a session, so the follower's reports list nothing.
func TestNodeRegisteredThroughAFollowerIsHeardAtItsCommit(t *testing.T) {
	const interval = time.Second
	limit := 3 * interval
	clk := newLivenessClock()
	ms := startClusterWith(t, 3, func(c *Config) { c.LivenessClock = clk.now })
	waitUntil(t, "3 masters to bootstrap, elect and register", func() bool { return formed(ms) })
	leader := leaderOf(ms)
	var follower *member
	for _, m := range ms {
		if m != leader {
			follower = m
			break
		}
	}
	waitUntil(t, "the leader's liveness to be armed", func() bool {
		leader.s.live.mu.Lock()
		defer leader.s.live.mu.Unlock()
		return leader.s.live.active
	})
	// Long after the election: its grace for nodes not heard from is over.
	clk.advance(10 * time.Minute)

	ctx := context.Background()
	state := func(node string) ginv1.NodeState {
		h, ok := leader.s.store.Head(node)
		if !ok {
			t.Fatalf("%s is not registered on the leader", node)
		}
		return h.State()
	}
	steps := []struct {
		what     string
		register string        // a node the follower relays a registration of now
		advance  time.Duration // then the clock moves on, and the leader checks
		node     string
		want     ginv1.NodeState
	}{
		{"just registered", "fr01", 0, "fr01", ginv1.NodeState_NODE_STATE_UP},
		{"a heartbeat interval after its registration", "", interval, "fr01", ginv1.NodeState_NODE_STATE_UP},
		{"just within the missed heartbeats", "", limit - interval - time.Millisecond, "fr01", ginv1.NodeState_NODE_STATE_UP},
		{"a second node registered meanwhile", "fr02", 0, "fr02", ginv1.NodeState_NODE_STATE_UP},
		{"past the missed heartbeats, its agent gone", "", 2 * time.Millisecond, "fr01", ginv1.NodeState_NODE_STATE_DOWN},
		{"the second one still within them", "", 0, "fr02", ginv1.NodeState_NODE_STATE_UP},
		{"the second one past them", "", limit, "fr02", ginv1.NodeState_NODE_STATE_DOWN},
	}
	for _, s := range steps {
		if s.register != "" {
			inv := simInventory(t, "rtx3090-nvlink-pair", s.register)
			inv.Generation = 1
			if _, err := follower.s.commitInventory(ctx, s.register, "", inv, nil); err != nil {
				t.Fatalf("%s: relayed registration of %s: %v", s.what, s.register, err)
			}
		}
		clk.advance(s.advance)
		leader.s.live.check(ctx)
		if s.want == ginv1.NodeState_NODE_STATE_DOWN {
			// The check commits DOWN itself, or its loop's check does.
			waitUntil(t, s.what+": "+s.node+" DOWN", func() bool { return state(s.node) == s.want })
			continue
		}
		if got := state(s.node); got != s.want {
			t.Fatalf("%s: %s is %v on the leader, want %v", s.what, s.node, got, s.want)
		}
	}
}
