// self.go runs a command's test binary as the command itself:
// MainOrTests is the command's TestMain, RunSelf runs the binary as main()
// or as a panicking process and returns its real exit status;
// RestartPrevented reads the exit statuses a systemd unit does not restart on.

package testkit

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// envSelf tells a test binary started by RunSelf what to be.
const envSelf = "GIN_TESTKIT_SELF"

// SelfPanic is the panic message of a test binary run by RunSelf as
// ModePanic.
const SelfPanic = "testkit: a runtime failure"

// What RunSelf runs the test binary as.
const (
	ModeMain  = "main"  // the command's main(), as the real binary
	ModePanic = "panic" // a process that panics, as the Go runtime ends it
)

// MainOrTests is a command's TestMain: run by RunSelf it is the command
// (main) or a panicking process, else it runs the tests.
func MainOrTests(m *testing.M, main func()) {
	switch os.Getenv(envSelf) {
	case ModeMain:
		main()
		os.Exit(0)
	case ModePanic:
		panic(SelfPanic)
	}
	os.Exit(m.Run())
}

// RunSelf runs the test binary (whose TestMain is MainOrTests) as mode
// with args, with no GIN_* variable of this environment but those of env
// ("K=V"), and returns its exit status and stderr: the exit status of the
// real command, os.Exit and panics included.
func RunSelf(tb testing.TB, mode string, env []string, args ...string) (int, string) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIN_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, envSelf+"="+mode), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil && !errors.As(err, new(*exec.ExitError)) {
		tb.Fatalf("run %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// RestartPrevented is the RestartPreventExitStatus list of the systemd
// unit file at path.
func RestartPrevented(tb testing.TB, path string) []int {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		v, ok := strings.CutPrefix(line, "RestartPreventExitStatus=")
		if !ok {
			continue
		}
		var codes []int
		for f := range strings.FieldsSeq(v) {
			n, err := strconv.Atoi(f)
			if err != nil {
				tb.Fatalf("%s: RestartPreventExitStatus=%s: %v", path, v, err)
			}
			codes = append(codes, n)
		}
		return codes
	}
	tb.Fatalf("%s has no RestartPreventExitStatus", path)
	return nil
}
