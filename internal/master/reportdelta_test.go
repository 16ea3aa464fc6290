package master

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/state"
)

// What a follower's report carries, step by step: full first, then only
// what changed since the report the leader accepted; full again for
// another leader, after a minute, or after the leader asked.
func TestReportTrackerBuildsDeltas(t *testing.T) {
	const fresh = 1500 * time.Millisecond
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		now    int                  // ms
		leader string               // the leader's address
		cur    map[string]time.Time // the sessions' last-heard times
		left   map[string]time.Time
		accept bool // the leader accepts (else the report is lost)
		asks   bool // the leader answers send_full

		full                  bool
		base                  uint64
		nodes, gone, leftSent []string
	}
	tr := newReportTracker(fresh)
	steps := []step{
		{now: 1000, leader: "L1", cur: map[string]time.Time{"a": at(900), "b": at(800)}, accept: true, full: true, nodes: []string{"a", "b"}},
		// Both still fresh: nothing to say.
		{now: 1500, leader: "L1", cur: map[string]time.Time{"a": at(1400), "b": at(1300)}, accept: true, base: 1},
		// b turns stale (heard 1.7 s ago), c attaches.
		{now: 3000, leader: "L1", cur: map[string]time.Time{"a": at(2900), "b": at(1300), "c": at(2950)}, accept: true, base: 2, nodes: []string{"b", "c"}},
		// b still stale and silent: not listed; a's session broke, c left.
		{now: 3500, leader: "L1", cur: map[string]time.Time{"b": at(1300)}, left: map[string]time.Time{"c": at(3400)}, accept: true, base: 3, gone: []string{"a"}, leftSent: []string{"c"}},
		// b heard from while stale... and stale again before the report? No:
		// heard at 3600, fresh at 4000. The report is lost.
		{now: 4000, leader: "L1", cur: map[string]time.Time{"b": at(3600)}, base: 4, nodes: []string{"b"}},
		// The next delta is still against the accepted base 4.
		{now: 4500, leader: "L1", cur: map[string]time.Time{"b": at(4100)}, accept: true, base: 4, nodes: []string{"b"}},
		// Another leader: full.
		{now: 5000, leader: "L2", cur: map[string]time.Time{"b": at(4900)}, accept: true, full: true, nodes: []string{"b"}},
		// It asks for a full report: the next one is full.
		{now: 5500, leader: "L2", cur: map[string]time.Time{"b": at(5400)}, asks: true, base: 7},
		{now: 5500, leader: "L2", cur: map[string]time.Time{"b": at(5400)}, accept: true, full: true, nodes: []string{"b"}},
		// fullReportEvery after the last full report: full again.
		{now: 5500 + int(fullReportEvery.Milliseconds()), leader: "L2", cur: map[string]time.Time{"b": at(65400)}, accept: true, full: true, nodes: []string{"b"}},
	}
	for i, s := range steps {
		now := at(s.now)
		p := tr.build(now, s.leader, "m2", s.cur, s.left)
		req := p.req
		got := struct {
			full              bool
			base              uint64
			nodes, gone, left []string
		}{req.GetFull(), req.GetBaseSequence(), sorted(req.GetNodes()), sorted(req.GetGone()), sorted(req.GetLeft())}
		want := struct {
			full              bool
			base              uint64
			nodes, gone, left []string
		}{s.full, s.base, sorted(s.nodes), sorted(s.gone), sorted(s.leftSent)}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("step %d: report %+v, want %+v", i, got, want)
		}
		if req.GetSequence() != uint64(i+1) || req.GetFreshWithinMs() != uint32(fresh.Milliseconds()) {
			t.Fatalf("step %d: sequence %d, fresh %d ms; want %d, %d", i, req.GetSequence(), req.GetFreshWithinMs(), i+1, fresh.Milliseconds())
		}
		for j, n := range req.GetNodes() {
			if want := ageMs(now, s.cur[n]); req.GetAgesMs()[j] != want {
				t.Fatalf("step %d: %s age %d ms, want %d", i, n, req.GetAgesMs()[j], want)
			}
		}
		switch {
		case s.asks:
			tr.reset()
		case s.accept:
			tr.accepted(now, s.leader, p, true)
		}
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// The leader's side of deltas: a fresh node not listed again counts heard
// from fresh_within before each report, a stale one keeps its exact time,
// a session gone keeps the last time heard, a node that left counts heard
// from when it left; a delta against another base applies nothing.
func TestLivenessFromDeltaReports(t *testing.T) {
	const interval = time.Second
	fresh := freshWithin(interval, 3) // 1.5 s
	limit := 3 * interval
	delta := func(base uint64, nodes []string, ages []uint32) sessionReport {
		return sessionReport{seq: base + 1, base: base, freshWithin: fresh, nodes: nodes, agesMs: ages}
	}
	type timed struct {
		atMs int
		rep  sessionReport
	}
	// Every case starts with a full report at 1 s listing ws01 heard from
	// 100 ms before (fresh), sequence 1.
	first := timed{1000, sessionReport{full: true, seq: 1, freshWithin: fresh, nodes: []string{"ws01"}, agesMs: []uint32{100}}}
	empties := func(fromMs, toMs int, base uint64) []timed {
		var out []timed
		for ms := fromMs; ms <= toMs; ms += 500 {
			out = append(out, timed{ms, delta(base, nil, nil)})
			base++
		}
		return out
	}
	tests := []struct {
		name        string
		reports     []timed
		checkMs     int
		wantDown    bool
		wantApplied []bool // per report after the first (nil: all)
	}{
		{"fresh, not listed again, stays up", empties(1500, 14000, 1), 14100, false, nil},
		{"fresh until the reports stop: the reporter's grace", empties(1500, 4000, 1), 4000 + int((reattachGrace(interval) + limit).Milliseconds()) - 100, false, nil},
		{"listed stale: its exact time", slices.Concat(empties(1500, 2000, 1), []timed{{2500, delta(3, []string{"ws01"}, []uint32{1600})}}, empties(3000, 4000, 4)), 900 + int(limit.Milliseconds()) + 100, true, nil},
		{"listed stale: not before", slices.Concat(empties(1500, 2000, 1), []timed{{2500, delta(3, []string{"ws01"}, []uint32{1600})}}, empties(3000, 3500, 4)), 900 + int(limit.Milliseconds()) - 100, false, nil},
		{"gone: the last time heard", []timed{{1500, sessionReport{seq: 2, base: 1, freshWithin: fresh, gone: []string{"ws01"}, goneAgesMs: []uint32{600}}}}, 900 + int(limit.Milliseconds()) + 100, true, nil},
		{"gone: not before", []timed{{1500, sessionReport{seq: 2, base: 1, freshWithin: fresh, gone: []string{"ws01"}, goneAgesMs: []uint32{600}}}}, 900 + int(limit.Milliseconds()) - 100, false, nil},
		{"left: heard from when it left", []timed{{4000, sessionReport{seq: 2, base: 1, freshWithin: fresh, left: []string{"ws01"}, leftAgesMs: []uint32{0}}}}, 4000 + int(limit.Milliseconds()) - 100, false, nil},
		{"delta against another base: nothing applied", []timed{{1500, sessionReport{seq: 3, base: 2, freshWithin: fresh, gone: []string{"ws01"}, goneAgesMs: []uint32{0}}}, {2000, delta(1, nil, nil)}}, 2100, false, []bool{false, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := storeWithWs01(t)
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			now := t0
			l, downs := downRecorder(interval, 3, st, &now)
			for i, r := range append([]timed{first}, tc.reports...) {
				now = t0.Add(time.Duration(r.atMs) * time.Millisecond)
				applied := l.report(context.Background(), "m2", r.rep)
				want := true
				if i > 0 && tc.wantApplied != nil {
					want = tc.wantApplied[i-1]
				}
				if applied != want {
					t.Fatalf("report %d applied = %v, want %v", i, applied, want)
				}
			}
			now = t0.Add(time.Duration(tc.checkMs) * time.Millisecond)
			l.check(context.Background())
			flushed(l)
			if got := len(*downs) == 1; got != tc.wantDown {
				t.Fatalf("marked down = %v (%v), want %v", got, *downs, tc.wantDown)
			}
		})
	}
}

