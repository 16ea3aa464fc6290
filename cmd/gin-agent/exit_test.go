package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gin-topology/gin/internal/testkit"
)

func TestMain(m *testing.M) { testkit.MainOrTests(m, main) }

// TestProcessExitStatus: the real process exits 64 on bad flags or
// environment, which gin-agent.service does not restart, 1 when discovery
// fails and 2 on a panic, both restarted.
func TestProcessExitStatus(t *testing.T) {
	tests := []struct {
		name      string
		mode      string
		args      []string
		env       []string
		want      int
		restarted bool
		stderr    string
	}{
		{"unknown flag", testkit.ModeMain, []string{"--no-such-flag"}, nil, 64, false, "unknown flag: --no-such-flag"},
		{"bad environment", testkit.ModeMain, []string{"--source", testInventory}, []string{"GIN_HEARTBEAT_INTERVAL=often"}, 64, false, "GIN_HEARTBEAT_INTERVAL"},
		{"discovery fails", testkit.ModeMain, []string{"--once", "--source", "file:" + filepath.Join(t.TempDir(), "none.json")}, nil, 1, true, "none.json"},
		{"panic", testkit.ModePanic, nil, nil, 2, true, "panic: " + testkit.SelfPanic},
	}
	prevented := testkit.RestartPrevented(t, filepath.Join("..", "..", "deploy", "systemd", "gin-agent.service"))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := testkit.RunSelf(t, tc.mode, tc.env, tc.args...)
			if code != tc.want || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, stderr, tc.want, tc.stderr)
			}
			if restarted := !slices.Contains(prevented, code); restarted != tc.restarted {
				t.Fatalf("exit %d: restarted by gin-agent.service (RestartPreventExitStatus=%v) = %v, want %v", code, prevented, restarted, tc.restarted)
			}
		})
	}
}
