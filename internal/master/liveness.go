package master

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/state"
)

// liveness decides node state in the leader's memory. Heartbeats stay with
// the master that holds the agent's session: the leader's own sessions call
// seen, every follower reports its sessions (node, time since last heard
// from) every half interval (report). A node becomes DOWN after `missed`
// intervals without a sign of life, and UP again after upAfter signs of
// life (damping); each change is queued and committed with the others
// queued meanwhile, many nodes to one Raft entry (liveness_batch.go).
// Every election re-arms all timers with a grace period, so a new leader
// does not mark the whole cluster down before agents have reattached: a
// node not heard from since the election gets reattachGrace on top of the
// missed intervals.
//
// A master's death is told apart from its agents' deaths by its reports:
// agents that die under a live master vanish from its reports or age in
// them, and are marked DOWN after the missed intervals as usual; a master
// whose reports stop (dead, or cut off from the leader) leaves its nodes
// with no news at all, and they get the same reattach grace as after an
// election, counted from its last report, before the missed intervals.
//
// A write of an agent that commits is a sign of life too: on the leader's
// own sessions through seen, relayed by another master through committed,
// which also counts the node as that master's until its reports list it.
// So a node registered through a follower starts heard from at its
// registration, never at the election.
type liveness struct {
	interval time.Duration
	missed   int
	store    *state.Store
	log      *slog.Logger
	now      func() time.Time
	// wake tells the flusher that a change was queued; retry, that a
	// check ran (a failed commit is tried again then). Both hold one.
	wake, retry chan struct{}

	mu       sync.Mutex
	lastSeen map[string]time.Time
	armedAt  time.Time
	// setStates commits changes as one Raft entry and returns its index
	// (read under mu, so a test may wrap it); an error wrapping
	// state.ErrUnknownNode is an entry applied without those nodes.
	setStates func(ctx context.Context, changes []stateChange) (uint64, error)
	// maxBatch is the most changes one entry carries (maxBatch).
	maxBatch int
	// queue holds, per node, the latest change asked for and not yet
	// handed to Raft (latest wins); seq orders it. inFlight is the state
	// each node of the entry being committed is given; flushing is set
	// while one is (the flusher's, or a test's flush).
	queue    map[string]queuedChange
	seq      uint64
	inFlight map[string]ginv1.NodeState
	flushing bool
	// beatsSinceDown counts signs of life from a node recorded DOWN: it comes
	// back UP only after upAfter of them (damping: one stray heartbeat from a
	// flapping node does not flip it).
	beatsSinceDown map[string]int
	// active is set while this master leads (rearm .. deactivate): only
	// then do signs of life propose state changes.
	active bool
	// reporters are the other masters' latest reports; holder names, per
	// node, the master whose latest report listed it.
	reporters map[string]*reporter
	holder    map[string]string
	// contacted is when each master's last report was applied this term
	// (reach.go). Unlike reporters it is not forgotten while the term
	// lasts, so a master long gone still shows its last contact; its keys
	// are registered masters (the report service checks), so it is bounded.
	contacted map[string]time.Time
	// relayed names, per node whose relayed write committed and that its
	// master's reports have not listed since, that master (relayedVia);
	// relayedBy indexes them by master. An entry lasts until that master's
	// second report after the commit (the first may have been built before
	// the session opened), or until a report lists the node.
	relayed   map[string]relayedVia
	relayedBy map[string]map[string]bool
	// writing reports whether a node's session on this master has a write
	// in flight (its agent is there, its heartbeats wait); nil: none.
	writing func(node string) bool
	// afterCheck runs after every check (the leader re-picks the fabric
	// scanner when its master went silent); nil: nothing.
	afterCheck func()
}

// reporter is what one master's reports say: when the last was applied,
// its sequence, and the nodes it holds (reportedEntry: fresh, or stale and
// last heard from then).
type reporter struct {
	at    time.Time
	seq   uint64
	nodes map[string]reportedEntry
}

// relayedVia is the master that relayed a node's committed write, when,
// and how many of its reports the leader has applied since.
type relayedVia struct {
	from    string
	at      time.Time
	reports int
}

// upAfter is how many signs of life bring a DOWN node back UP.
const upAfter = 2

// reattachGrace is how long, after an election, agents may take to notice
// that their old master is gone and reattach: when its host vanished rather
// than its process, an agent learns it only from its silence timeout, which
// is max(4 heartbeats, 10 s) (internal/agent, defaultSilenceTimeout).
func reattachGrace(interval time.Duration) time.Duration {
	return max(4*interval, 10*time.Second)
}