// A new leader (re-armed) holds no base: a delta gets "send full", the
// full report that follows is applied.
func TestNewLeaderAsksForAFullReport(t *testing.T) {
	st := storeWithWs01(t)
	l := newLiveness(time.Second, 3, st, slog.New(slog.DiscardHandler), perNode(func(context.Context, string, ginv1.NodeState, string) error { return nil }))
	l.rearm()
	fresh := freshWithin(time.Second, 3)
	if l.report(context.Background(), "m2", sessionReport{seq: 5, base: 4, freshWithin: fresh}) {
		t.Fatal("a delta was applied by a leader that holds no base")
	}
	if !l.report(context.Background(), "m2", sessionReport{full: true, seq: 6, freshWithin: fresh, nodes: []string{"ws01"}, agesMs: []uint32{0}}) {
		t.Fatal("the full report was not applied")
	}
	if !l.reportedHeld("ws01") {
		t.Fatal("ws01 not held after the full report")
	}
}

// Deltas decide as full reports do: sessions on a follower beat, fall
// silent, break and come back at random; one leader gets every report in
// full with exact ages (as before deltas), another the follower's deltas
// (through the real tracker); after every report both check, and both
// would mark exactly the same nodes DOWN.
func TestDeltaReportsDecideAsFullReports(t *testing.T) {
	const (
		interval = time.Second
		missed   = 3
		nodes    = 60
		steps    = 800 // reports, every interval/2: 400 s, past one periodic full report
	)
	rnd := rand.New(rand.NewPCG(7, 11))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("n%03d", i)
	}
	mkLeader := func() (*liveness, *[]string) {
		st := state.New(nil)
		for i, n := range names {
			inv := simInventory(t, "rtx3090-nvlink-pair", n)
			inv.Generation = 1
			if _, err := st.PutInventory(uint64(i+1), &statev1.PutInventory{Inventory: inv, ContentHash: "h"}); err != nil {
				t.Fatal(err)
			}
		}
		return downRecorder(interval, missed, st, &now)
	}
	exact, exactDowns := mkLeader()
	deltas, deltaDowns := mkLeader()

	var sess sessions
	tr := newReportTracker(freshWithin(interval, missed))
	type agent struct {
		attached, alive bool
		nextBeat        time.Time
	}
	agents := make([]agent, nodes)
	for i := range agents {
		agents[i] = agent{alive: true, nextBeat: t0.Add(time.Duration(rnd.Int64N(int64(interval))))}
	}
	seq := uint64(0)
	var sentDelta, sentFull int
	for step := range steps {
		next := now.Add(interval / 2)
		// Agents act in time order within the half interval.
		for i := range agents {
			ag := &agents[i]
			switch r := rnd.IntN(200); {
			case r == 0:
				ag.alive = !ag.alive // dies, or comes back
			case r == 1 && ag.attached:
				sess.remove(names[i], false, ag.nextBeat) // its stream breaks
				ag.attached = false
			}
			for ag.alive && !ag.nextBeat.After(next) {
				if !ag.attached {
					sess.add(names[i], ag.nextBeat)
					ag.attached = true
				} else {
					sess.beat(names[i], ag.nextBeat)
				}
				ag.nextBeat = ag.nextBeat.Add(interval + time.Duration(rnd.Int64N(int64(interval/5))))
			}
			if !ag.alive && ag.nextBeat.Before(next) {
				ag.nextBeat = next
			}
		}
		now = next
		cur := sess.lastHeard(now)
		// The exact leader: everything, every time.
		seq++
		var full sessionReport
		full.full, full.seq = true, seq
		for n, last := range cur {
			full.nodes = append(full.nodes, n)
			full.agesMs = append(full.agesMs, ageMs(now, last))
		}
		exact.report(context.Background(), "m2", full)
		// The delta leader, through the tracker.
		p := tr.build(now, "L", "m2", cur, sess.takeLeft())
		rep := sessionReport{full: p.req.GetFull(), seq: p.req.GetSequence(), base: p.req.GetBaseSequence(),
			freshWithin: time.Duration(p.req.GetFreshWithinMs()) * time.Millisecond,
			nodes:       p.req.GetNodes(), agesMs: p.req.GetAgesMs(), gone: p.req.GetGone(), goneAgesMs: p.req.GetGoneAgesMs(),
			left: p.req.GetLeft(), leftAgesMs: p.req.GetLeftAgesMs()}
		if !deltas.report(context.Background(), "m2", rep) {
			t.Fatalf("step %d: delta against base %d not applied", step, rep.base)
		}
		tr.accepted(now, "L", p, true)
		if rep.full {
			sentFull++
		} else {
			sentDelta++
		}
		*exactDowns, *deltaDowns = nil, nil
		exact.check(context.Background())
		deltas.check(context.Background())
		slices.Sort(*exactDowns)
		slices.Sort(*deltaDowns)
		if !slices.Equal(*exactDowns, *deltaDowns) {
			t.Fatalf("step %d (%s): full reports mark %v DOWN, deltas %v", step, now.Sub(t0), *exactDowns, *deltaDowns)
		}
	}
	if sentDelta == 0 || sentFull < 2 {
		t.Fatalf("%d deltas and %d full reports sent; want deltas and a periodic full report", sentDelta, sentFull)
	}
}

