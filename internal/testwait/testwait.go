package testwait

import (
	"testing"
	"time"
)

// Interval is how often For checks its condition.
const Interval = 10 * time.Millisecond

// For checks cond every Interval until it returns true; if it still does not
// after timeout, the test fails with "timed out after TIMEOUT waiting for
// WHAT" (plus what detail returns, when given). The timeout is a bound on a
// wait for an event, never a measure of the machine's speed: pick it
// generously.
func For(tb testing.TB, timeout time.Duration, what string, cond func() bool, detail ...func() string) {
	tb.Helper()
	ForEvery(tb, timeout, Interval, what, cond, detail...)
}

// ForEvery is For checking every interval, for a condition that is costly
// to check (one that runs a process).
func ForEvery(tb testing.TB, timeout, interval time.Duration, what string, cond func() bool, detail ...func() string) {
	tb.Helper()
	if until(timeout, interval, cond) {
		return
	}
	msg := "timed out after " + timeout.String() + " waiting for " + what
	for _, d := range detail {
		msg += "\n" + d()
	}
	tb.Fatal(msg)
}

// Until checks cond every Interval until it returns true (then Until
// returns true) or timeout passes (false). Use it where the caller decides
// what a timeout means.
func Until(timeout time.Duration, cond func() bool) bool {
	return until(timeout, Interval, cond)
}

// UntilEvery is Until checking every interval, for a costly condition
// (one that makes RPCs to a cluster) whose caller reports the timeout
// itself.
func UntilEvery(timeout, interval time.Duration, cond func() bool) bool {
	return until(timeout, interval, cond)
}

func until(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(interval)
	defer t.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-t.C
	}
	return true
}