// newLiveness is a leader's liveness; setStates commits a batch of node
// state changes as one Raft entry (Server.setNodeStates).
func newLiveness(interval time.Duration, missed int, store *state.Store, log *slog.Logger,
	setStates func(ctx context.Context, changes []stateChange) (uint64, error)) *liveness {
	return &liveness{interval: interval, missed: missed, store: store, setStates: setStates, log: log, now: time.Now,
		wake: make(chan struct{}, 1), retry: make(chan struct{}, 1), maxBatch: maxBatch,
		queue: map[string]queuedChange{}, inFlight: map[string]ginv1.NodeState{},
		lastSeen: map[string]time.Time{}, beatsSinceDown: map[string]int{},
		reporters: map[string]*reporter{}, holder: map[string]string{}, contacted: map[string]time.Time{}, relayed: map[string]relayedVia{}, relayedBy: map[string]map[string]bool{}}
}

// rearm restarts every timer (called when this server becomes leader).
func (l *liveness) rearm() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastSeen = map[string]time.Time{}
	l.reporters = map[string]*reporter{}
	l.holder = map[string]string{}
	l.contacted = map[string]time.Time{}
	l.relayed = map[string]relayedVia{}
	l.relayedBy = map[string]map[string]bool{}
	l.armedAt = l.now()
	l.active = true
	clear(l.queue) // a former term's, were any left
}

// deactivate stops proposing (called when this server stops leading): the
// changes still queued are dropped (the next leader decides afresh).
func (l *liveness) deactivate() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.active = false
	clear(l.queue)
}

// seen records a sign of life and, when the node is recorded DOWN, brings it
// back UP.
func (l *liveness) seen(_ context.Context, node string) {
	down := l.recordedDown(node)
	l.mu.Lock()
	if !l.active {
		l.mu.Unlock()
		return
	}
	l.lastSeen[node] = l.now()
	n := 0
	if down {
		l.beatsSinceDown[node]++
		n = l.beatsSinceDown[node]
	} else {
		delete(l.beatsSinceDown, node)
	}
	l.mu.Unlock()
	if down && n >= upAfter {
		l.propose(stateChange{node, ginv1.NodeState_NODE_STATE_UP, fmt.Sprintf("heartbeats resumed (%d received)", n)})
	}
}

// recordedDown reports whether the state records node DOWN (read before
// l.mu is taken).
func (l *liveness) recordedDown(node string) bool {
	h, ok := l.store.Head(node)
	return ok && h.State() == ginv1.NodeState_NODE_STATE_DOWN
}

// check marks DOWN every UP node not heard from within missed intervals.
func (l *liveness) check(_ context.Context) {
	limit := time.Duration(l.missed) * l.interval
	now := l.now()
	view := l.store.View()
	var down []string
	l.mu.Lock()
	l.forgetReporters(now)
	for _, name := range view.NodeNames() {
		h, _ := view.Head(name)
		if h.State() != ginv1.NodeState_NODE_STATE_UP {
			continue
		}
		last, ok := l.lastSeen[name]
		if !ok {
			last = l.armedAt.Add(reattachGrace(l.interval))
		}
		if r := l.lostHolder(name, now); r != nil {
			// Its master went silent: no news is not bad news yet.
			if g := r.at.Add(reattachGrace(l.interval)); g.After(last) {
				last = g
			}
		} else if at, lost := l.lostRelayer(name, now); lost {
			// The master that relayed its write went silent before its
			// reports listed the node: the same.
			if g := at.Add(reattachGrace(l.interval)); g.After(last) {
				last = g
			}
		}
		if now.Sub(last) > limit && (l.writing == nil || !l.writing(name)) {
			down = append(down, name)
		}
	}
	reason := fmt.Sprintf("missed %d heartbeats (%s)", l.missed, limit)
	changes := make([]stateChange, len(down))
	for i, n := range down {
		delete(l.beatsSinceDown, n)
		changes[i] = stateChange{n, ginv1.NodeState_NODE_STATE_DOWN, reason}
	}
	l.mu.Unlock()
	// All at once: a leaf switch's nodes go in one entry.
	l.propose(changes...)
}

// run checks every half interval until ctx ends (a leader-only loop), and
// runs the flusher that commits the changes queued (stopped with it).
func (l *liveness) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.flushLoop(ctx)
	}()
	defer wg.Wait()
	t := time.NewTicker(l.interval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.check(ctx)
			kick(l.retry)
			if l.afterCheck != nil {
				l.afterCheck()
			}
		}
	}
}

