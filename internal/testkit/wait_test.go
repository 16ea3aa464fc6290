package testkit

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	tests := []struct {
		name    string
		trueAt  int64 // the call from which cond holds; 0: never
		timeout time.Duration
		want    bool
	}{
		{"holds at once", 1, time.Millisecond, true},
		{"holds on the third check", 3, time.Minute, true},
		{"never holds", 0, 50 * time.Millisecond, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			cond := func() bool {
				n := calls.Add(1)
				return tc.trueAt > 0 && n >= tc.trueAt
			}
			got := WaitUntil(tc.timeout, cond)
			if got != tc.want {
				t.Fatalf("WaitUntil = %v after %d checks, want %v", got, calls.Load(), tc.want)
			}
			if tc.want && calls.Load() != tc.trueAt {
				t.Fatalf("cond checked %d times, want %d (no check after it held)", calls.Load(), tc.trueAt)
			}
			calls.Store(0)
			got = WaitUntilEvery(tc.timeout, time.Millisecond, cond)
			if got != tc.want {
				t.Fatalf("WaitUntilEvery = %v after %d checks, want %v", got, calls.Load(), tc.want)
			}
			if tc.want && calls.Load() != tc.trueAt {
				t.Fatalf("cond checked %d times, want %d (no check after it held)", calls.Load(), tc.trueAt)
			}
			if !tc.want && calls.Load() < 2 {
				t.Fatalf("cond checked %d times before giving up, want several", calls.Load())
			}
		})
	}
}

// fakeTB records a Fatal instead of ending the test.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Fatal(args ...any) { f.failed = args[0].(string) }

func TestForReportsWhatItWaitedFor(t *testing.T) {
	f := &fakeTB{TB: t}
	WaitFor(f, 20*time.Millisecond, "the moon", func() bool { return false }, func() string { return "last seen: never" })
	want := "timed out after 20ms waiting for the moon\nlast seen: never"
	if f.failed != want {
		t.Fatalf("Fatal(%q), want %q", f.failed, want)
	}
	f = &fakeTB{TB: t}
	WaitFor(f, time.Second, "the sun", func() bool { return true })
	if f.failed != "" {
		t.Fatalf("Fatal(%q) though the condition held", f.failed)
	}
}
