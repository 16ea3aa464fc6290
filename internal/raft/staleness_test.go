package raft

import (
	"errors"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/state"
	"github.com/gin-topology/gin/internal/testkit"
)

// TestStalenessWithoutALeader: a server that never heard from a leader
// (no quorum since it opened) reports the time since it opened, growing,
// never 0; the leader reports 0.
func TestStalenessWithoutALeader(t *testing.T) {
	cases := []struct {
		name      string
		bootstrap bool
	}{{"no leader ever", false}, {"the leader", true}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, err := Open(Config{ID: "m1", Bind: "127.0.0.1:0", DataDir: t.TempDir(), Bootstrap: tc.bootstrap, Fast: true}, state.New(nil))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = n.Shutdown(); _ = n.CloseTransport() }()
			if tc.bootstrap {
				testkit.WaitFor(t, 30*time.Second, "m1 leads", n.IsLeader)
				if got := n.Staleness(); got != 0 {
					t.Fatalf("the leader's staleness %s, want 0", got)
				}
				// The leadership barrier latches it, before any read: a
				// leader whose applied index trails its commit by a write in
				// flight is not refused as catching up (CI saw "applied
				// index 9 of 10" on a single-voter leader).
				if err := n.Barrier(t.Context()); err != nil {
					t.Fatal(err)
				}
				if !n.caughtUp.Load() {
					t.Fatal("the leader's barrier returned and CaughtUp is not latched")
				}
				if err := n.CaughtUp(); err != nil {
					t.Fatalf("CaughtUp on the leader after its barrier: %v", err)
				}
				return
			}
			var cu *CatchingUpError
			if err := n.CaughtUp(); !errors.As(err, &cu) || !cu.NoLeader {
				t.Fatalf("CaughtUp without a leader: %v, want a CatchingUpError with NoLeader", err)
			}
			first := n.Staleness()
			if first <= 0 {
				t.Fatalf("staleness without a leader %s, want > 0", first)
			}
			testkit.WaitFor(t, 10*time.Second, "staleness grows", func() bool { return n.Staleness() >= first+20*time.Millisecond })
		})
	}
}