// reportLost is how long without a report from a master makes its nodes'
// silence its own rather than theirs: two report periods, and less than the
// missed-heartbeat limit so that the grace comes before a node would be
// marked DOWN.
func (l *liveness) reportLost() time.Duration {
	return min(l.interval, time.Duration(l.missed)*l.interval/2)
}

// lostHolder is the report of the master that last listed node when that
// master has gone silent (nil otherwise). l.mu is held.
func (l *liveness) lostHolder(node string, now time.Time) *reporter {
	h, ok := l.holder[node]
	if !ok {
		return nil
	}
	r := l.reporters[h]
	if r == nil || now.Sub(r.at) <= l.reportLost() {
		return nil
	}
	return r
}

// lostRelayer reports, for a node that no report lists and whose relayed
// write committed, whether the master that relayed it has gone silent
// since, and its last news (its last report, or the commit if later).
// l.mu is held.
func (l *liveness) lostRelayer(node string, now time.Time) (time.Time, bool) {
	if _, ok := l.holder[node]; ok {
		return time.Time{}, false
	}
	v, ok := l.relayed[node]
	if !ok {
		return time.Time{}, false
	}
	last := v.at
	if r := l.reporters[v.from]; r != nil && r.at.After(last) {
		last = r.at
	}
	return last, now.Sub(last) > l.reportLost()
}

// forgetRelayed drops node's relayed write (l.mu is held).
func (l *liveness) forgetRelayed(node string) {
	v, ok := l.relayed[node]
	if !ok {
		return
	}
	delete(l.relayed, node)
	if by := l.relayedBy[v.from]; by != nil {
		delete(by, node)
		if len(by) == 0 {
			delete(l.relayedBy, v.from)
		}
	}
}

// forgetReporters drops the reports of masters silent for longer than any
// grace they give, and relayed writes as old (bounded memory for masters
// that are gone). l.mu is held.
func (l *liveness) forgetReporters(now time.Time) {
	keep := reattachGrace(l.interval) + time.Duration(l.missed+1)*l.interval
	for n, v := range l.relayed {
		if now.Sub(v.at) > keep {
			l.forgetRelayed(n)
		}
	}
	for id, r := range l.reporters {
		if now.Sub(r.at) <= keep {
			continue
		}
		for n := range r.nodes {
			if l.holder[n] == id {
				delete(l.holder, n)
			}
		}
		delete(l.reporters, id)
	}
}

// sessionReport is one ReportSessions as the leader applies it
// (reportdelta.go says what a follower sends and when).
type sessionReport struct {
	// full: nodes are every session the master holds; else a delta
	// against the report numbered base.
	full      bool
	seq, base uint64
	// freshWithin: a node listed with an age within it is fresh, and
	// counts heard from freshWithin before every later report while it is
	// not listed again; 0 (older masters): every age is exact, once.
	freshWithin time.Duration
	// nodes[i] was last heard from agesMs[i] milliseconds ago.
	nodes  []string
	agesMs []uint32
	// gone[i]: its session ended without a sign of life; it was last heard
	// from goneAgesMs[i] ms ago. left[i]: the agent ended its session
	// leftAgesMs[i] ms ago to move elsewhere (a sign of life).
	gone       []string
	goneAgesMs []uint32
	left       []string
	leftAgesMs []uint32
}

// report applies master from's report. It reports false, applying
// nothing, for a delta against a report this leader does not hold (it is
// new, or its answer to the base was lost): the master sends a full one.
// A report that shows a node heard from again is a sign of life (a DOWN
// node comes back UP after upAfter of them); a node that left its session
// to move elsewhere counts as heard from when it left.
func (l *liveness) report(_ context.Context, from string, rep sessionReport) bool {
	now := l.now()
	view := l.store.View()
	var up []string
	counts := map[string]int{}
	l.mu.Lock()
	if !l.active {
		l.mu.Unlock()
		return true
	}
	r := l.reporters[from]
	if !rep.full && (r == nil || r.seq != rep.base) {
		l.mu.Unlock()
		return false
	}
	if r == nil || rep.full {
		if r != nil {
			for n := range r.nodes {
				if l.holder[n] == from {
					delete(l.holder, n)
				}
			}
		}
		r = &reporter{nodes: make(map[string]reportedEntry, len(rep.nodes))}
		l.reporters[from] = r
	}
	for i, n := range rep.gone {
		l.unhold(from, r, n, now, rep.goneAgesMs[i])
	}
	for i, n := range rep.left {
		l.unhold(from, r, n, now, rep.leftAgesMs[i])
	}
	for i, n := range rep.nodes {
		age := time.Duration(rep.agesMs[i]) * time.Millisecond
		r.nodes[n] = reportedEntry{stale: rep.freshWithin == 0 || age > rep.freshWithin, last: now.Add(-age)}
	}
	r.at, r.seq = now, rep.seq
	l.contacted[from] = now
	for n := range l.relayedBy[from] {
		v := l.relayed[n]
		if v.reports++; v.reports >= 2 {
			l.forgetRelayed(n)
		} else {
			l.relayed[n] = v
		}
	}
	freshAt := now.Add(-rep.freshWithin)
	for n, e := range r.nodes {
		l.holder[n] = from
		l.forgetRelayed(n)
		at := e.last
		if !e.stale && freshAt.After(at) {
			at = freshAt
			r.nodes[n] = reportedEntry{last: at}
		}
		h, known := view.Head(n)
		if c := l.heardAt(n, at, known && h.State() == ginv1.NodeState_NODE_STATE_DOWN); c > 0 {
			up = append(up, n)
			counts[n] = c
		}
	}
	l.mu.Unlock()
	changes := make([]stateChange, len(up))
	for i, n := range up {
		changes[i] = stateChange{n, ginv1.NodeState_NODE_STATE_UP, fmt.Sprintf("heartbeats resumed (%d received, through %s)", counts[n], from)}
	}
	l.propose(changes...)
	return true
}

