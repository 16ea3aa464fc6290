package master

import (
	"time"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// A follower's session reports are deltas against the last report the
// leader accepted. What the leader needs to decide node state is, per
// node, which master holds its session and when its agent was last heard
// from, to within the heartbeat interval (it marks a node DOWN after
// several missed intervals). So a node heard from within freshWithin is
// "fresh", and a fresh node is listed once, when it attaches; while it
// stays fresh the leader counts it heard from freshWithin before each
// accepted report. A node that goes longer turns "stale" and is listed
// with its exact age; it is listed again whenever it is heard from (back
// to fresh, or heard from and stale again). Sessions that ended are
// listed as gone (broken, or ended by this master) or left (the agent
// ended it itself to move to another master: a sign of life, not a loss).
//
// A full report is sent first, whenever the leader is another than the
// one that accepted the base, every fullReportEvery, when the leader
// answers send_full (it holds another base: it is new, or an answer was
// lost), and always to a leader that does not say it takes deltas (an
// older version).

// fullReportEvery is how often a follower sends a full report even though
// the leader takes deltas (a bound on how long any disagreement lasts).
const fullReportEvery = 5 * time.Minute

// freshWithin is how recently a node counted fresh was heard from: one and
// a half heartbeat intervals (an agent beats every interval; the half
// absorbs late beats so that nodes do not flap between fresh and stale),
// at most half of the missed-heartbeat limit, so that the leader's
// estimate of a fresh node (freshWithin plus a report period old) stays
// below the limit that marks it DOWN.
func freshWithin(interval time.Duration, missed int) time.Duration {
	return max(min(3*interval/2, time.Duration(missed)*interval/2), time.Millisecond)
}

// maxFreshWithin bounds the fresh_within_ms a leader accepts.
const maxFreshWithin = 10 * time.Minute

// reportedEntry is what the leader accepted about one node: whether it was
// stale, and then when it was last heard from.
type reportedEntry struct {
	stale bool
	last  time.Time
}

// reportTracker is a follower's memory of the reports the leader accepted;
// used by the report loop only (one goroutine).
type reportTracker struct {
	fresh time.Duration
	seq   uint64 // the last sequence sent
	// base is the sequence of the last report the leader accepted (0:
	// none), leader the address it was sent to, deltas whether that
	// leader takes them, fullAt when the last full report was accepted.
	base   uint64
	leader string
	deltas bool
	fullAt time.Time
	acked  map[string]reportedEntry
	// left are nodes that left since the last accepted report (delta only).
	left map[string]time.Time
}

func newReportTracker(fresh time.Duration) *reportTracker {
	return &reportTracker{fresh: fresh}
}

// pendingReport is a request built from the sessions and what accepting
// it makes the new base.
type pendingReport struct {
	req  *ginv1.ReportSessionsRequest
	next map[string]reportedEntry
}

// build makes the next report to the leader at leaderAddr from the
// sessions' last-heard times and the nodes that left since the last call
// (sessions.takeLeft).
func (t *reportTracker) build(now time.Time, leaderAddr, serverID string, cur, left map[string]time.Time) pendingReport {
	for n, at := range left {
		if t.left == nil {
			t.left = map[string]time.Time{}
		}
		if len(t.left) < maxLeft {
			t.left[n] = at
		}
	}
	t.seq++
	req := &ginv1.ReportSessionsRequest{ServerId: serverID, Sequence: t.seq, FreshWithinMs: uint32(t.fresh.Milliseconds())}
	next := make(map[string]reportedEntry, len(cur))
	full := t.base == 0 || !t.deltas || t.leader != leaderAddr || now.Sub(t.fullAt) >= fullReportEvery
	req.Full = full
	if !full {
		req.BaseSequence = t.base
	}
	for n, last := range cur {
		e := reportedEntry{stale: now.Sub(last) > t.fresh, last: last}
		next[n] = e
		if !full {
			a, ok := t.acked[n]
			if ok && a.stale == e.stale && (!e.stale || a.last.Equal(e.last)) {
				continue // nothing the leader does not know
			}
		}
		req.Nodes = append(req.Nodes, n)
		req.AgesMs = append(req.AgesMs, ageMs(now, last))
	}
	if !full {
		for n := range t.acked {
			if _, ok := cur[n]; ok {
				continue
			}
			if at, ok := t.left[n]; ok {
				req.Left = append(req.Left, n)
				req.LeftAgesMs = append(req.LeftAgesMs, ageMs(now, at))
			} else {
				req.Gone = append(req.Gone, n)
				req.GoneAgesMs = append(req.GoneAgesMs, ageMs(now, t.acked[n].last))
			}
		}
	}
	return pendingReport{req: req, next: next}
}

// accepted records that the leader at leaderAddr applied p (it said
// whether it takes deltas).
func (t *reportTracker) accepted(now time.Time, leaderAddr string, p pendingReport, deltas bool) {
	t.base, t.leader, t.deltas, t.acked, t.left = p.req.GetSequence(), leaderAddr, deltas, p.next, nil
	if p.req.GetFull() {
		t.fullAt = now
	}
}

// reset forgets the base: the next report is full (the leader asked).
func (t *reportTracker) reset() {
	t.base, t.acked = 0, nil
}
