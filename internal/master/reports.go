package master

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
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

// errDetached: a follower that has not reached the leader for the reattach
// grace ends its agents' sessions (UNAVAILABLE) so that they move to a
// master whose reports arrive. The grace is longer than an election (a
// follower keeps its sessions while the leader is replaced) and shorter
// than what the leader gives a silent master's nodes (the grace plus the
// missed heartbeats), so the agents reattach before any is marked DOWN.
var errDetached = errors.New("this master has not reached the leader")

// leaderUnreached is how long this master has neither led nor had a
// session report accepted by the leader (0 while it leads).
func (s *Server) leaderUnreached() time.Duration {
	if s.node.IsLeader() {
		return 0
	}
	return max(time.Since(time.Unix(0, s.reachedLeader.Load())), 0)
}

// detached reports (as errDetached) whether this master is a follower
// whose reports have not reached a leader for the reattach grace.
func (s *Server) detached() error {
	if s.node.IsLeader() {
		return nil
	}
	limit := reattachGrace(s.cfg.HeartbeatInterval)
	if since := s.leaderUnreached(); since > limit {
		return fmt.Errorf("%w for %s; attach to another master", errDetached, since.Round(time.Millisecond))
	}
	return nil
}

// reportLoop sends the leader this master's agent sessions every half
// heartbeat interval while it is a follower (ReportSessions), and keeps the
// fabric scanner the leader names. It runs on every master for its whole
// life; the leader reads its own sessions directly.
func (s *Server) reportLoop(ctx context.Context) {
	period := s.cfg.HeartbeatInterval / 2
	t := time.NewTicker(period)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.node.IsLeader() {
			s.reachedLeader.Store(time.Now().UnixNano())
			failing = false
			continue
		}
		err := s.reportSessions(ctx, period)
		switch {
		case err == nil:
			s.reachedLeader.Store(time.Now().UnixNano())
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

// reportSessions sends one report, within timeout.
func (s *Server) reportSessions(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := s.relayClient()
	if err != nil {
		return err
	}
	nodes, ages := s.sessions.report(time.Now())
	resp, err := c.ReportSessions(ctx, &ginv1.ReportSessionsRequest{ServerId: s.cfg.ID, Nodes: nodes, AgesMs: ages})
	if err != nil {
		return err
	}
	s.setScanner(resp.GetFabricScanner())
	return nil
}
