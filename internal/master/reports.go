package master

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
)

// The fabric scanner is one connected agent of the whole cluster, named by
// the leader: the first to attach, kept while its agent holds a session
// with any master; when it leaves, the smallest connected node name takes
// over. A follower passes on the name the leader answers its reports with.
type scannerRole struct {
	mu   sync.Mutex
	name string
}

// scanner is the node whose agent runs fabric scans, as this master knows
// it ("" when none).
func (s *Server) scanner() string {
	s.scan.mu.Lock()
	defer s.scan.mu.Unlock()
	return s.scan.name
}

// setScanner records the scanner a leader named.
func (s *Server) setScanner(name string) {
	s.scan.mu.Lock()
	defer s.scan.mu.Unlock()
	s.scan.name = name
}

// refreshScanner (leader): keep the scanner while its agent is connected
// here or to a master that reports, else name the smallest connected node.
func (s *Server) refreshScanner() {
	if !s.node.IsLeader() {
		return
	}
	s.scan.mu.Lock()
	defer s.scan.mu.Unlock()
	if cur := s.scan.name; cur != "" && (s.sessions.has(cur) || s.live.reportedHeld(cur)) {
		return
	}
	next := s.sessions.smallest()
	if r := s.live.smallestReported(); r != "" && (next == "" || r < next) {
		next = r
	}
	s.scan.name = next
}

// errDetached: a follower cut off from the leader for the reattach grace
// ends its agents' sessions (UNAVAILABLE) so that they move to a master
// whose reports arrive. The grace is longer than an election (a follower
// keeps its sessions while the leader is replaced) and shorter than what
// the leader gives a silent master's nodes (the grace plus the missed
// heartbeats), so the agents reattach before any is marked DOWN.
var errDetached = errors.New("this master has not reached the leader")

// leaderUnreached is how long this master has neither led nor had a
// session report accepted by the leader (0 while it leads).
func (s *Server) leaderUnreached() time.Duration {
	if s.node.IsLeader() {
		return 0
	}
	return s.link.unreachedSince(time.Now())
}

// detached reports (as errDetached) whether this master is a follower cut
// off from the leader (cutOff).
func (s *Server) detached() error {
	if s.node.IsLeader() {
		return nil
	}
	since := s.leaderUnreached()
	contact := time.Duration(-1)
	if lc := s.node.LastContact(); !lc.IsZero() {
		contact = max(time.Since(lc), 0)
	}
	if cutOff(since, s.link.failed.Load(), contact, reattachGrace(s.cfg.HeartbeatInterval), s.reportPeriod(), s.raftExcuseLimit()) {
		return fmt.Errorf("%w for %s; attach to another master", errDetached, since.Round(time.Millisecond))
	}
	return nil
}

// cutOff is the rule that ends a follower's sessions: its session reports
// have not reached the leader for the grace, measured both on the wall
// clock (unreached) and on its own progress (failed: consecutive report
// attempts that failed, at least three quarters of the attempts the grace
// holds), and Raft has not heard from a leader, nor from a candidate it
// voted for, within the grace either (contact: time since, negative for
// never). So
//
//   - a follower cut off by the network (a partition, the leader and the
//     other masters gone) loses its Raft contact and its reports alike and
//     ends its sessions after the grace, as before;
//   - a follower starved of CPU itself makes few attempts in that time and
//     keeps its sessions until it has really tried;
//   - a leader too slow to answer reports in time (its CPU or its garbage
//     collector starved), or an election slower than usual, still reaches
//     this follower through Raft (heartbeats, appends, vote requests):
//     the follower is not cut off and keeps its agents, rather than
//     sending thousands of them at once to the masters that are struggling
//     already;
//   - but Raft's word excuses the reports only up to raftLimit: past it
//     the leader, if its liveness check runs, would mark this master's
//     nodes DOWN before their agents could move (raftExcuseLimit), and a
//     report path that stays broken while Raft works (a firewall on the
//     client port only) must not hold agents for ever.
func cutOff(unreached time.Duration, failed int64, contact, grace, period, raftLimit time.Duration) bool {
	if unreached <= grace || period <= 0 || failed < int64(grace/period)*3/4 {
		return false
	}
	raftHeard := contact >= 0 && contact <= grace
	return !raftHeard || unreached > raftLimit
}

// raftExcuseLimit is how long after its last accepted report a follower
// that Raft still reaches keeps its sessions: the leader gives a silent
// master's nodes the grace plus the missed heartbeats from its last
// report, and the agents need a heartbeat to hear of the end and a report
// period for their new master to list them, so the sessions end that much
// before (at the default 5 s heartbeat: 27.5 s instead of 20 s), never
// before the grace.
func (s *Server) raftExcuseLimit() time.Duration {
	hb := s.cfg.HeartbeatInterval
	grace := reattachGrace(hb)
	return max(grace+time.Duration(s.cfg.MissedHeartbeats)*hb-hb-s.reportPeriod(), grace)
}

// reportPeriod is the interval between two session reports.
func (s *Server) reportPeriod() time.Duration { return s.cfg.HeartbeatInterval / 2 }

// reportLoop sends the leader this master's agent sessions every half
// heartbeat interval while it is a follower (ReportSessions: in full, or
// what changed since the last report the leader accepted, reportdelta.go),
// and keeps the fabric scanner the leader names. It runs on every master
// for its whole life; the leader reads its own sessions directly.
func (s *Server) reportLoop(ctx context.Context) {
	period := s.reportPeriod()
	t := time.NewTicker(period)
	defer t.Stop()
	tr := newReportTracker(freshWithin(s.cfg.HeartbeatInterval, s.cfg.MissedHeartbeats))
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.node.IsLeader() {
			s.link.reachedAt(time.Now())
			tr.reset() // whoever leads next holds no base of ours
			failing = false
			continue
		}
		err := s.reportSessions(ctx, period, tr)
		if err != nil {
			s.link.failed.Add(1)
		}
		switch {
		case err == nil:
			s.link.reachedAt(time.Now())
			s.link.accepted.Store(true)
			if failing {
				s.log.Info("session reports reach the leader again", "sessions", s.sessions.count())
			}
			failing = false
		case !failing && ctx.Err() == nil:
			failing = true
			s.log.Warn("session report not delivered to the leader; retrying", "sessions", s.sessions.count(), "err", err)
		}
	}
}

// reportSessions sends one report, within timeout: a delta when the
// leader holds the base, else (or when it answers that it does not) a
// full one.
func (s *Server) reportSessions(ctx context.Context, timeout time.Duration, tr *reportTracker) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := s.link.relay()
	if err != nil {
		return err
	}
	addr := s.leaderHint()
	left := s.sessions.takeLeft()
	for range 2 {
		now := time.Now()
		p := tr.build(now, addr, s.cfg.ID, s.sessions.lastHeard(now), left)
		left = nil
		resp, err := c.ReportSessions(ctx, p.req)
		if err != nil {
			return err
		}
		s.metrics.reportBytes.Add(uint64(proto.Size(p.req)))
		if resp.GetSendFull() {
			tr.reset()
			continue
		}
		tr.accepted(now, addr, p, resp.GetDeltas())
		s.setScanner(resp.GetFabricScanner())
		return nil
	}
	return errors.New("the leader asked for a full report twice in a row")
}
