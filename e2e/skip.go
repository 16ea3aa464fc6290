package e2e

import (
	"bytes"
	"os"
	"sync"
)

// ciSkipf skips a test that cannot run here, except in CI (CI=true), where
// a missing prerequisite is a failure: CI must not pass by skipping.
func ciSkipf(t interface {
	Helper()
	Skipf(string, ...any)
	Fatalf(string, ...any)
}, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI: "+format, args...)
	}
	t.Skipf(format, args...)
}

// lockedBuffer is a bytes.Buffer that a child process writes to while the
// test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
