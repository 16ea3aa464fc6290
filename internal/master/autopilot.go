package master

import (
	"context"
	"sync"
	"time"
)

// minHealthyVoters is the fewest healthy voters dead-server cleanup leaves.
const minHealthyVoters = 2

// deadServers tracks, on the leader, the voters failing heartbeats.
type deadServers struct {
	mu      sync.Mutex
	failing map[string]time.Time // server id → last contact
}

func (d *deadServers) fail(id string, since time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failing == nil {
		d.failing = map[string]time.Time{}
	}
	if _, ok := d.failing[id]; !ok {
		d.failing[id] = since
	}
}

func (d *deadServers) resume(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.failing, id)
}

// overdue returns one server failing for longer than timeout, if any.
func (d *deadServers) overdue(now time.Time, timeout time.Duration) (string, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, since := range d.failing {
		if !since.IsZero() && now.Sub(since) > timeout {
			return id, len(d.failing)
		}
	}
	return "", len(d.failing)
}

// cleanupDeadServers removes, one at a time, a voter that has failed
// heartbeats for longer than cfg.DeadServerTimeout, when at least
// minHealthyVoters healthy voters remain (autopilot-style). A removed server
// that comes back rejoins through --join. It is a leader-only loop: its
// failure bookkeeping lives for one term only (failures seen in an earlier
// term are stale; a resumed heartbeat seen by another leader never reached
// this one).
func (s *Server) cleanupDeadServers(ctx context.Context) {
	var dead deadServers
	stop := s.node.PeerHealth(dead.fail, dead.resume)
	defer stop()
	t := time.NewTicker(min(s.cfg.DeadServerTimeout/2, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			id, failing := dead.overdue(now, s.cfg.DeadServerTimeout)
			if id == "" {
				continue
			}
			voters := 0
			for _, m := range s.node.Stats().Members {
				if m.Voter {
					voters++
				}
			}
			if healthy := voters - failing; healthy < minHealthyVoters {
				s.log.Warn("dead server kept: removing it would leave too few healthy voters", "member", id, "healthy", healthy)
				continue
			}
			if err := s.node.RemoveServer(ctx, id); err != nil {
				s.log.Warn("dead server cleanup failed", "member", id, "err", err)
				continue
			}
			dead.resume(id)
			s.log.Warn("removed a dead server", "member", id, "failing_for", s.cfg.DeadServerTimeout)
			s.readmitCleanedUp(ctx, id)
		}
	}
}
