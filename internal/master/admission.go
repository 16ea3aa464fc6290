package master

import (
	"context"
	"fmt"
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

// handshakeRetryAfter is the retry hint a refused Hello carries; the agent
// adds its own jitter.
const handshakeRetryAfter = 2 * time.Second

// admission bounds the agent handshakes a master serves at once. A
// handshake starts with a Hello and ends when the agent is in sync (its
// HelloAck says so, or its first inventory or delta has been answered),
// when the session ends, or after the hello timeout. Hellos past the limit
// wait in a bounded queue (at most until the hello timeout); past the
// queue they are refused at once with RESOURCE_EXHAUSTED and a retry hint.
// A whole-cluster restart so reattaches at the rate the master commits,
// while reads and the heartbeats of attached agents are still answered.
type admission struct {
	slots   chan struct{} // one token per handshake in flight
	queue   int64         // the most Hellos waiting
	waiting atomic.Int64
	refused atomic.Uint64
}

func newAdmission(limit, queue int) *admission {
	return &admission{slots: make(chan struct{}, limit), queue: int64(queue)}
}

// errHandshakeBusy is a Hello refused by the admission limit.
type errHandshakeBusy struct {
	msg        string
	retryAfter time.Duration
}

func (e *errHandshakeBusy) Error() string { return e.msg }

// acquire takes a handshake slot, waiting at most until ctx ends or
// maxWait passes, and returns its release (idempotent, safe from any
// goroutine). A full queue refuses at once.
func (a *admission) acquire(ctx context.Context, maxWait time.Duration) (func(), error) {
	select {
	case a.slots <- struct{}{}:
		return a.releaser(), nil
	default:
	}
	if a.waiting.Add(1) > a.queue {
		a.waiting.Add(-1)
		a.refused.Add(1)
		return nil, &errHandshakeBusy{retryAfter: handshakeRetryAfter, msg: fmt.Sprintf(
			"%d agent handshakes in progress and %d waiting, the most this master takes (gin-master --max-handshakes, --handshake-queue); retry after %s",
			cap(a.slots), a.queue, handshakeRetryAfter)}
	}
	defer a.waiting.Add(-1)
	t := time.NewTimer(maxWait)
	defer t.Stop()
	select {
	case a.slots <- struct{}{}:
		return a.releaser(), nil
	case <-t.C:
		a.refused.Add(1)
		return nil, &errHandshakeBusy{retryAfter: handshakeRetryAfter, msg: fmt.Sprintf(
			"waited %s for one of %d agent handshake slots (gin-master --max-handshakes); retry after %s", maxWait, cap(a.slots), handshakeRetryAfter)}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (a *admission) releaser() func() {
	var once sync.Once
	return func() { once.Do(func() { <-a.slots }) }
}

// inFlight is the number of handshakes holding a slot.
func (a *admission) inFlight() int { return len(a.slots) }
