package e2e

import (
	"os"

	"github.com/gin-topology/gin/internal/testkit"
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

// lockedBuffer is what child processes write to while the test reads it.
type lockedBuffer = testkit.LogBuffer
