package master

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Leadership has a lifecycle (Nomad's shape): one monitor follows Raft's
// leadership signal; establishLeadership enables every leader-only part
// (leaderParts) and starts every leader-only loop (leaderLoops) with a
// context of its own, revokeLeadership cancels that context, waits until
// every loop has returned and disables the parts. No leader-only loop asks IsLeader on
// its ticks: it runs exactly while this server leads.

// leaderLoop is one leader-only subsystem: run returns when ctx ends.
type leaderLoop struct {
	name string
	run  func(ctx context.Context)
}

// leaderLoops lists every leader-only subsystem; a new one is added here
// and nowhere else.
func (s *Server) leaderLoops() []leaderLoop {
	loops := []leaderLoop{
		// One-shot: the cluster id and this server's client address.
		{"leader-setup", s.onLeadership},
		// Missed heartbeats mark nodes down (timers in this leader's memory).
		{"liveness", s.live.run},
		// Pinned plans past their expiry are deleted.
		{"plan-expiry", func(ctx context.Context) { s.plans.expiryLoop(ctx, time.Minute) }},
		// Running jobs' suspects are recomputed from their ranks' windows.
		{"live-jobs", s.liveJobs.run},
	}
	for _, t := range s.cfg.LeaderTasks {
		// Each task gets a verdict cache of its own (assessments are kept
		// per node and rerun only for nodes that changed).
		loops = append(loops, leaderLoop{t.Name, func(ctx context.Context) { t.Run(ctx, s.store, s.newCheck().verdictsAt) }})
	}
	if s.cfg.DeadServerTimeout > 0 {
		// Voters failing heartbeats for too long are removed (autopilot).
		loops = append(loops, leaderLoop{"dead-server-cleanup", s.cleanupDeadServers})
	}
	return loops
}

// leaderPart is a part that works only while this master leads (Nomad's
// SetEnabled): enabled once leadership is established (after the barrier,
// before the leader-only loops start), disabled once they have stopped.
type leaderPart interface {
	SetEnabled(on bool)
}

// leaderParts lists the leader-only parts; a new one is added here.
func (s *Server) leaderParts() []leaderPart {
	return []leaderPart{
		s.live,     // node liveness: timers re-armed with their post-election grace
		s.liveJobs, // running jobs: a former leader's windows are dropped
	}
}

// SetEnabled turns the leader's liveness on (timers re-armed with their
// post-election grace) and off.
func (l *liveness) SetEnabled(on bool) {
	if on {
		l.rearm()
	} else {
		l.deactivate()
	}
}

// leadership is the state of the leader-only subsystems. Only the monitor
// goroutine establishes and revokes; running may be read by anyone.
type leadership struct {
	cancel context.CancelFunc // nil while not established
	wg     sync.WaitGroup
	// running counts leader-only goroutines that have not returned.
	running atomic.Int64
}

// establishLeadership runs once this server has become leader: a barrier
// first (the state then holds every committed entry), liveness timers
// re-armed with their post-election grace, then every leader-only loop.
// On error (the barrier failed: leadership already lost, or shutdown)
// nothing is started.
func (s *Server) establishLeadership(ctx context.Context) error {
	if err := s.node.Barrier(ctx); err != nil {
		return err
	}
	for _, p := range s.leaderParts() {
		p.SetEnabled(true)
	}
	s.refreshScanner()
	lctx, cancel := context.WithCancel(ctx)
	s.lead.cancel = cancel
	for _, l := range s.leaderLoops() {
		s.lead.wg.Add(1)
		s.lead.running.Add(1)
		go func() {
			defer s.lead.wg.Done()
			defer s.lead.running.Add(-1)
			l.run(lctx)
		}()
	}
	s.log.Info("leadership established; liveness timers re-armed")
	return nil
}

// revokeLeadership stops every leader-only loop and waits until all have
// returned; a no-op when leadership is not established.
func (s *Server) revokeLeadership() {
	if s.lead.cancel == nil {
		return
	}
	s.lead.cancel()
	s.lead.wg.Wait()
	s.lead.cancel = nil
	for _, p := range s.leaderParts() {
		p.SetEnabled(false)
	}
	s.log.Info("leadership revoked; leader-only loops stopped")
}

// monitorLeadership drives establishLeadership and revokeLeadership from
// Raft's leadership signal, revokes when ctx ends, and on every change and
// tick keeps the gRPC health status and the outdated-binary hand-off
// current. A failed establishment (barrier) is retried on the next tick
// while this server still leads.
func (s *Server) monitorLeadership(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	defer s.revokeLeadership()
	leader, serving := false, false
	agents := healthpb.HealthCheckResponse_UNKNOWN
	for {
		select {
		case <-ctx.Done():
			return
		case isLeader := <-s.node.LeaderCh():
			s.metrics.leaderChanges.Add(1)
			// The channel keeps only the latest change: a true may follow a
			// missed false, so a new term always starts from a revoked state.
			s.revokeLeadership()
			leader = isLeader
		case <-t.C:
		}
		if leader && s.lead.cancel == nil && s.node.IsLeader() {
			if err := s.establishLeadership(ctx); err != nil {
				s.log.Warn("leadership not established (retried while leading)", "err", err)
			}
		}
		if s.outdated() != nil && s.node.IsLeader() {
			s.handOff() // let a master that knows every command lead
		}
		id, _ := s.node.Leader()
		if now := id != "" && s.outdated() == nil; now != serving {
			serving = now
			st := healthpb.HealthCheckResponse_NOT_SERVING
			if serving {
				st = healthpb.HealthCheckResponse_SERVING
			}
			s.health.SetServingStatus("", st)
		}
		agents = s.agentHealth(agents)
	}
}
