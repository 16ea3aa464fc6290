package master

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/inventory"
)

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
	clk := newFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) // every master reads it; only the leader's liveness acts on it
	ms := startClusterWith(t, 3, func(c *Config) { c.LivenessClock = clk })
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
	clk.Advance(10 * time.Minute)

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
		clk.Advance(s.advance)
		leader.s.live.check(ctx)
		if s.want == ginv1.NodeState_NODE_STATE_DOWN {
			// The check queues DOWN (or its loop's check does); the
			// flusher commits it.
			waitUntil(t, s.what+": "+s.node+" DOWN", func() bool { return state(s.node) == s.want })
			continue
		}
		if got := state(s.node); got != s.want {
			t.Fatalf("%s: %s is %v on the leader, want %v", s.what, s.node, got, s.want)
		}
	}
}

// The relayed write names the relaying master: a known one is recorded as
// holding the node's session until its reports list it, an unknown one
// (an older master) attributes the write to none, and a server_id past
// the bound is refused with nothing committed. The heartbeat is long so
// that no follower report ends the attribution meanwhile.
func TestRelayedWriteNamesItsMaster(t *testing.T) {
	ms := startClusterWith(t, 3, func(c *Config) { c.HeartbeatInterval = time.Minute })
	waitUntil(t, "3 masters to bootstrap, elect and register", func() bool { return formed(ms) })
	tests := []struct {
		name, node, serverID string // serverID "follower": a follower's
		wantCode             codes.Code
		wantVia              bool
	}{
		{"the follower that relays it", "rv01", "follower", codes.OK, true},
		{"an older master (none)", "rv02", "", codes.OK, false},
		{"a master the leader does not know", "rv03", "m9", codes.OK, false},
		{"a server_id past the bound", "rv04", strings.Repeat("m", inventory.MaxStringLen+1), codes.InvalidArgument, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv := simInventory(t, "rtx3090-nvlink-pair", tc.node)
			inv.Generation = 1
			// Sent to the leader, again if leadership moved meanwhile (a
			// loaded machine): its liveness must be armed first.
			var leader *member
			var err error
			id := tc.serverID
			waitUntil(t, "the write answered by an armed leader", func() bool {
				if leader = leaderOf(ms); leader == nil {
					return false
				}
				leader.s.live.mu.Lock()
				active := leader.s.live.active
				leader.s.live.mu.Unlock()
				if !active {
					return false
				}
				if tc.serverID == "follower" {
					for _, m := range ms {
						if m != leader {
							id = m.s.cfg.ID
						}
					}
				}
				relay := ginv1.NewRelayServiceClient(dialPlain(t, leader.s.Addr()))
				_, err = relay.PutInventory(context.Background(), &ginv1.RelayServicePutInventoryRequest{NodeName: tc.node, ServerId: id,
					Update: &ginv1.RelayServicePutInventoryRequest_Inventory{Inventory: inv}})
				c := status.Code(err)
				return c != codes.Unavailable && c != codes.FailedPrecondition
			})
			if got := status.Code(err); got != tc.wantCode {
				t.Fatalf("PutInventory: %v, want %v", err, tc.wantCode)
			}
			_, registered := leader.s.store.Head(tc.node)
			if registered != (tc.wantCode == codes.OK) {
				t.Fatalf("registered = %v after %v", registered, err)
			}
			l := leader.s.live
			l.mu.Lock()
			defer l.mu.Unlock()
			_, heard := l.lastSeen[tc.node]
			if heard != registered {
				t.Fatalf("heard from at the commit = %v, want %v", heard, registered)
			}
			want := ""
			if tc.wantVia {
				want = id
			}
			if v := l.relayed[tc.node]; v.from != want {
				t.Fatalf("attributed to %q, want %q", v.from, want)
			}
		})
	}
}
