package master

import (
	"math"
	"sync"
	"time"
)

// sessions is what this master holds of its own agent sessions: open
// streams per node and when each node's agent was last heard from (hello or
// heartbeat). Every master keeps it, leader or follower: a follower reports
// it to the leader (reports.go), the leader reads it through liveness.seen.
type sessions struct {
	mu sync.Mutex
	m  map[string]*sessionEntry
}

type sessionEntry struct {
	streams int
	last    time.Time
	// writing counts the node's writes in flight: its session loop waits
	// for the leader and reads no heartbeat meanwhile, but the agent is
	// there (its stream is open), so it counts as heard from now.
	writing int
}

// add records a new stream of node n, heard from at now.
func (c *sessions) add(n string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*sessionEntry{}
	}
	e := c.m[n]
	if e == nil {
		e = &sessionEntry{}
		c.m[n] = e
	}
	e.streams++
	e.last = now
}

// remove records the end of one stream of node n.
func (c *sessions) remove(n string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[n]; e != nil {
		if e.streams--; e.streams <= 0 {
			delete(c.m, n)
		}
	}
}

// beat records that node n's agent was heard from at now.
func (c *sessions) beat(n string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[n]; e != nil && now.After(e.last) {
		e.last = now
	}
}

// writeStarted and writeDone bracket a write of node n's session.
func (c *sessions) writeStarted(n string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[n]; e != nil {
		e.writing++
	}
}

func (c *sessions) writeDone(n string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[n]; e != nil {
		e.writing--
		if now.After(e.last) {
			e.last = now
		}
	}
}

// writing reports whether node n has a write in flight here.
func (c *sessions) writing(n string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[n]
	return e != nil && e.writing > 0
}

// count is how many nodes have a session here.
func (c *sessions) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// has reports whether node n has a session here.
func (c *sessions) has(n string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[n] != nil
}

// smallest is the smallest node name with a session here ("" when none).
func (c *sessions) smallest() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	min := ""
	for n := range c.m {
		if min == "" || n < min {
			min = n
		}
	}
	return min
}

// report lists the nodes with a session here and, at the same positions,
// the milliseconds since each was last heard from (what a follower sends
// the leader in ReportSessions).
func (c *sessions) report(now time.Time) (nodes []string, agesMs []uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nodes = make([]string, 0, len(c.m))
	agesMs = make([]uint32, 0, len(c.m))
	for n, e := range c.m {
		age := max(now.Sub(e.last).Milliseconds(), 0)
		if e.writing > 0 {
			age = 0
		}
		nodes = append(nodes, n)
		agesMs = append(agesMs, uint32(min(age, math.MaxUint32)))
	}
	return nodes, agesMs
}
