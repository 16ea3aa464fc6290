// log.go holds what tests use to capture logs and process output written
// from other goroutines: a LogBuffer safe for concurrent writes and reads.

package testkit

import (
	"bytes"
	"sync"
)

// LogBuffer is a bytes.Buffer that servers, loggers or child processes write
// to while a test reads it. The zero value is ready to use.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
