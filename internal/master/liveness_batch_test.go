package master

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/state"
	"github.com/gin-topology/gin/internal/testkit"
)

const (
	nodeUp   = ginv1.NodeState_NODE_STATE_UP
	nodeDown = ginv1.NodeState_NODE_STATE_DOWN
)

// perNode is setStates for the tests of liveness's decisions: fn is told
// every change of an entry, in order.
func perNode(fn func(ctx context.Context, node string, st ginv1.NodeState, reason string) error) func(context.Context, []stateChange) (uint64, error) {
	return func(ctx context.Context, changes []stateChange) (uint64, error) {
		for _, c := range changes {
			if err := fn(ctx, c.node, c.state, c.reason); err != nil {
				return 0, err
			}
		}
		return 0, nil
	}
}

// flushed commits what l queued, as its flusher would (the tests of its
// decisions run none).
func flushed(l *liveness) {
	for {
		if n, err := l.flush(context.Background()); n == 0 || err != nil {
			return
		}
	}
}

// fakeRaft commits entries to a store as the FSM would, one index each:
// a lone change as SetNodeState, more as SetNodeStates (what
// Server.setNodeStates proposes). Every entry is first sent on started
// (when set), then waits for gate (when set; closed: no wait); the first
// fail entries fail without committing.
type fakeRaft struct {
	st      *state.Store
	started chan []stateChange
	gate    chan struct{}

	mu      sync.Mutex
	fail    int
	entries [][]stateChange
}

func (f *fakeRaft) setStates(ctx context.Context, changes []stateChange) (uint64, error) {
	if f.started != nil {
		select {
		case f.started <- slices.Clone(changes):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		return 0, errors.New("raft apply: no quorum (test)")
	}
	f.entries = append(f.entries, slices.Clone(changes))
	index := f.st.Index() + 1
	cmds := make([]*statev1.SetNodeState, len(changes))
	for i, c := range changes {
		cmds[i] = &statev1.SetNodeState{NodeName: c.node, State: c.state, Reason: c.reason}
	}
	if len(cmds) == 1 {
		_, err := f.st.SetNodeState(index, cmds[0])
		return index, err
	}
	_, err := f.st.SetNodeStates(index, &statev1.SetNodeStates{Changes: cmds})
	return index, err
}

// committed is the entries committed so far.
func (f *fakeRaft) committed() [][]stateChange {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.entries)
}

// leafStore holds n nodes, UP, named leaf000, leaf001, ...
func leafStore(t testing.TB, n int) (*state.Store, []string) {
	t.Helper()
	st := state.New(nil)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("leaf%03d", i)
		inv := &ginv1.NodeInventory{NodeName: names[i], Generation: 1, Host: &ginv1.Host{MachineId: "m-" + names[i]}}
		if _, err := st.PutInventory(uint64(i+1), &statev1.PutInventory{Inventory: inv, ContentHash: "h"}); err != nil {
			t.Fatal(err)
		}
	}
	return st, names
}

// batchLiveness is a leader's liveness over st on the clock *now, with its
// flusher running (as run starts it) and committing through f, and a log
// written to the returned buffer.
func batchLiveness(t *testing.T, st *state.Store, f *fakeRaft, now *time.Time) (*liveness, *testkit.LogBuffer) {
	t.Helper()
	var logs testkit.LogBuffer
	l := newLiveness(time.Second, 3, st, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), f.setStates)
	l.now = func() time.Time { return *now }
	l.rearm()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.flushLoop(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return l, &logs
}

// next is the next entry sent on ch (fakeRaft.started), failing the test
// after a while.
func next(t *testing.T, ch <-chan []stateChange) []stateChange {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(30 * time.Second):
		t.Fatal("timed out waiting for an entry")
		return nil
	}
}

// idle waits until l's queue is empty and no entry is in flight.
func idle(t *testing.T, l *liveness) {
	t.Helper()
	waitUntil(t, "the queued node states to commit", func() bool {
		n, busy := l.queued()
		return n == 0 && !busy
	})
}

// inState counts the nodes st records in s.
func inState(st *state.Store, names []string, s ginv1.NodeState) int {
	n := 0
	for _, name := range names {
		if h, ok := st.Head(name); ok && h.State() == s {
			n++
		}
	}
	return n
}

