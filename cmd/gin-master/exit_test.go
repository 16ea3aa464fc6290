package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gin-topology/gin/internal/testkit"
)

func TestMain(m *testing.M) { testkit.MainOrTests(m, main) }

// TestProcessExitStatus: the real process exits 64 on bad flags and 78
// without TLS (both not restarted by the unit), while a panic exits 2,
// which the unit restarts, as it does 75 (a full data dir).
func TestProcessExitStatus(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	tests := []struct {
		name      string
		mode      string
		args      []string
		want      int
		restarted bool
		stderr    string
	}{
		{"unknown flag", testkit.ModeMain, []string{"--no-such-flag"}, 64, false, "unknown flag: --no-such-flag"},
		{"bad value", testkit.ModeMain, []string{"--log-level", "loud", "--data-dir", dir}, 64, false, `--log-level "loud"`},
		{"--kube-* without --kube-labels", testkit.ModeMain, []string{"--kube-taint-fail", "--data-dir", dir}, 64, false, "--kube-taint-fail needs --kube-labels"},
		{"--kube-labels with a missing kubeconfig", testkit.ModeMain, []string{"--insecure", "--kube-labels", "--kubeconfig", filepath.Join(dir, "none"), "--data-dir", dir}, 78, false, "--kube-labels: kubeconfig"},
		{"no TLS, no --insecure", testkit.ModeMain, []string{"--node-id", "m1", "--data-dir", dir}, 78, false, "no TLS certificates"},
		{"panic", testkit.ModePanic, nil, 2, true, "panic: " + testkit.SelfPanic},
	}
	prevented := testkit.RestartPrevented(t, filepath.Join("..", "..", "deploy", "systemd", "gin-master.service"))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := testkit.RunSelf(t, tc.mode, nil, tc.args...)
			if code != tc.want || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, stderr, tc.want, tc.stderr)
			}
			if restarted := !slices.Contains(prevented, code); restarted != tc.restarted {
				t.Fatalf("exit %d: restarted by gin-master.service (RestartPreventExitStatus=%v) = %v, want %v", code, prevented, restarted, tc.restarted)
			}
		})
	}
	if !slices.Contains(prevented, exitDataDir) {
		t.Fatalf("gin-master.service restarts exit %d (a data dir with an incomplete state, which no restart cures), RestartPreventExitStatus=%v", exitDataDir, prevented)
	}
	if slices.Contains(prevented, exitLogStore) {
		t.Fatalf("gin-master.service does not restart exit %d (the log store failed), RestartPreventExitStatus=%v", exitLogStore, prevented)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("--data-dir %s was created by a refused command line", dir)
	}
}
