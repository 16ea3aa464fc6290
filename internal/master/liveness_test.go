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
			st := storeWithWs01(t)
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			now := t0
			var mu sync.Mutex
			var downs []string
			l := newLiveness(interval, 3, st, slog.New(slog.DiscardHandler),
				perNode(func(_ context.Context, node string, s ginv1.NodeState, _ string) error {
					mu.Lock()
					defer mu.Unlock()
					if s == ginv1.NodeState_NODE_STATE_DOWN {
						downs = append(downs, node)
					}
					return nil
				}))
			l.now = func() time.Time { return now }
			l.rearm() // elected at t0
			if tc.seenAt >= 0 {
				now = t0.Add(tc.seenAt)
				l.seen(context.Background(), "ws01")
			}
			now = t0.Add(tc.at)
			l.check(context.Background())
			flushed(l)
			mu.Lock()
			defer mu.Unlock()
			if got := len(downs) == 1; got != tc.wantDown {
				t.Fatalf("marked down = %v (%v), want %v", got, downs, tc.wantDown)
			}
		})
	}
}

// Nodes held by another master are judged from its reports: ages growing
// in the reports or a node leaving them means its agent is silent (DOWN
// after the missed heartbeats); the reports stopping means the master went
// silent, and its nodes get the reattach grace from its last report, as
// after an election.
func TestLivenessFromReports(t *testing.T) {
	const interval = time.Second
	limit := 3 * interval
	grace := reattachGrace(interval)
	type report struct {
		at    time.Duration // after the election
		nodes []string
		ages  []uint32
	}
	tests := []struct {
		name     string
		reports  []report
		at       time.Duration
		wantDown bool
	}{
		{"reported fresh", []report{{1 * time.Second, []string{"ws01"}, []uint32{100}}, {13 * time.Second, []string{"ws01"}, []uint32{400}}}, 14 * time.Second, false},
		{"reporter alive, agent silent (age grows)", []report{{1 * time.Second, []string{"ws01"}, []uint32{100}}, {13 * time.Second, []string{"ws01"}, []uint32{12000}}}, 13*time.Second + 500*time.Millisecond, true},
		{"reporter alive, agent gone from its reports", []report{{1 * time.Second, []string{"ws01"}, []uint32{0}}, {4 * time.Second, nil, nil}, {4*time.Second + interval/2, nil, nil}}, 4*time.Second + interval/2 + 100*time.Millisecond, true},
		{"reporter silent, within the grace", []report{{12 * time.Second, []string{"ws01"}, []uint32{0}}}, 12*time.Second + grace + limit - time.Second, false},
		{"reporter silent, past the grace", []report{{12 * time.Second, []string{"ws01"}, []uint32{0}}}, 12*time.Second + grace + limit + time.Second, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := storeWithWs01(t)
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			now := t0
			l, downs := downRecorder(interval, 3, st, &now)
			for _, r := range tc.reports {
				now = t0.Add(r.at)
				l.report(context.Background(), "m2", sessionReport{full: true, nodes: r.nodes, agesMs: r.ages})
			}
			now = t0.Add(tc.at)
			l.check(context.Background())
			flushed(l)
			if got := len(*downs) == 1; got != tc.wantDown {
				t.Fatalf("marked down = %v (%v), want %v", got, *downs, tc.wantDown)
			}
		})
	}
}

