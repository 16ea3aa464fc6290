package agent

import (
	"math/rand/v2"
	"time"
)

// backoff is capped exponential backoff with full jitter: the n-th wait is
// uniform in [0, min(max, initial·2ⁿ)]. It is used from one goroutine.
type backoff struct {
	initial, max time.Duration
	rnd          *rand.Rand
	ceil         time.Duration // ceiling of the next wait; 0 means initial
}

func newBackoff(initial, maxWait time.Duration, rnd *rand.Rand) *backoff {
	return &backoff{initial: initial, max: maxWait, rnd: rnd}
}

// next returns the next wait and doubles the ceiling.
func (b *backoff) next() time.Duration {
	if b.ceil == 0 {
		b.ceil = b.initial
	}
	d := b.jitter(0, b.ceil)
	b.ceil = min(b.ceil*2, b.max)
	return d
}

// saturate returns a wait in [max/2, max] and leaves the ceiling at max, for
// failures that retrying soon cannot fix.
func (b *backoff) saturate() time.Duration {
	b.ceil = b.max
	return b.jitter(b.max/2, b.max)
}

// reset starts over from the initial ceiling.
func (b *backoff) reset() { b.ceil = 0 }

// jitter is uniform in [lo, hi].
func (b *backoff) jitter(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(b.rnd.Int64N(int64(hi-lo)+1))
}

// atLeast returns a wait of at least hint: hint plus up to hint of jitter
// when wait is shorter (so agents refused together do not come back
// together), else wait.
func (b *backoff) atLeast(wait, hint time.Duration) time.Duration {
	if hint <= 0 || wait >= hint {
		return wait
	}
	return b.jitter(hint, 2*hint)
}
