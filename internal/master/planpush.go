package master

import (
	"context"
	"log/slog"
	"sync"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// planPushBuffer bounds the plans queued for one agent session; a plan
// that does not fit is not pushed (the agent asks for it when a rank does).
const planPushBuffer = 16

// planPush hands plans pinned on this leader to the agent sessions of the
// plans' nodes, which push them on their streams (SessionResponse.plans).
type planPush struct {
	mu   sync.Mutex
	subs map[string]map[chan *ginv1.Plan]struct{} // node → its sessions' queues
}

// subscribe registers a session of node; cancel unregisters it.
func (p *planPush) subscribe(node string) (<-chan *ginv1.Plan, func()) {
	ch := make(chan *ginv1.Plan, planPushBuffer)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.subs == nil {
		p.subs = map[string]map[chan *ginv1.Plan]struct{}{}
	}
	if p.subs[node] == nil {
		p.subs[node] = map[chan *ginv1.Plan]struct{}{}
	}
	p.subs[node][ch] = struct{}{}
	return ch, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.subs[node], ch)
		if len(p.subs[node]) == 0 {
			delete(p.subs, node)
		}
	}
}

// publish queues pl for every session of its nodes; it returns how many
// sessions got it and how many were full.
func (p *planPush) publish(pl *ginv1.Plan) (queued, full int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range pl.GetNodes() {
		for ch := range p.subs[n] {
			select {
			case ch <- pl:
				queued++
			default:
				full++
			}
		}
	}
	return queued, full
}

// sessionSender serialises the sends of one agent stream: the session loop
// answers the agent while the plan pusher sends pinned plans.
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

// pushPlans sends the plans queued for node's session until ctx ends.
func (a *agentService) pushPlans(ctx context.Context, send responder, node string, plans <-chan *ginv1.Plan, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case pl := <-plans:
			r := a.s.response(node)
			r.Plans = []*ginv1.Plan{pl}
			if err := send.Send(r); err != nil {
				log.Warn("plan not pushed: the stream failed", "job", pl.GetJobId(), "err", err)
				return
			}
			log.Info("plan pushed", "job", pl.GetJobId(), "hash", pl.GetContentHash())
		}
	}
}