// A DOWN node that a follower reports heard from again comes back UP after
// upAfter fresh heartbeats; a report repeating the same heartbeat is not a
// new sign of life.
func TestLivenessReportsBringANodeBackUp(t *testing.T) {
	const interval = time.Second
	st := storeWithWs01(t)
	if _, err := st.SetNodeState(2, &statev1.SetNodeState{NodeName: "ws01", State: ginv1.NodeState_NODE_STATE_DOWN}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	var ups int
	l := newLiveness(interval, 3, st, slog.New(slog.DiscardHandler),
		perNode(func(_ context.Context, _ string, s ginv1.NodeState, _ string) error {
			if s == ginv1.NodeState_NODE_STATE_UP {
				ups++
			}
			return nil
		}))
	l.now = func() time.Time { return now }
	l.rearm()
	steps := []struct {
		at      time.Duration
		ageMs   uint32
		wantUps int
	}{
		{1000 * time.Millisecond, 0, 0},   // first heartbeat
		{1500 * time.Millisecond, 500, 0}, // the same heartbeat again
		{2000 * time.Millisecond, 0, 1},   // the second one: UP
	}
	for _, s := range steps {
		now = t0.Add(s.at)
		l.report(context.Background(), "m2", sessionReport{full: true, nodes: []string{"ws01"}, agesMs: []uint32{s.ageMs}})
		flushed(l)
		if ups != s.wantUps {
			t.Fatalf("at %s: %d UP proposals, want %d", s.at, ups, s.wantUps)
		}
	}
}

// storeWithWs01 is a state holding node ws01, UP, at generation 1.
func storeWithWs01(t *testing.T) *state.Store {
	t.Helper()
	st := state.New(nil)
	inv := simInventory(t, "rtx3090-nvlink-pair", "ws01")
	inv.Generation = 1
	if _, err := st.PutInventory(1, &statev1.PutInventory{Inventory: inv, ContentHash: "h"}); err != nil {
		t.Fatal(err)
	}
	return st
}

// A relayed write that commits is a sign of life at its commit, in every
// order of the commit and the relaying master's reports: a report listing
// the node before it, a full report built before the node attached but
// accepted after the commit, a delta against a base that predates the
// node, the follower's next report listing it, an election after it. The
// node is marked DOWN once the missed heartbeats have passed since the
// last news of it (its agent gone), never before; an election gives it the
// grace as it gives every node.
func TestLivenessCommittedWriteIsASignOfLife(t *testing.T) {
	const interval = time.Second
	limit := 3 * interval
	grace := reattachGrace(interval)
	fresh := freshWithin(interval, 3)
	reg := 10 * time.Minute // the leader was elected at 0: its grace is long over
	type event struct {
		at     time.Duration // after the election
		commit bool          // ws01's relayed registration commits; else a report from m2
		elect  bool          // a new election (this leader again)
		rep    sessionReport
	}
	full := func(seq uint64, nodes ...string) sessionReport {
		return sessionReport{full: true, seq: seq, freshWithin: fresh, nodes: nodes, agesMs: make([]uint32, len(nodes))}
	}
	delta := func(seq uint64, nodes ...string) sessionReport {
		return sessionReport{seq: seq, base: seq - 1, freshWithin: fresh, nodes: nodes, agesMs: make([]uint32, len(nodes))}
	}
	// reporting: m2 keeps reporting, every half interval from..to, never
	// listing ws01 (its agent is gone); after the commit at reg.
	reporting := func(from, to time.Duration) []event {
		evs := []event{{at: reg, commit: true}}
		seq := uint64(0)
		for at := from; at <= to; at += interval / 2 {
			seq++
			if seq == 1 {
				evs = append(evs, event{at: at, rep: full(seq)})
			} else {
				evs = append(evs, event{at: at, rep: delta(seq)})
			}
		}
		return evs
	}
	tests := []struct {
		name     string
		events   []event
		at       time.Duration
		wantDown bool
	}{
		{"committed, in no report yet", []event{{at: reg, commit: true}}, reg + limit - time.Millisecond, false},
		{"committed, in no report, agent gone", reporting(reg+100*time.Millisecond, reg+limit), reg + limit + time.Millisecond, true},
		{"committed, its master silent since: the grace", []event{{at: reg, commit: true}}, reg + grace + limit - time.Millisecond, false},
		{"committed, its master silent since, past the grace", []event{{at: reg, commit: true}}, reg + grace + limit + time.Millisecond, true},
		{"committed, its master silent after one report: the grace from it", reporting(reg+400*time.Millisecond, reg+400*time.Millisecond), reg + 400*time.Millisecond + grace + limit - time.Millisecond, false},
		{"listed by a report, then committed", []event{{at: reg - 300*time.Millisecond, rep: full(1, "ws01")}, {at: reg, commit: true}}, reg + limit - time.Millisecond, false},
		{"full report built before the node, accepted after the commit", []event{{at: reg, commit: true}, {at: reg + 400*time.Millisecond, rep: full(1)}}, reg + limit - time.Millisecond, false},
		{"full report built before the node, agent gone", reporting(reg+400*time.Millisecond, reg+limit), reg + limit + time.Millisecond, true},
		{"delta whose base predates the node", []event{{at: reg - time.Second, rep: full(1)}, {at: reg, commit: true}, {at: reg + 500*time.Millisecond, rep: delta(2)}}, reg + limit - time.Millisecond, false},
		{"listed by the next report, then fresh in deltas", []event{
			{at: reg - time.Second, rep: full(1)}, {at: reg, commit: true}, {at: reg + 500*time.Millisecond, rep: delta(2, "ws01")},
			{at: reg + time.Second, rep: delta(3)}, {at: reg + 1500*time.Millisecond, rep: delta(4)}, {at: reg + 2*time.Second, rep: delta(5)},
			{at: reg + 2500*time.Millisecond, rep: delta(6)}, {at: reg + 3*time.Second, rep: delta(7)}, {at: reg + 3500*time.Millisecond, rep: delta(8)},
		}, reg + 3600*time.Millisecond, false},
		{"an election after the commit: the grace", []event{{at: reg, commit: true}, {at: reg + time.Second, elect: true}}, reg + time.Second + grace + limit - time.Millisecond, false},
		{"an election after the commit, agent gone past the grace", []event{{at: reg, commit: true}, {at: reg + time.Second, elect: true}}, reg + time.Second + grace + limit + time.Millisecond, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := state.New(nil)
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			now := t0
			l, downs := downRecorder(interval, 3, st, &now)
			inv := simInventory(t, "rtx3090-nvlink-pair", "ws01")
			inv.Generation = 1
			for _, e := range tc.events {
				now = t0.Add(e.at)
				l.check(context.Background()) // the leader checks all along
				flushed(l)
				switch {
				case e.commit:
					if _, err := st.PutInventory(1, &statev1.PutInventory{Inventory: inv, ContentHash: "h"}); err != nil {
						t.Fatal(err)
					}
					l.committed(context.Background(), "ws01", "m2")
				case e.elect:
					l.rearm()
				default:
					if !l.report(context.Background(), "m2", e.rep) {
						t.Fatalf("report %d at %s not applied", e.rep.seq, e.at)
					}
				}
			}
			if len(*downs) != 0 {
				t.Fatalf("marked down before the last check: %v", *downs)
			}
			now = t0.Add(tc.at)
			l.check(context.Background())
			flushed(l)
			if got := len(*downs) == 1; got != tc.wantDown {
				t.Fatalf("marked down = %v (%v), want %v", got, *downs, tc.wantDown)
			}
		})
	}
}

