package agent

import "time"

// Failover pacing. When the leader dies, the surviving followers keep naming
// it as leader until their own Raft heartbeat timeout; an agent that follows
// those hints bounces between a live follower and a dead address, and a
// backoff that doubles on every bounce would keep it away long after the new
// leader is elected. reach remembers which masters answered lately and
// which did not, so that the agent
//   - does not follow a hint to (nor rotate onto) a master that just failed
//     without answering, while another candidate may still answer, and
//   - waits at most liveRetryCap between attempts while some master answers
//     (an election is under way: it ends within seconds), keeping the long
//     exponential backoff for when no master answers at all.
const (
	// downMemory: how long a master that failed without answering is
	// passed over (it is tried again in rotation afterwards, or at once
	// when every candidate is down). It covers the window in which a
	// follower still names a dead leader (its Raft heartbeat timeout, 1 s by
	// default, plus an election), and no more: a master restarted right
	// after it failed may be the next leader.
	downMemory = 3 * time.Second
	// aliveMemory: how long after the last answer from any master the
	// cluster counts as alive for pacing.
	aliveMemory = 10 * time.Second
	// liveRetryCap caps the wait between attempts while the cluster is alive.
	liveRetryCap = time.Second
	// busyMemory: how long a master that answered RESOURCE_EXHAUSTED (its
	// caps on nodes or streams reached, its data dir full) is passed over,
	// in rotation and as a leader hint, while another candidate may take
	// the agent.
	busyMemory = 10 * time.Second
)

// reach is the connect loop's memory of who answered; not safe for
// concurrent use (the connect loop is one goroutine).
type reach struct {
	now        func() time.Time
	down       map[string]time.Time // address → last failure without an answer
	busy       map[string]time.Time // address → last RESOURCE_EXHAUSTED
	lastAnswer time.Time
}

func newReach(now func() time.Time) *reach {
	return &reach{now: now, down: map[string]time.Time{}, busy: map[string]time.Time{}}
}

// answered records that the master at addr answered (any gRPC status from
// the master itself: an acknowledged Hello, a redirect, a refusal).
func (r *reach) answered(addr string) {
	delete(r.down, addr)
	r.lastAnswer = r.now()
}

// failed records that addr could not be reached or went away.
func (r *reach) failed(addr string) { r.down[addr] = r.now() }

// isDown reports whether addr failed without answering within downMemory.
func (r *reach) isDown(addr string) bool {
	t, ok := r.down[addr]
	return ok && r.now().Sub(t) < downMemory
}

// exhausted records that addr answered RESOURCE_EXHAUSTED: it cannot take
// this agent now.
func (r *reach) exhausted(addr string) { r.busy[addr] = r.now() }

// avoid reports whether addr failed without answering within downMemory
// or was exhausted within busyMemory.
func (r *reach) avoid(addr string) bool {
	t, ok := r.busy[addr]
	return r.isDown(addr) || ok && r.now().Sub(t) < busyMemory
}

// alive reports whether some master answered within aliveMemory.
func (r *reach) alive() bool {
	return !r.lastAnswer.IsZero() && r.now().Sub(r.lastAnswer) < aliveMemory
}

// pace caps a backoff wait while the cluster is alive.
func (r *reach) pace(wait time.Duration) time.Duration {
	if r.alive() {
		return min(wait, liveRetryCap)
	}
	return wait
}

// next returns the index after i in a list of n candidates, skipping those
// that are down or exhausted, unless every other one is.
func (r *reach) next(i, n int, addrAt func(int) string) int {
	for k := 1; k <= n; k++ {
		j := (i + k) % n
		if !r.avoid(addrAt(j)) {
			return j
		}
	}
	return (i + 1) % n
}
