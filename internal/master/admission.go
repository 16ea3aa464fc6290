package master

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxHandshakes and DefaultHandshakeQueue are Config.MaxHandshakes's
// and Config.HandshakeQueue's defaults: registration is CPU-bound (about
// 400 nodes/s on two cores), so more handshakes at once only queue inside
// Raft and the garbage collector while reads and heartbeats wait behind them.
const (
	DefaultMaxHandshakes  = 64
	DefaultHandshakeQueue = 1024
)

// HandshakeRatePerCPU is the default handshake rate per CPU the master may
// use (GOMAXPROCS): a registration costs the master about 1.2 ms of CPU
// (docs/BENCHMARKS.md: BenchmarkRegistration; 3.4 ms in the 10,000-agent
// cold start, measured before a 26% cut), so 125 per second and per CPU
// keep a storm of registrations near 15% of the machine (under half at the
// costliest figure measured), and a storm of
// agents in sync (much cheaper) under less; the rest is left to commits,
// heartbeats of attached agents and reads. Two CPUs: 250 per second, so
// the third of 25,000 agents moving onto two masters after a failover is
// admitted in about 17 s.
const HandshakeRatePerCPU = 125

// DefaultHandshakeRate is Config.HandshakeRate's default on this machine.
func DefaultHandshakeRate() float64 {
	return HandshakeRatePerCPU * float64(runtime.GOMAXPROCS(0))
}

// Bounds of the retry hint a refused Hello carries (the agent waits it
// out plus up to as much jitter, internal/agent/backoff.go): at least a
// second, so refused agents do not come straight back; at most the agent's
// own cap on hints.
const (
	minHandshakeRetry = time.Second
	maxHandshakeRetry = time.Minute
)

// writeYield bounds how long a handshake waits for the writes of attached
// agents in flight on this master to finish before it starts anyway (so a
// steady stream of writes delays handshakes but never starves them).
const writeYield = time.Second

// admission paces the agent handshakes of a master. A handshake starts
// with a Hello and ends when the agent is in sync (its HelloAck says so, or
// its first inventory or delta has been answered), when the session ends,
// or after the hello timeout. A Hello is admitted when it has
//
//   - a token of the handshake rate (a token bucket: at most burst +
//     rate × elapsed Hellos are ever admitted, reserved in the order they
//     arrive; a reservation is the Hello's place in the queue),
//   - one of the --max-handshakes slots, and
//   - no write of an attached agent of this master in flight, or writeYield
//     passed waiting for one to finish: the replicated path of the agents
//     already attached (their inventory changes, here or relayed to the
//     leader) goes ahead of new sessions.
//
// Hellos that wait are bounded (--handshake-queue); past the queue, or when
// the queue's wait is longer than the hello timeout, a Hello is refused at
// once with RESOURCE_EXHAUSTED and a retry hint of the queue's wait, so the
// refused agents come back when the queue has drained, spread by their
// jitter. A whole-cluster restart or a failover so reattaches at a rate the
// master can serve while reads, heartbeats and commits are still answered.
type admission struct {
	slots    chan struct{} // one token per handshake in flight
	queue    int64         // the most Hellos waiting
	clock    Clock
	pace     *pacer
	writes   writeGate
	waiting  atomic.Int64
	refused  atomic.Uint64
	admitted atomic.Uint64
}

func newAdmission(limit, queue int, rate float64, burst int, clock Clock) *admission {
	if clock == nil {
		clock = realClock{}
	}
	return &admission{slots: make(chan struct{}, limit), queue: int64(queue), clock: clock, pace: newPacer(rate, burst, clock.Now())}
}

// errHandshakeBusy is a Hello refused by the admission limit.
type errHandshakeBusy struct {
	msg        string
	retryAfter time.Duration
}

func (e *errHandshakeBusy) Error() string { return e.msg }

// retryAfter is the hint of a refusal: the queue's wait, bounded.
func retryAfter(queueWait time.Duration) time.Duration {
	return min(max(queueWait, minHandshakeRetry), maxHandshakeRetry).Round(time.Millisecond)
}