// A DOWN node whose relayed writes commit comes back UP after upAfter of
// them, as after heartbeats; one write alone does not flip it, and a
// master that does not lead records nothing.
func TestLivenessCommittedWritesBringANodeBackUp(t *testing.T) {
	const interval = time.Second
	tests := []struct {
		name    string
		leading bool
		commits []time.Duration
		wantUps int
	}{
		{"one write", true, []time.Duration{time.Second}, 0},
		{"two writes an interval apart", true, []time.Duration{time.Second, 2 * time.Second}, 1},
		{"two writes at once: one sign", true, []time.Duration{time.Second, time.Second}, 0},
		{"not leading", false, []time.Duration{time.Second, 2 * time.Second}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := storeWithWs01(t)
			if _, err := st.SetNodeState(2, &statev1.SetNodeState{NodeName: "ws01", State: ginv1.NodeState_NODE_STATE_DOWN}); err != nil {
				t.Fatal(err)
			}
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			now := t0
			ups := 0
			l := newLiveness(interval, 3, st, slog.New(slog.DiscardHandler),
				perNode(func(_ context.Context, _ string, s ginv1.NodeState, _ string) error {
					if s == ginv1.NodeState_NODE_STATE_UP {
						ups++
					}
					return nil
				}))
			l.now = func() time.Time { return now }
			if tc.leading {
				l.rearm()
			}
			for _, at := range tc.commits {
				now = t0.Add(at)
				l.committed(context.Background(), "ws01", "m2")
				flushed(l)
			}
			if ups != tc.wantUps {
				t.Fatalf("%d UP proposals, want %d", ups, tc.wantUps)
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			if _, ok := l.lastSeen["ws01"]; ok != tc.leading {
				t.Fatalf("heard from recorded = %v, want %v", ok, tc.leading)
			}
		})
	}
}
