// wait.go is the one polling helper of the tests: wait, bounded, until a
// condition holds, instead of a hand-written deadline loop (or a sleep that
// hopes the condition holds by then) in every test file.

package testkit

import (
	"testing"
	"time"
)

// WaitInterval is how often WaitFor checks its condition.
const WaitInterval = 10 * time.Millisecond

// WaitFor checks cond every WaitInterval until it returns true; if it still
// does not after timeout, the test fails with "timed out after TIMEOUT waiting for
// WHAT" (plus what detail returns, when given). The timeout is a bound on a
// wait for an event, never a measure of the machine's speed: pick it
// generously.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool, detail ...func() string) {
	tb.Helper()
	WaitForEvery(tb, timeout, WaitInterval, what, cond, detail...)
}

// WaitForEvery is WaitFor checking every interval, for a condition that is
// costly to check (one that runs a process).
func WaitForEvery(tb testing.TB, timeout, interval time.Duration, what string, cond func() bool, detail ...func() string) {
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

// WaitUntil checks cond every WaitInterval until it returns true (then
// WaitUntil returns true) or timeout passes (false). Use it where the caller decides
// what a timeout means.
func WaitUntil(timeout time.Duration, cond func() bool) bool {
	return until(timeout, WaitInterval, cond)
}

// WaitUntilEvery is WaitUntil checking every interval, for a costly condition
// (one that makes RPCs to a cluster) whose caller reports the timeout
// itself.
func WaitUntilEvery(timeout, interval time.Duration, cond func() bool) bool {
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
