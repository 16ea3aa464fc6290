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

// liveness tracks heartbeats in the leader's memory only. A node becomes
// DOWN through one Raft entry after `missed` intervals without a heartbeat,
// and UP again through one entry after upAfter signs of life (damping). Every election
// re-arms all timers with a grace period, so a new leader does not mark the
// whole cluster down before agents have reattached: a node not heard from
// since the election gets reattachGrace on top of the missed intervals.
type liveness struct {
	interval time.Duration
	missed   int
	store    *state.Store
	setState func(ctx context.Context, node string, st ginv1.NodeState, reason string) error
	log      *slog.Logger
	now      func() time.Time

	mu       sync.Mutex
	lastSeen map[string]time.Time
	armedAt  time.Time
	pending  map[string]bool // a state change is being proposed
	// next is a change asked for while another was being proposed for the
	// same node: proposed once that one is done, so a node's latest
	// transition is never dropped (e.g. UP asked while DOWN commits).
	next map[string]stateChange
	// beatsSinceDown counts signs of life from a node recorded DOWN: it comes
	// back UP only after upAfter of them (damping: one stray heartbeat from a
	// flapping node does not flip it).
	beatsSinceDown map[string]int
}

// stateChange is one node state transition to propose.
type stateChange struct {
	state  ginv1.NodeState
	reason string
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

func newLiveness(interval time.Duration, missed int, store *state.Store, log *slog.Logger,
	setState func(ctx context.Context, node string, st ginv1.NodeState, reason string) error) *liveness {
	return &liveness{interval: interval, missed: missed, store: store, setState: setState, log: log, now: time.Now,
		lastSeen: map[string]time.Time{}, pending: map[string]bool{}, next: map[string]stateChange{}, beatsSinceDown: map[string]int{}}
}

// rearm restarts every timer (called when this server becomes leader).
func (l *liveness) rearm() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastSeen = map[string]time.Time{}
	l.armedAt = l.now()
}

// seen records a sign of life and, when the node is recorded DOWN, brings it
// back UP.
func (l *liveness) seen(ctx context.Context, node string) {
	h, ok := l.store.Head(node)
	down := ok && h.State() == ginv1.NodeState_NODE_STATE_DOWN
	l.mu.Lock()
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
		l.propose(ctx, node, ginv1.NodeState_NODE_STATE_UP, fmt.Sprintf("heartbeats resumed (%d received)", n))
	}
}

// propose commits a node state change. One proposal per node is in flight
// at a time; a change asked for meanwhile is kept (the latest one) and
// proposed right after, unless it asks for the state just proposed.
func (l *liveness) propose(ctx context.Context, node string, st ginv1.NodeState, reason string) {
	l.mu.Lock()
	if l.pending[node] {
		l.next[node] = stateChange{state: st, reason: reason}
		l.mu.Unlock()
		return
	}
	l.pending[node] = true
	l.mu.Unlock()
	for {
		if err := l.setState(ctx, node, st, reason); err != nil {
			l.log.Warn("node state change not committed", "node", node, "state", st, "err", err)
		} else {
			l.log.Info("node state changed", "node", node, "state", st, "reason", reason)
		}
		l.mu.Lock()
		nx, ok := l.next[node]
		delete(l.next, node)
		if !ok || nx.state == st {
			delete(l.pending, node)
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		st, reason = nx.state, nx.reason
	}
}

// check marks DOWN every UP node not heard from within missed intervals.
func (l *liveness) check(ctx context.Context) {
	limit := time.Duration(l.missed) * l.interval
	now := l.now()
	view := l.store.View()
	var down []string
	l.mu.Lock()
	for _, name := range view.NodeNames() {
		h, _ := view.Head(name)
		if h.State() != ginv1.NodeState_NODE_STATE_UP {
			continue
		}
		last, ok := l.lastSeen[name]
		if !ok {
			last = l.armedAt.Add(reattachGrace(l.interval))
		}
		if now.Sub(last) > limit {
			down = append(down, name)
		}
	}
	l.mu.Unlock()
	for _, n := range down {
		l.mu.Lock()
		delete(l.beatsSinceDown, n)
		l.mu.Unlock()
		l.propose(ctx, n, ginv1.NodeState_NODE_STATE_DOWN, fmt.Sprintf("missed %d heartbeats (%s)", l.missed, limit))
	}
}

// run checks every half interval until ctx ends (a leader-only loop).
func (l *liveness) run(ctx context.Context) {
	t := time.NewTicker(l.interval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.check(ctx)
		}
	}
}
