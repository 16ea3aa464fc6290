package master

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/state"
)

// After an election the new leader waits for the missed heartbeats plus the
// agents' reattach grace before it marks a node it has not heard from down;
// a node heard from after the election is judged by the missed heartbeats
// alone.
func TestLivenessGraceAfterElection(t *testing.T) {
	const interval = time.Second
	tests := []struct {
		name     string
		seenAt   time.Duration // after the election; < 0: not heard from
		at       time.Duration // when check runs, after the election
		wantDown bool
	}{
		{"not heard from, within the missed heartbeats", -1, 3 * interval, false},
		{"not heard from, past the missed heartbeats but within the reattach grace", -1, 3*interval + reattachGrace(interval) - time.Second, false},
		{"not heard from past the grace", -1, 3*interval + reattachGrace(interval) + time.Second, true},
		{"heard from after the election, then silent", time.Second, time.Second + 3*interval + time.Second, true},
		{"heard from recently", 5 * time.Second, 6 * time.Second, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := state.New(nil)
			inv := simInventory(t, "rtx3090-nvlink-pair", "ws01")
			inv.Generation = 1
			if _, err := st.PutInventory(1, &statev1.PutInventory{Inventory: inv, ContentHash: "h"}); err != nil {
				t.Fatal(err)
			}
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			now := t0
			var mu sync.Mutex
			var downs []string
			l := newLiveness(interval, 3, st, slog.New(slog.DiscardHandler),
				func(_ context.Context, node string, s ginv1.NodeState, _ string) error {
					mu.Lock()
					defer mu.Unlock()
					if s == ginv1.NodeState_NODE_STATE_DOWN {
						downs = append(downs, node)
					}
					return nil
				})
			l.now = func() time.Time { return now }
			l.rearm() // elected at t0
			if tc.seenAt >= 0 {
				now = t0.Add(tc.seenAt)
				l.seen(context.Background(), "ws01")
			}
			now = t0.Add(tc.at)
			l.check(context.Background())
			mu.Lock()
			defer mu.Unlock()
			if got := len(downs) == 1; got != tc.wantDown {
				t.Fatalf("marked down = %v (%v), want %v", got, downs, tc.wantDown)
			}
		})
	}
}

// A transition asked for while another is being committed for the same
// node is proposed right after it, not dropped: a node whose heartbeats
// resume while its DOWN entry is still in flight comes back UP.
func TestLivenessKeepsATransitionAskedForWhileOneIsInFlight(t *testing.T) {
	st := state.New(nil)
	release := make(chan struct{})
	calls := make(chan ginv1.NodeState, 4)
	l := newLiveness(time.Second, 3, st, slog.New(slog.DiscardHandler),
		func(_ context.Context, _ string, s ginv1.NodeState, _ string) error {
			calls <- s
			if s == ginv1.NodeState_NODE_STATE_DOWN {
				<-release // the DOWN entry is still being committed
			}
			return nil
		})
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.propose(context.Background(), "ws01", ginv1.NodeState_NODE_STATE_DOWN, "missed heartbeats")
	}()
	if got := <-calls; got != ginv1.NodeState_NODE_STATE_DOWN {
		t.Fatalf("first proposal %v, want DOWN", got)
	}
	// Meanwhile: UP twice (the second replaces the first), returning at once.
	l.propose(context.Background(), "ws01", ginv1.NodeState_NODE_STATE_UP, "heartbeats resumed (2 received)")
	l.propose(context.Background(), "ws01", ginv1.NodeState_NODE_STATE_UP, "heartbeats resumed (3 received)")
	close(release)
	<-done
	close(calls)
	var after []ginv1.NodeState
	for s := range calls {
		after = append(after, s)
	}
	if len(after) != 1 || after[0] != ginv1.NodeState_NODE_STATE_UP {
		t.Fatalf("proposed after DOWN: %v, want one UP", after)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending["ws01"] || len(l.next) != 0 {
		t.Fatalf("bookkeeping left: pending %v, next %v", l.pending, l.next)
	}
}
