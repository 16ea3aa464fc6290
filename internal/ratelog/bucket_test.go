package ratelog

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is advanced by the test only.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// TestBucket drives one bucket (2 lines/s, burst 3) through a script of
// steps: advance the clock, then ask n times; it checks how many lines
// were let through, what the first one let through reported as skipped,
// and the running total suppressed.
func TestBucket(t *testing.T) {
	type step struct {
		advance     time.Duration
		asks        int
		wantAllowed int
		wantSkipped uint64 // reported by the first allowed line of the step
		wantTotal   uint64
	}
	tests := []struct {
		name  string
		rate  float64
		burst int
		steps []step
	}{
		{"burst then suppressed", 2, 3, []step{
			{0, 5, 3, 0, 2},
		}},
		{"refill reports what was skipped", 2, 3, []step{
			{0, 10, 3, 0, 7},
			{500 * time.Millisecond, 1, 1, 7, 7}, // one token back
			{0, 1, 0, 0, 8},
			{time.Second, 3, 2, 1, 9}, // two tokens back
		}},
		{"refill capped at burst", 2, 3, []step{
			{0, 3, 3, 0, 0},
			{time.Hour, 5, 3, 0, 2},
		}},
		{"clock going back adds nothing", 2, 3, []step{
			{0, 3, 3, 0, 0},
			{-time.Minute, 1, 0, 0, 1},
		}},
		{"floor: zero rate and burst still let one through", 0, 0, []step{
			{0, 2, 1, 0, 1},
			{time.Minute, 1, 1, 1, 1},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
			b := New(tc.rate, tc.burst, clk.now)
			for i, st := range tc.steps {
				clk.advance(st.advance)
				allowed, firstSkipped, seen := 0, uint64(0), false
				for range st.asks {
					if ok, skipped := b.Allow(); ok {
						allowed++
						if !seen {
							firstSkipped, seen = skipped, true
						}
					}
				}
				if allowed != st.wantAllowed || firstSkipped != st.wantSkipped || b.Suppressed() != st.wantTotal {
					t.Errorf("step %d: allowed %d, skipped %d, total %d; want %d, %d, %d",
						i, allowed, firstSkipped, b.Suppressed(), st.wantAllowed, st.wantSkipped, st.wantTotal)
				}
			}
		})
	}
}

// TestBucketConcurrent: many goroutines asking at one instant get exactly
// burst lines between them; the rest are counted.
func TestBucketConcurrent(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	b := New(1, 10, clk.now)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 100 {
		wg.Go(func() {
			if ok, _ := b.Allow(); ok {
				mu.Lock()
				allowed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if allowed != 10 || b.Suppressed() != 90 {
		t.Fatalf("allowed %d, suppressed %d; want 10, 90", allowed, b.Suppressed())
	}
}

// TestBucketLog: Log writes through the bucket, adds the count of lines
// left out to the next one, and spends no token on a level the logger
// does not write.
func TestBucketLog(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	b := New(1, 2, clk.now)
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	for range 5 {
		b.Log(context.Background(), l, slog.LevelDebug, "below the level")
	}
	for range 5 {
		b.Log(context.Background(), l, slog.LevelWarn, "refused")
	}
	clk.advance(time.Second)
	b.Log(context.Background(), l, slog.LevelWarn, "refused")
	out := buf.String()
	if n := strings.Count(out, "msg=refused"); n != 3 {
		t.Fatalf("%d lines for a burst of 2 and one refill, want 3:\n%s", n, out)
	}
	if strings.Contains(out, "below the level") || b.Suppressed() != 3 {
		t.Fatalf("debug lines spent tokens or were written (suppressed %d):\n%s", b.Suppressed(), out)
	}
	if !strings.Contains(out, "suppressed=3") {
		t.Fatalf("the line after the refill does not say 3 were left out:\n%s", out)
	}
}
