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
const envRunMain = "GIN_AGENT_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	switch os.Getenv(envRunMain) {
	case "main":
		main()
	case "panic":
		panic("a runtime failure")
	}
	os.Exit(m.Run())
}

// TestProcessExitStatus: the real process exits 64 on bad flags or
// environment, which gin-agent.service does not restart, 1 when discovery
// fails and 2 on a panic, both restarted.
func TestProcessExitStatus(t *testing.T) {
	unit, err := os.ReadFile(filepath.Join("..", "..", "deploy", "systemd", "gin-agent.service"))
	if err != nil {
		t.Fatal(err)
	}
	var prevented []int
	for line := range strings.SplitSeq(string(unit), "\n") {
		if v, ok := strings.CutPrefix(line, "RestartPreventExitStatus="); ok {
			for f := range strings.FieldsSeq(v) {
				n, err := strconv.Atoi(f)
				if err != nil {
					t.Fatalf("RestartPreventExitStatus %q: %v", v, err)
				}
				prevented = append(prevented, n)
			}
		}
	}
	tests := []struct {
		name      string
		mode      string
		args      []string
		env       string
		want      int
		restarted bool
		stderr    string
	}{
		{"unknown flag", "main", []string{"--no-such-flag"}, "", 64, false, "unknown flag: --no-such-flag"},
		{"bad environment", "main", []string{"--source", testInventory}, "GIN_HEARTBEAT_INTERVAL=often", 64, false, "GIN_HEARTBEAT_INTERVAL"},
		{"discovery fails", "main", []string{"--once", "--source", "file:" + filepath.Join(t.TempDir(), "none.json")}, "", 1, true, "none.json"},
		{"panic", "panic", nil, "", 2, true, "panic: a runtime failure"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], tc.args...)
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "GIN_") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(cmd.Env, envRunMain+"="+tc.mode)
			if tc.env != "" {
				cmd.Env = append(cmd.Env, tc.env)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil && !errors.As(err, new(*exec.ExitError)) {
				t.Fatal(err)
			}
			code := cmd.ProcessState.ExitCode()
			if code != tc.want || !strings.Contains(stderr.String(), tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, stderr.String(), tc.want, tc.stderr)
			}
			if restarted := !slices.Contains(prevented, code); restarted != tc.restarted {
				t.Fatalf("exit %d: restarted by gin-agent.service (RestartPreventExitStatus=%v) = %v, want %v", code, prevented, restarted, tc.restarted)
			}
		})
	}
}
