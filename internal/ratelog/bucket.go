package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Bucket is a token bucket for log lines. Safe for concurrent use.
type Bucket struct {
	rate  float64 // tokens per second
	burst float64
	now   func() time.Time

	mu         sync.Mutex
	tokens     float64
	last       time.Time
	pending    uint64 // suppressed since the last line let through
	suppressed uint64 // suppressed since start
}

// New returns a full bucket refilled at rate lines per second up to burst
// lines. now is the clock (time.Now; a fake one in tests). A rate or burst
// below the smallest useful values is raised to them (1 line per minute,
// burst 1), so a Bucket always lets some lines through.
func New(rate float64, burst int, now func() time.Time) *Bucket {
	if rate < 1.0/60 {
		rate = 1.0 / 60
	}
	if burst < 1 {
		burst = 1
	}
	if now == nil {
		now = time.Now
	}
	return &Bucket{rate: rate, burst: float64(burst), now: now, tokens: float64(burst), last: now()}
}

// Allow takes a token. ok is whether to log the line; when ok, skipped is
// the number of lines suppressed since the previous line let through (to
// add to the line, e.g. as "suppressed", skipped), and is reset.
func (b *Bucket) Allow() (ok bool, skipped uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(b.burst, b.tokens+el.Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		b.pending++
		b.suppressed++
		return false, 0
	}
	b.tokens--
	skipped, b.pending = b.pending, 0
	return true, skipped
}

// Suppressed is the number of lines suppressed since the Bucket was made.
func (b *Bucket) Suppressed() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.suppressed
}

// Log writes one line at level through the bucket: nothing when l does
// not log level (no token is spent), nothing when the bucket is empty,
// and otherwise the line with "suppressed", N added when N lines were
// left out since the previous one.
func (b *Bucket) Log(ctx context.Context, l *slog.Logger, level slog.Level, msg string, attrs ...any) {
	if !l.Enabled(ctx, level) {
		return
	}
	ok, skipped := b.Allow()
	if !ok {
		return
	}
	if skipped > 0 {
		attrs = append(attrs, "suppressed", skipped)
	}
	l.Log(ctx, level, msg, attrs...)
}
