package master

import (
	"context"
	"log/slog"
	"slices"
	"sync"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/state"
)

// planPushBuffer bounds the plans queued for one agent session; a plan
// that does not fit is not pushed (the agent asks for it when a rank does).
const planPushBuffer = 16

// planPush hands pinned plans to this master's agent sessions of the plans'
// nodes, which push them on their streams (SessionResponse.plans). Every
// master, leader or follower, publishes the plans its state applies
// (run), so agents get them wherever they are attached.
// An idle session holds no goroutine for it: a pusher runs only while a
// session has plans queued (issue #16: goroutine stacks were a third of a
// master's memory per agent).
type planPush struct {
	mu sync.Mutex
	// subs are the queues of each node's sessions (one, unless an agent
	// reconnects before its old stream ends; a slice, not a map, is what
	// a session costs, issue #16).
	subs map[string][]*planQueue
}

// planQueue is one session's pending plans and its pusher.
type planQueue struct {
	push func(*ginv1.Plan) error // sends one plan on the session's stream

	mu      sync.Mutex
	plans   []*ginv1.Plan
	running bool // a pusher goroutine is draining plans
	closed  bool // the session ended or its stream failed
}

// subscribe registers a session of node whose plans are sent by push
// (from a pusher goroutine, one plan at a time); cancel unregisters it.
// push must be safe to call concurrently with the session's own sends.
func (p *planPush) subscribe(node string, push func(*ginv1.Plan) error) (cancel func()) {
	q := &planQueue{push: push}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.subs == nil {
		p.subs = map[string][]*planQueue{}
	}
	p.subs[node] = append(p.subs[node], q)
	return func() {
		p.mu.Lock()
		if left := slices.DeleteFunc(p.subs[node], func(x *planQueue) bool { return x == q }); len(left) > 0 {
			p.subs[node] = left
		} else {
			delete(p.subs, node)
		}
		p.mu.Unlock()
		q.close()
	}
}

// publish queues pl for every session of its nodes; it returns how many
// sessions got it and how many were full.
func (p *planPush) publish(pl *ginv1.Plan) (queued, full int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range pl.GetNodes() {
		for _, q := range p.subs[n] {
			if q.offer(pl) {
				queued++
			} else {
				full++
			}
		}
	}
	return queued, full
}

// offer queues pl and starts the pusher if none runs; false when the
// queue is full or closed.
func (q *planQueue) offer(pl *ginv1.Plan) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || len(q.plans) >= planPushBuffer {
		return false
	}
	q.plans = append(q.plans, pl)
	if !q.running {
		q.running = true
		go q.drain()
	}
	return true
}

// drain pushes the queued plans in order and returns when none is left,
// the session ended, or a send failed (then nothing more is pushed).
func (q *planQueue) drain() {
	for {
		q.mu.Lock()
		if q.closed || len(q.plans) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		pl := q.plans[0]
		q.plans[0] = nil
		q.plans = q.plans[1:]
		q.mu.Unlock()
		if err := q.push(pl); err != nil {
			q.close()
		}
	}
}

// close drops what is queued; a push in progress completes or fails.
func (q *planQueue) close() {
	q.mu.Lock()
	q.closed, q.plans = true, nil
	q.mu.Unlock()
}

// sessionSender serialises the sends of one agent stream: the session loop
// answers the agent while a plan pusher sends pinned plans.
type sessionSender struct {
	mu     sync.Mutex
	stream responder
}

// responder is what a session sends on.
type responder interface {
	Send(*ginv1.SessionResponse) error
}

func (s *sessionSender) Send(r *ginv1.SessionResponse) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stream.Send(r)
}

// run publishes every plan store pins (through Raft: on the leader when it
// commits, on a follower when it applies) to the sessions of its nodes,
// until ctx ends. A watch that falls behind is opened again; plans missed
// meanwhile are fetched by the agents when a rank asks.
func (p *planPush) run(ctx context.Context, store *state.Store, log *slog.Logger) {
	for ctx.Err() == nil {
		events, cancel := store.Watch()
		p.publishPinned(ctx, store, log, events)
		cancel()
	}
}

// publishPinned publishes the plans of PLAN_PINNED events until the watch
// ends or ctx does.
func (p *planPush) publishPinned(ctx context.Context, store *state.Store, log *slog.Logger, events <-chan state.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				log.Warn("plan push fell behind the state's changes; watching again")
				return
			}
			if e.Kind != ginv1.WatchEventKind_WATCH_EVENT_KIND_PLAN_PINNED {
				continue
			}
			pl, ok := store.Plan(e.Job)
			if !ok {
				continue
			}
			queued, full := p.publish(pl)
			log.Debug("plan queued for the agents of its nodes", "job", e.Job, "sessions", queued, "full", full)
		}
	}
}
