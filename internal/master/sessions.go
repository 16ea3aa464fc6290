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
	// left names the nodes whose agent ended its last session here itself
	// (it moved to another master), with when, until the report loop takes
	// them (takeLeft); at most maxLeft.
	left map[string]time.Time
}

// maxLeft bounds sessions.left: past it a node that left is reported as
// lost, which costs nothing but the sign of life its leaving was.
const maxLeft = 65536

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

// remove records the end of one stream of node n; left is set when the
// agent ended it itself (a clean end of its stream: it moves to another
// master), at now.
func (c *sessions) remove(n string, left bool, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[n]
	if e == nil {
		return
	}
	if e.streams--; e.streams > 0 {
		return
	}
	delete(c.m, n)
	if !left {
		return
	}
	if c.left == nil {
		c.left = map[string]time.Time{}
	}
	if len(c.left) < maxLeft {
		c.left[n] = now
	}
}

// takeLeft returns the nodes that left since the last call and forgets
// them (nil when none).
func (c *sessions) takeLeft() map[string]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.left
	c.left = nil
	return l
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

// lastHeard is, for every node with a session here, when its agent was
// last heard from (now while a write is in flight): what a follower
// reports to the leader (reportdelta.go).
func (c *sessions) lastHeard(now time.Time) map[string]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]time.Time, len(c.m))
	for n, e := range c.m {
		last := e.last
		if e.writing > 0 || last.After(now) {
			last = now
		}
		out[n] = last
	}
	return out
}

// ageMs is the milliseconds from last to now, as a report carries them.
func ageMs(now, last time.Time) uint32 {
	return uint32(min(max(now.Sub(last).Milliseconds(), 0), math.MaxUint32))
}