// A leaf switch that fails: its nodes' sessions stop together, and the
// leader marks them all DOWN at its first check past the missed
// heartbeats, in one entry per maxBatch nodes (a master's own sessions and
// a follower's reports alike), within the missed-heartbeat window plus one
// check period, and none before.
func TestLivenessMarksALeafDownInFewEntries(t *testing.T) {
	const interval = time.Second
	limit := 3 * interval
	tests := []struct {
		name        string
		nodes       int
		reported    bool // the sessions are a follower's, in its reports
		wantEntries int
	}{
		{"a leaf of 512, own sessions", 512, false, 1},
		{"a leaf of 512, a follower's sessions", 512, true, 1},
		{"1,200 nodes: maxBatch an entry", 1200, false, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, names := leafStore(t, tc.nodes)
			t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
			now := t0
			f := &fakeRaft{st: st}
			l, logs := batchLiveness(t, st, f, &now)
			before := st.Index()
			// The last sign of life of every node, at t0 + 1 s.
			now = t0.Add(time.Second)
			if tc.reported {
				l.report(context.Background(), "m2", sessionReport{full: true, seq: 1, nodes: names, agesMs: make([]uint32, len(names))})
			} else {
				for _, n := range names {
					l.seen(context.Background(), n)
				}
			}
			lastSign := now
			// The switch fails: from here on nothing is heard. The leader
			// checks every half interval; a follower whose agents are cut
			// off keeps reporting them, ageing.
			var downAt time.Time
			for tick := t0.Add(interval / 2); tick.Before(lastSign.Add(limit + 2*interval)); tick = tick.Add(interval / 2) {
				now = tick
				if tc.reported && tick.After(lastSign) {
					ages := make([]uint32, len(names))
					for i := range ages {
						ages[i] = uint32(tick.Sub(lastSign).Milliseconds())
					}
					l.report(context.Background(), "m2", sessionReport{full: true, seq: 1, nodes: names, agesMs: ages})
				}
				l.check(context.Background())
				idle(t, l)
				switch down := inState(st, names, nodeDown); {
				case down == 0:
				case down != len(names):
					t.Fatalf("at %s: %d of %d nodes DOWN, want all or none", tick.Sub(lastSign), down, len(names))
				case downAt.IsZero():
					downAt = tick
				}
			}
			if downAt.IsZero() {
				t.Fatal("no node marked DOWN")
			}
			if took := downAt.Sub(lastSign); took <= limit || took > limit+interval/2 {
				t.Fatalf("all DOWN %s after the last sign of life, want within (%s, %s]", took, limit, limit+interval/2)
			}
			entries := f.committed()
			if len(entries) != tc.wantEntries || st.Index()-before != uint64(tc.wantEntries) {
				t.Fatalf("%d entries (index %d -> %d), want %d", len(entries), before, st.Index(), tc.wantEntries)
			}
			if len(entries) > 8 {
				t.Fatalf("%d entries for %d nodes, the goal is at most 8", len(entries), tc.nodes)
			}
			for i, e := range entries {
				if len(e) > maxBatch {
					t.Fatalf("entry %d carries %d changes, more than %d", i, len(e), maxBatch)
				}
			}
			if got := logCount(logs, `msg="node state changed"`); got != tc.nodes {
				t.Errorf("%d node state lines, want one a node (%d)", got, tc.nodes)
			}
			if got := logCount(logs, `msg="node state changes committed in one entry"`); got != tc.wantEntries {
				t.Errorf("%d entry lines, want %d", got, tc.wantEntries)
			}
		})
	}
}

// The leaf comes back: its nodes' heartbeats resume and each comes back UP
// at its upAfter-th; the UP changes asked for while the first entry commits
// go together in the next one (own sessions, one heartbeat at a time), a
// follower's report brings them all in one.
func TestLivenessBringsALeafBackUpInFewEntries(t *testing.T) {
	const interval = time.Second
	tests := []struct {
		name     string
		reported bool
		want     []int // changes per entry
	}{
		{"own sessions, heartbeats one at a time while the first entry commits", false, []int{1, 511}},
		{"a follower's reports", true, []int{512}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, names := leafStore(t, 512)
			for _, n := range names {
				if _, err := st.SetNodeState(st.Index()+1, &statev1.SetNodeState{NodeName: n, State: nodeDown}); err != nil {
					t.Fatal(err)
				}
			}
			t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
			now := t0
			f := &fakeRaft{st: st, started: make(chan []stateChange, 1024), gate: make(chan struct{})}
			l, _ := batchLiveness(t, st, f, &now)
			for beat := 1; beat <= upAfter; beat++ {
				now = t0.Add(time.Duration(beat) * interval)
				if tc.reported {
					l.report(context.Background(), "m2", sessionReport{full: true, seq: uint64(beat), nodes: names, agesMs: make([]uint32, len(names))})
					continue
				}
				for i, n := range names {
					l.seen(context.Background(), n)
					if beat == upAfter && i == 0 {
						next(t, f.started) // the first UP is in flight: the others queue
					}
				}
			}
			close(f.gate)
			idle(t, l)
			if up := inState(st, names, nodeUp); up != len(names) {
				t.Fatalf("%d of %d nodes UP after %d heartbeats", up, len(names), upAfter)
			}
			var got []int
			for _, e := range f.committed() {
				got = append(got, len(e))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("changes per entry %v, want %v", got, tc.want)
			}
		})
	}
}