// acquire admits a Hello (above), waiting at most until ctx ends or maxWait
// passes, and returns the release of its slot (idempotent, safe from any
// goroutine). A full queue, or a queue whose wait is past maxWait, refuses
// at once.
func (a *admission) acquire(ctx context.Context, maxWait time.Duration) (func(), error) {
	start := a.clock.Now()
	wait, ok := a.pace.reserve(start, maxWait)
	if !ok {
		a.refused.Add(1)
		hint := retryAfter(wait)
		return nil, &errHandshakeBusy{retryAfter: hint, msg: fmt.Sprintf(
			"the handshake queue of this master is %s long, longer than --hello-timeout %s (gin-master --handshake-rate %g/s, --handshake-queue %d); retry after %s",
			wait.Round(time.Millisecond), maxWait, a.pace.rate, a.queue, hint)}
	}
	if wait <= 0 {
		select {
		case a.slots <- struct{}{}:
			return a.admit(ctx), nil
		default:
		}
	}
	if a.waiting.Add(1) > a.queue {
		a.waiting.Add(-1)
		a.pace.unreserve(a.clock.Now())
		a.refused.Add(1)
		hint := retryAfter(a.pace.queueWait(a.clock.Now()))
		return nil, &errHandshakeBusy{retryAfter: hint, msg: fmt.Sprintf(
			"%d agent handshakes in progress and %d waiting, the most this master takes (gin-master --max-handshakes, --handshake-queue); retry after %s",
			cap(a.slots), a.queue, hint)}
	}
	defer a.waiting.Add(-1)
	if wait > 0 {
		select {
		case <-a.clock.After(wait):
		case <-ctx.Done():
			a.pace.unreserve(a.clock.Now())
			return nil, ctx.Err()
		}
	}
	t := time.NewTimer(max(maxWait-a.clock.Now().Sub(start), 0))
	defer t.Stop()
	select {
	case a.slots <- struct{}{}:
		return a.admit(ctx), nil
	case <-t.C:
		a.refused.Add(1)
		hint := retryAfter(a.pace.queueWait(a.clock.Now()))
		return nil, &errHandshakeBusy{retryAfter: hint, msg: fmt.Sprintf(
			"waited %s for one of %d agent handshake slots (gin-master --max-handshakes); retry after %s", maxWait, cap(a.slots), hint)}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// admit counts an admitted Hello holding a slot, lets the writes of
// attached agents in flight finish first (at most writeYield), and returns
// the slot's release.
func (a *admission) admit(ctx context.Context) func() {
	a.admitted.Add(1)
	a.writes.wait(ctx, a.clock, writeYield)
	var once sync.Once
	return func() { once.Do(func() { <-a.slots }) }
}

// inFlight is the number of handshakes holding a slot.
func (a *admission) inFlight() int { return len(a.slots) }

// pacer is a token bucket of handshakes per second, with reservations: a
// Hello takes its token when it arrives, and the tokens may go below zero
// (the Hellos waiting); how far below, over the rate, is the queue's wait.
type pacer struct {
	rate  float64 // tokens per second
	burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newPacer(rate float64, burst int, now time.Time) *pacer {
	rate = max(rate, 1e-3)
	b := float64(max(burst, 1))
	return &pacer{rate: rate, burst: b, tokens: b, last: now}
}

// advance refills the bucket up to now. p.mu is held.
func (p *pacer) advance(now time.Time) {
	if el := now.Sub(p.last); el > 0 {
		p.tokens = min(p.burst, p.tokens+el.Seconds()*p.rate)
		p.last = now
	}
}

// until is how long until the bucket holds a whole token. p.mu is held.
func (p *pacer) until() time.Duration {
	if p.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - p.tokens) / p.rate * float64(time.Second))
}

// reserve takes a token at now and returns when it is due (0: at once).
// When it would be due after maxWait no token is taken: ok is false and
// wait is the queue's wait.
func (p *pacer) reserve(now time.Time, maxWait time.Duration) (wait time.Duration, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advance(now)
	wait = p.until()
	if wait > maxWait {
		return wait, false
	}
	p.tokens--
	return wait, true
}

// unreserve gives back the token of a Hello that stopped waiting.
func (p *pacer) unreserve(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advance(now)
	p.tokens = min(p.burst, p.tokens+1)
}

// queueWait is how long a Hello arriving at now would wait for its token.
func (p *pacer) queueWait(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advance(now)
	return p.until()
}

// writeGate counts the writes of attached agents in flight on this master
// (their inventory changes and fabric scans, committed here or relayed to
// the leader); handshakes wait for them.
type writeGate struct {
	mu    sync.Mutex
	n     int
	idle  chan struct{} // closed when n falls to 0; nil while n is 0
	total atomic.Uint64 // writes begun since start
}

// begin records a write in flight; its end must follow.
func (g *writeGate) begin() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n == 0 {
		g.idle = make(chan struct{})
	}
	g.n++
	g.total.Add(1)
}

// end records the end of a write.
func (g *writeGate) end() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n--; g.n == 0 {
		close(g.idle)
		g.idle = nil
	}
}

// inFlight is the number of writes in flight.
func (g *writeGate) inFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

// wait returns once no write is in flight, ctx ends or limit passes on clock.
func (g *writeGate) wait(ctx context.Context, clock Clock, limit time.Duration) {
	g.mu.Lock()
	idle := g.idle
	g.mu.Unlock()
	if idle == nil {
		return
	}
	select {
	case <-idle:
	case <-ctx.Done():
	case <-clock.After(limit):
	}
}