// ReportSessions refuses malformed reports with a clear error and applies
// nothing.
func TestReportSessionsRefusesBadReports(t *testing.T) {
	r := &relayService{maxNodes: 2}
	ok := func(m func(*ginv1.ReportSessionsRequest)) *ginv1.ReportSessionsRequest {
		req := &ginv1.ReportSessionsRequest{ServerId: "m2", Sequence: 3, BaseSequence: 2, FreshWithinMs: 1500,
			Nodes: []string{"a"}, AgesMs: []uint32{5}, Gone: []string{"b"}, GoneAgesMs: []uint32{7}, Left: []string{"c"}, LeftAgesMs: []uint32{0}}
		m(req)
		return req
	}
	tests := []struct {
		name  string
		req   *ginv1.ReportSessionsRequest
		field string // "" when valid
	}{
		{"valid delta", ok(func(*ginv1.ReportSessionsRequest) {}), ""},
		{"older master: no sequence, full", &ginv1.ReportSessionsRequest{ServerId: "m2", Nodes: []string{"a"}, AgesMs: []uint32{1}}, ""},
		{"ages short", ok(func(r *ginv1.ReportSessionsRequest) { r.AgesMs = nil }), "ages_ms"},
		{"gone ages short", ok(func(r *ginv1.ReportSessionsRequest) { r.GoneAgesMs = nil }), "gone_ages_ms"},
		{"left ages short", ok(func(r *ginv1.ReportSessionsRequest) { r.LeftAgesMs = nil }), "left_ages_ms"},
		{"no fresh bound", ok(func(r *ginv1.ReportSessionsRequest) { r.FreshWithinMs = 0 }), "fresh_within_ms"},
		{"fresh bound too long", ok(func(r *ginv1.ReportSessionsRequest) { r.FreshWithinMs = 600_001 }), "fresh_within_ms"},
		{"full with gone", ok(func(r *ginv1.ReportSessionsRequest) { r.Full, r.BaseSequence = true, 0 }), "full"},
		{"base not before", ok(func(r *ginv1.ReportSessionsRequest) { r.BaseSequence = 3 }), "base_sequence"},
		{"too many nodes", ok(func(r *ginv1.ReportSessionsRequest) { r.Nodes, r.AgesMs = []string{"a", "b", "c"}, []uint32{1, 2, 3} }), "nodes"},
		{"too many gone", ok(func(r *ginv1.ReportSessionsRequest) {
			r.Gone, r.GoneAgesMs = []string{"a", "b", "c"}, []uint32{1, 2, 3}
		}), "gone"},
		{"bad name", ok(func(r *ginv1.ReportSessionsRequest) { r.Left = []string{"bad name"} }), "left[0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := proto.Clone(tc.req)
			_, err := r.sessionReport(tc.req)
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.field != "" && (err == nil || !containsField(err, tc.field)):
				t.Fatalf("err = %v, want one naming %s", err, tc.field)
			}
			if !proto.Equal(before, tc.req) {
				t.Fatal("the request was changed")
			}
		})
	}
}

// containsField reports whether err is a bad request naming field.
func containsField(err error, field string) bool {
	var br *badRequest
	return errors.As(err, &br) && br.field == field
}

// downRecorder is a leader's liveness over st, re-armed, on the clock *now
// (the test moves it), recording the nodes it marks DOWN in order (once
// flushed has committed what it queued).
func downRecorder(interval time.Duration, missed int, st *state.Store, now *time.Time) (*liveness, *[]string) {
	var downs []string
	l := newLiveness(interval, missed, st, slog.New(slog.DiscardHandler), perNode(func(_ context.Context, n string, s ginv1.NodeState, _ string) error {
		if s == ginv1.NodeState_NODE_STATE_DOWN {
			downs = append(downs, n)
		}
		return nil
	}))
	l.now = func() time.Time { return *now }
	l.rearm()
	return l, &downs
}
