package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// envRunMain makes the test binary run main() instead of the tests, so the
// exit status is that of the real process (os.Exit, or a runtime panic).
const envRunMain = "GIN_MASTER_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	switch os.Getenv(envRunMain) {
	case "main":
		main()
	case "panic":
		panic("a runtime failure, as hashicorp/raft's when it cannot persist its term")
	}
	os.Exit(m.Run())
}

// runProcess runs this test binary as gin-master (or as a panicking
// process) with args and no GIN_TLS_* in its environment; it returns the
// exit status and stderr.
func runProcess(t *testing.T, mode string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIN_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, envRunMain+"="+mode)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// restartPrevented reads RestartPreventExitStatus of a unit in deploy/systemd.
func restartPrevented(t *testing.T, unit string) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "systemd", unit))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RestartPreventExitStatus="); ok {
			var codes []int
			for f := range strings.FieldsSeq(v) {
				n, err := strconv.Atoi(f)
				if err != nil {
					t.Fatalf("%s: RestartPreventExitStatus %q: %v", unit, v, err)
				}
				codes = append(codes, n)
			}
			return codes
		}
	}
	t.Fatalf("%s has no RestartPreventExitStatus", unit)
	return nil
}

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
		{"unknown flag", "main", []string{"--no-such-flag"}, 64, false, "unknown flag: --no-such-flag"},
		{"bad value", "main", []string{"--log-level", "loud", "--data-dir", dir}, 64, false, `--log-level "loud"`},
		{"no TLS, no --insecure", "main", []string{"--node-id", "m1", "--data-dir", dir}, 78, false, "no TLS certificates"},
		{"panic", "panic", nil, 2, true, "panic: a runtime failure"},
	}
	prevented := restartPrevented(t, "gin-master.service")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := runProcess(t, tc.mode, tc.args...)
			if code != tc.want || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, stderr, tc.want, tc.stderr)
			}
			if restarted := !slices.Contains(prevented, code); restarted != tc.restarted {
				t.Fatalf("exit %d: restarted by gin-master.service (RestartPreventExitStatus=%v) = %v, want %v", code, prevented, restarted, tc.restarted)
			}
		})
	}
	if slices.Contains(prevented, exitLogStore) {
		t.Fatalf("gin-master.service does not restart exit %d (the log store failed), RestartPreventExitStatus=%v", exitLogStore, prevented)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("--data-dir %s was created by a refused command line", dir)
	}
}
