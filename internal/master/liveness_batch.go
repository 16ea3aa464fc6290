package master

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/state"
)

// Node state changes are committed in batches (Nomad's batchUpdate of node
// statuses): a leaf switch that fails takes hundreds of nodes down at once,
// and one Raft entry for them all costs the masters one commit, not
// hundreds while they are busiest.
//
// Every change liveness decides (check's DOWN marks, the UP after upAfter
// signs of life from seen, report or committed) is queued by propose: one
// change per node, the latest asked for wins, and a change that asks for
// the state the node already has, or is being given by the entry in
// flight, takes the node's queued change away instead (nothing to commit).
// One flusher (flushLoop, started and stopped with run, the leader-only
// loop) commits the queue: as soon as something is queued when nothing is
// in flight, so a lone change waits for nothing, and otherwise right after
// the entry in flight commits, with everything queued meanwhile (natural
// batching while Raft is busy), at most maxBatch changes an entry, the
// oldest first. No timer: the batch is what queued during one commit.
//
// A commit that fails puts its changes back (those not superseded
// meanwhile), keeping their place, and is logged once with their count; the
// flusher then waits for the next check (half an interval) before it tries
// again, so a master that cannot commit does not spin. While this master
// does not lead the queue is empty: deactivate and rearm drop it.
//
// Logs: every committed change keeps its line ("node state changed" with
// node, state and reason, at Info, which the fault campaign counts), and an
// entry of more than one change adds one line with the count.

// maxBatch is the most changes one entry carries: a leaf switch's nodes
// (512 at most in the fabrics GIN models) fit in one, and an entry stays
// far below the Raft message bound (a change is under 200 bytes).
const maxBatch = 512

// stateChange is one node state transition to commit.
type stateChange struct {
	node   string
	state  ginv1.NodeState
	reason string
}

// queuedChange is a change in the queue and its place there.
type queuedChange struct {
	stateChange
	seq uint64
	at  time.Time // when it was queued (l.now)
}

// kick wakes the goroutine waiting on ch (a channel of one) without
// blocking.
func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// propose queues changes (latest wins per node) and wakes the flusher; a
// master that does not lead queues nothing.
func (l *liveness) propose(changes ...stateChange) {
	queued := false
	l.mu.Lock()
	for _, c := range changes {
		queued = l.enqueue(c) || queued
	}
	l.mu.Unlock()
	if queued {
		kick(l.wake)
	}
}

// enqueue queues c and reports whether the queue holds it; l.mu is held.
// The state it is compared with is the one the entry in flight gives the
// node, else the recorded one, read under l.mu: the flusher clears
// inFlight only once its entry is applied, so no commit falls between.
func (l *liveness) enqueue(c stateChange) bool {
	if !l.active {
		return false
	}
	want, ok := l.inFlight[c.node]
	if !ok {
		h, known := l.store.Head(c.node)
		if !known {
			delete(l.queue, c.node) // deleted since: nothing to commit
			return false
		}
		want = h.State()
	}
	if c.state == want {
		delete(l.queue, c.node) // superseded: the node is, or is being made, so
		return false
	}
	q, ok := l.queue[c.node]
	if !ok {
		l.seq++
		q.seq = l.seq
	}
	q.stateChange, q.at = c, l.now()
	l.queue[c.node] = q
	return true
}

// flushLoop commits the queue until ctx ends (run starts it): at every wake
// it flushes until the queue is empty; after a failed commit it waits for
// the next check's retry before it tries again.
func (l *liveness) flushLoop(ctx context.Context) {
	held := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
			if held {
				continue
			}
		case <-l.retry:
			held = false
		}
		for ctx.Err() == nil {
			n, err := l.flush(ctx)
			if err != nil {
				held = true
				break
			}
			if n == 0 {
				break
			}
		}
	}
}

// flush commits the oldest queued changes, at most maxBatch, as one entry
// and returns how many it handed to Raft (0: none queued, or another flush
// is in flight) and, when the entry did not commit, why (the changes are
// queued again unless superseded).
func (l *liveness) flush(ctx context.Context) (int, error) {
	l.mu.Lock()
	if !l.active || l.flushing || len(l.queue) == 0 {
		l.mu.Unlock()
		return 0, nil
	}
	all := make([]queuedChange, 0, len(l.queue))
	for n, q := range l.queue {
		// Deleted since, or already so (an entry whose outcome was
		// unknown did commit): nothing to commit.
		if h, ok := l.store.Head(n); !ok || h.State() == q.state {
			delete(l.queue, n)
			continue
		}
		// A DOWN decided before a sign of life that came while it waited
		// (an entry in flight: the node's agent reattached meanwhile) is
		// no longer true.
		if ls, ok := l.lastSeen[n]; ok && q.state == ginv1.NodeState_NODE_STATE_DOWN && ls.After(q.at) {
			delete(l.queue, n)
			continue
		}
		all = append(all, q)
	}
	if len(all) == 0 {
		l.mu.Unlock()
		return 0, nil
	}
	slices.SortFunc(all, func(a, b queuedChange) int { return cmp.Compare(a.seq, b.seq) })
	all = all[:min(len(all), max(l.maxBatch, 1))]
	batch := make([]stateChange, len(all))
	for i, q := range all {
		batch[i] = q.stateChange
		delete(l.queue, q.node)
		l.inFlight[q.node] = q.state
	}
	l.flushing = true
	set := l.setStates
	l.mu.Unlock()

	index, err := set(ctx, batch)
	committed := err == nil || errors.Is(err, state.ErrUnknownNode)

	defer func() {
		l.mu.Lock()
		l.flushing = false // once logged: a test that waits for it reads the lines
		l.mu.Unlock()
	}()
	l.mu.Lock()
	clear(l.inFlight)
	requeued := 0
	if !committed && l.active {
		for _, q := range all {
			if _, newer := l.queue[q.node]; !newer {
				l.queue[q.node] = q // its place kept
				requeued++
			}
		}
	}
	l.mu.Unlock()

	if !committed {
		l.log.Warn("node state changes not committed; tried again at the next check", "changes", len(batch), "kept", requeued, "err", err)
		return len(batch), err
	}
	if err != nil {
		l.log.Warn("node state changes committed without nodes deleted meanwhile", "index", index, "err", err)
	}
	var up, down int
	for _, c := range batch {
		if _, ok := l.store.Head(c.node); !ok {
			continue // skipped by the entry (deleted)
		}
		switch c.state {
		case ginv1.NodeState_NODE_STATE_UP:
			up++
		case ginv1.NodeState_NODE_STATE_DOWN:
			down++
		}
		l.log.Info("node state changed", "node", c.node, "state", c.state, "reason", c.reason, "index", index)
	}
	if len(batch) > 1 {
		l.log.Info("node state changes committed in one entry", "changes", len(batch), "down", down, "up", up, "index", index)
	}
	return len(batch), nil
}

// queued is how many changes wait in the queue and whether an entry is in
// flight (tests wait for both to be done).
func (l *liveness) queued() (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue), l.flushing
}