// A change asked for while queued replaces the queued one (latest wins);
// one that asks for the recorded state, or the state the entry in flight
// gives, takes the queued change away: nothing superseded is committed.
func TestLivenessBatchSupersedes(t *testing.T) {
	type ask struct {
		node  string
		state ginv1.NodeState
		why   string
	}
	tests := []struct {
		name string
		// inFlight is committed first and held in flight while asks are
		// queued; then everything is released.
		inFlight ask
		asks     []ask
		want     [][]stateChange // entries after the one in flight
	}{
		{"queued DOWN, then UP (its recorded state): nothing", ask{"n0", nodeDown, "a"},
			[]ask{{"n1", nodeDown, "b"}, {"n1", nodeUp, "c"}}, nil},
		{"asked twice: the latest reason", ask{"n0", nodeDown, "a"},
			[]ask{{"n1", nodeDown, "first"}, {"n2", nodeDown, "b"}, {"n1", nodeDown, "latest"}},
			[][]stateChange{{{"n1", nodeDown, "latest"}, {"n2", nodeDown, "b"}}}},
		{"UP asked while its DOWN is in flight: committed right after", ask{"n0", nodeDown, "a"},
			[]ask{{"n0", nodeUp, "heartbeats resumed (2 received)"}, {"n0", nodeUp, "heartbeats resumed (3 received)"}},
			[][]stateChange{{{"n0", nodeUp, "heartbeats resumed (3 received)"}}}},
		{"UP, then DOWN again, while DOWN is in flight: nothing more", ask{"n0", nodeDown, "a"},
			[]ask{{"n0", nodeUp, "b"}, {"n0", nodeDown, "c"}}, nil},
		{"the recorded state: dropped", ask{"n0", nodeDown, "a"},
			[]ask{{"n1", nodeUp, "b"}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := leafStore(t, 3)
			// leafStore names them leaf000..; the table says n0..
			rename := func(n string) string { return "leaf00" + strings.TrimPrefix(n, "n") }
			now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
			f := &fakeRaft{st: st, started: make(chan []stateChange, 16), gate: make(chan struct{})}
			l, _ := batchLiveness(t, st, f, &now)
			l.propose(stateChange{rename(tc.inFlight.node), tc.inFlight.state, tc.inFlight.why})
			next(t, f.started)
			for _, a := range tc.asks {
				l.propose(stateChange{rename(a.node), a.state, a.why})
			}
			close(f.gate)
			idle(t, l)
			entries := f.committed()
			if len(entries) == 0 || len(entries[0]) != 1 || entries[0][0].node != rename(tc.inFlight.node) {
				t.Fatalf("first entry %v, want the one in flight", entries)
			}
			var want [][]stateChange
			for _, e := range tc.want {
				var w []stateChange
				for _, c := range e {
					c.node = rename(c.node)
					w = append(w, c)
				}
				want = append(want, w)
			}
			if got := entries[1:]; !slices.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("entries after the one in flight %v, want %v", got, want)
			}
		})
	}
}

// A commit that fails keeps its changes queued, in their place, unless
// superseded meanwhile, logs one line with their count, and is tried again
// at the next check (not at every change queued meanwhile); a master that
// stops leading drops them.
func TestLivenessRetriesAFailedCommit(t *testing.T) {
	tests := []struct {
		name string
		// during runs while the failing entry (leaf000, leaf001 DOWN) is
		// in flight.
		during func(l *liveness)
		want   []stateChange // the next entry; nil: none
	}{
		{"retried, with what queued meanwhile", func(l *liveness) {
			l.propose(stateChange{"leaf002", nodeDown, "c"})
		}, []stateChange{{"leaf000", nodeDown, "a"}, {"leaf001", nodeDown, "b"}, {"leaf002", nodeDown, "c"}}},
		{"one superseded meanwhile: the other retried", func(l *liveness) {
			l.propose(stateChange{"leaf000", nodeUp, "heartbeats resumed"})
		}, []stateChange{{"leaf001", nodeDown, "b"}}},
		{"no longer leading: dropped", func(l *liveness) { l.deactivate() }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := leafStore(t, 3)
			now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
			f := &fakeRaft{st: st, started: make(chan []stateChange, 16), gate: make(chan struct{}, 16), fail: 1}
			l, logs := batchLiveness(t, st, f, &now)
			l.propose(stateChange{"leaf000", nodeDown, "a"}, stateChange{"leaf001", nodeDown, "b"})
			next(t, f.started)
			tc.during(l)
			f.gate <- struct{}{} // the failing entry returns
			waitUntil(t, "the failure to be logged", func() bool {
				return logCount(logs, `msg="node state changes not committed; tried again at the next check"`) == 1
			})
			if logCount(logs, `changes=2`) != 1 {
				t.Errorf("the failure line does not count the 2 changes")
			}
			// A change queued after the failure waits for the next check.
			kick(l.wake)
			select {
			case e := <-f.started:
				t.Fatalf("retried before the next check: %v", e)
			default:
			}
			kick(l.retry) // the next check
			if tc.want == nil {
				idle(t, l)
				if e := f.committed(); len(e) != 0 {
					t.Fatalf("committed %v after leadership ended", e)
				}
				return
			}
			f.gate <- struct{}{}
			if got := next(t, f.started); !slices.Equal(got, tc.want) {
				t.Fatalf("retried %v, want %v", got, tc.want)
			}
			idle(t, l)
			if e := f.committed(); len(e) != 1 || !slices.Equal(e[0], tc.want) {
				t.Fatalf("committed %v, want one entry %v", e, tc.want)
			}
		})
	}
}

