package master

import (
	"log/slog"
	"slices"
	"sync"
	"time"
)

// dupSessions finds, on the leader, nodes whose agent holds sessions on two
// masters at once (or two on one master) for longer than a return home or a
// reattach takes: two agents presenting one node's certificate (a copied
// key, a cloned machine), whose writes would interleave under one name
// (issue #21). It warns once per episode naming the node and the masters,
// and counts them (gin_master_duplicate_agent_sessions,
// gin_master_duplicate_agent_sessions_total). It does not end either
// session: the leader cannot tell the impostor from the agent, and ending
// both would let a stolen certificate keep the real agent off; the
// operator denies the certificate (ginctl tls deny) and re-issues it.
type dupSessions struct {
	// grace is how long two sessions of a node are normal: a return home
	// makes the new session before it breaks the old one, and a master's
	// report of an ended session arrives within a report period;
	// reattachGrace(interval) when zero.
	grace time.Duration

	mu     sync.Mutex
	last   time.Time            // the last check
	done   time.Time            // the last check that counted (last, once its counts are in)
	since  map[string]time.Time // duplicates seen, from when
	warned map[string]bool      // counted and logged this episode
	now    int                  // nodes held twice longer than grace
	total  uint64
}

// check looks for duplicates (the leader's liveness check calls it, every
// half interval; it looks at most once an interval). It counts holders per
// node without allocating per node, and names the masters only for a node
// it warns about.
func (d *dupSessions) check(s *Server) {
	l := s.live
	at := l.now()
	d.mu.Lock()
	if at.Sub(d.last) < s.cfg.HeartbeatInterval {
		d.mu.Unlock()
		return
	}
	d.last = at
	d.mu.Unlock()
	local := s.sessions.streamCounts()
	count := make(map[string]int, len(local))
	for n, streams := range local {
		count[n] += streams
	}
	l.mu.Lock()
	if !l.active {
		l.mu.Unlock()
		d.reset()
		return
	}
	live := map[string]*reporter{}
	for from, r := range l.reporters {
		if at.Sub(r.at) > l.reportLost() {
			continue
		}
		live[from] = r
		// Stale entries too: a session whose agent is quiet is still held
		// (it ends at the master's silence timeout, and leaves the report).
		for n := range r.nodes {
			count[n]++
		}
	}
	holders := func(n string) []string {
		var hs []string
		for range local[n] {
			hs = append(hs, s.cfg.ID)
		}
		for from, r := range live {
			if _, ok := r.nodes[n]; ok {
				hs = append(hs, from)
			}
		}
		slices.Sort(hs)
		return hs
	}
	defer l.mu.Unlock() // holders reads the reports
	d.mu.Lock()
	defer d.mu.Unlock()
	grace := d.grace // under d.mu: tests shorten it while the loop runs
	if grace == 0 {
		grace = reattachGrace(s.cfg.HeartbeatInterval)
	}
	if d.since == nil {
		d.since, d.warned = map[string]time.Time{}, map[string]bool{}
	}
	for n := range d.since {
		if count[n] < 2 {
			delete(d.since, n)
			delete(d.warned, n)
		}
	}
	d.now, d.done = 0, at
	for n, c := range count {
		if c < 2 {
			continue
		}
		first, ok := d.since[n]
		if !ok {
			d.since[n] = at
			continue
		}
		if at.Sub(first) < grace {
			continue
		}
		d.now++
		if !d.warned[n] {
			d.warned[n] = true
			d.total++
			s.log.Warn("two agents hold sessions of one node at once: its certificate is presented by two machines (deny it and issue a new one: ginctl tls deny)",
				slog.String("node", n), slog.Any("masters", holders(n)), slog.Duration("for", at.Sub(first).Round(time.Second)))
		}
	}
}

// reset forgets every duplicate (not the leader).
func (d *dupSessions) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.since, d.warned, d.now = nil, nil, 0
}

// counts is the nodes held twice now (past grace) and the episodes since
// start.
func (d *dupSessions) counts() (now int, total uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.now, d.total
}

// streamCounts is, per node with a session here, its open streams.
func (c *sessions) streamCounts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.m))
	for n, e := range c.m {
		out[n] = e.streams
	}
	return out
}