// heardAt records that node n was heard from at at, as a report or a
// relayed write tells it (down: it is recorded DOWN), and returns the
// signs of life counted since it was recorded DOWN once they bring it back
// UP (0 otherwise). A report repeats a heartbeat until the next one
// (reports come twice per interval): only a clearly newer time is a new
// sign. l.mu is held.
func (l *liveness) heardAt(n string, at time.Time, down bool) int {
	prev, ok := l.lastSeen[n]
	if ok && !at.After(prev) {
		return 0
	}
	l.lastSeen[n] = at
	fresh := !ok || at.Sub(prev) > l.interval/4
	if !down {
		delete(l.beatsSinceDown, n)
	} else if fresh {
		l.beatsSinceDown[n]++
		if c := l.beatsSinceDown[n]; c >= upAfter {
			return c
		}
	}
	return 0
}

// committed records that a write of node's agent, relayed by master via
// (its session is there; "" when not known), has just committed: a sign of
// life at its commit. Until that master's reports list the session, it is
// the leader's only news of a node registered there; without it the node
// would count as never heard from since the election, and a leader
// elected long ago would mark it DOWN at its next check. Until then the
// node is also that master's: if it goes silent first, the node gets the
// reattach grace, as its listed nodes do.
func (l *liveness) committed(_ context.Context, node, via string) {
	down := l.recordedDown(node)
	l.mu.Lock()
	if !l.active {
		l.mu.Unlock()
		return
	}
	now := l.now()
	c := l.heardAt(node, now, down)
	if via != "" && l.holder[node] != via {
		l.forgetRelayed(node)
		l.relayed[node] = relayedVia{from: via, at: now}
		if l.relayedBy[via] == nil {
			l.relayedBy[via] = map[string]bool{}
		}
		l.relayedBy[via][node] = true
	}
	l.mu.Unlock()
	if c > 0 {
		l.propose(stateChange{node, ginv1.NodeState_NODE_STATE_UP, fmt.Sprintf("heartbeats resumed (%d received, the last a committed write)", c)})
	}
}

// unhold drops node n from master from's report r; it was heard from ageMs
// before now. l.mu is held.
func (l *liveness) unhold(from string, r *reporter, n string, now time.Time, ageMs uint32) {
	delete(r.nodes, n)
	if l.holder[n] == from {
		delete(l.holder, n)
	}
	if at := now.Add(-time.Duration(ageMs) * time.Millisecond); at.After(l.lastSeen[n]) {
		l.lastSeen[n] = at
	}
}

// reportedCount is how many nodes masters that still report list (0 unless
// this master leads).
func (l *liveness) reportedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.active {
		return 0
	}
	now := l.now()
	n := 0
	for node := range l.holder {
		if l.lostHolder(node, now) == nil {
			n++
		}
	}
	return n
}

// reportedHeld reports whether node is listed by a master that still
// reports (its agent holds a session there).
func (l *liveness) reportedHeld(node string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.holder[node]
	return ok && l.lostHolder(node, l.now()) == nil
}

// smallestReported is the smallest node name listed by a master that still
// reports ("" when none).
func (l *liveness) smallestReported() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	min := ""
	for n := range l.holder {
		if (min == "" || n < min) && l.lostHolder(n, now) == nil {
			min = n
		}
	}
	return min
}