// While an entry of node states is in flight (held here), the master's
// other commits go on (an agent's inventory), a heartbeat and further
// changes return at once and queue; released, they commit in one more
// entry. A real single-master server, Raft and FSM.
func TestLivenessBatchDoesNotBlockOtherCommits(t *testing.T) {
	s, _ := startServer(t, time.Minute)
	ctx := context.Background()
	var names []string
	for i := range 3 {
		inv := simInventory(t, "rtx3090-nvlink-pair", fmt.Sprintf("nb%02d", i))
		inv.Generation = 1
		if _, err := s.commitInventory(ctx, inv.GetNodeName(), "", inv, nil); err != nil {
			t.Fatal(err)
		}
		names = append(names, inv.GetNodeName())
	}
	started, release := make(chan []stateChange, 4), make(chan struct{})
	s.live.mu.Lock()
	commit := s.live.setStates
	s.live.setStates = func(ctx context.Context, changes []stateChange) (uint64, error) {
		select {
		case started <- slices.Clone(changes):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		select {
		case <-release:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		return commit(ctx, changes)
	}
	s.live.mu.Unlock()
	s.live.propose(stateChange{names[0], nodeDown, "test"})
	if got := next(t, started); len(got) != 1 || got[0].node != names[0] {
		t.Fatalf("in flight %v", got)
	}
	// Meanwhile: an inventory commit, a heartbeat, two more changes.
	inv := simInventory(t, "rtx3090-nvlink-pair", names[1])
	inv.Generation = 2
	res, err := s.commitInventory(ctx, names[1], "", inv, nil)
	if err != nil || res.Generation != 2 {
		t.Fatalf("inventory commit while node states are in flight: %+v, %v", res, err)
	}
	s.live.seen(ctx, names[0])
	s.live.propose(stateChange{names[1], nodeDown, "test"}, stateChange{names[2], nodeDown, "test"})
	if h, _ := s.store.Head(names[0]); h.State() != nodeUp {
		t.Fatal("the held entry committed")
	}
	index := s.store.Index()
	close(release)
	if got := next(t, started); len(got) != 2 {
		t.Fatalf("the next entry %v, want the 2 changes queued meanwhile", got)
	}
	waitUntil(t, "the 3 nodes DOWN", func() bool { return inState(s.store, names, nodeDown) == 3 })
	idle(t, s.live)
	if got := s.store.Index() - index; got != 2 {
		t.Fatalf("%d entries after the release, want 2", got)
	}
	if rec, _ := s.store.Node(names[2]); rec.GetStateReason() != "test" || rec.GetStateChangedAt() == nil {
		t.Fatalf("record %v", rec)
	}
}

// A DOWN that waited in the queue behind an entry in flight is dropped
// when the node was heard from meanwhile (its agent reattached to another
// master while the leader was busy): the queue commits what is still true.
func TestLivenessBatchDropsADownHeardFromSince(t *testing.T) {
	st, _ := leafStore(t, 3)
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	f := &fakeRaft{st: st, started: make(chan []stateChange, 16), gate: make(chan struct{})}
	l, _ := batchLiveness(t, st, f, &now)
	l.propose(stateChange{"leaf000", nodeDown, "missed 3 heartbeats"})
	next(t, f.started)
	l.propose(stateChange{"leaf001", nodeDown, "missed 3 heartbeats"}, stateChange{"leaf002", nodeDown, "missed 3 heartbeats"})
	now = now.Add(100 * time.Millisecond)
	l.seen(context.Background(), "leaf001") // reattached while the first entry was in flight
	close(f.gate)
	idle(t, l)
	entries := f.committed()
	if len(entries) != 2 || len(entries[1]) != 1 || entries[1][0].node != "leaf002" {
		t.Fatalf("entries %v, want leaf000's, then leaf002's alone", entries)
	}
}

// logCount is how many times sub stands in the log so far.
func logCount(b *testkit.LogBuffer, sub string) int { return strings.Count(b.String(), sub) }
