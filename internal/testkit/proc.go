// proc.go runs GIN's own binaries as real child processes for the
// end-to-end tests, the fault campaign and the benchmarks on real
// processes: BuildCommands compiles the commands once per test, Proc starts
// one of them (restartable with the same command line), appends its output
// to a log file and makes it die with the test binary.

package testkit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BuildCommands compiles the module's commands (names under ./cmd, e.g.
// "gin-master") into a temporary directory of tb and returns it.
func BuildCommands(tb testing.TB, names ...string) string {
	tb.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		tb.Fatalf("go env GOMOD: %v (run inside the module)", err)
	}
	dir := tb.TempDir()
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	for _, n := range names {
		args = append(args, "./cmd/"+n)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// Proc is one child process, restartable with the same command line. Its
// stdout and stderr are appended to Log, after a line naming the start; it
// gets SIGKILL when the test binary dies (Pdeathsig).
type Proc struct {
	Name string
	Argv []string // the program and its arguments
	Log  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
}

// Start starts the process (again, after it exited).
func (p *Proc) Start() error {
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close() // the child holds its own descriptor
	fmt.Fprintf(f, "==== %s start %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(p.Argv, " "))
	cmd := exec.Command(p.Argv[0], p.Argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return nil
}

func (p *Proc) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}

// Pid is the process id of the last start (0 before the first).
func (p *Proc) Pid() int {
	cmd, _ := p.current()
	if cmd == nil {
		return 0
	}
	return cmd.Process.Pid
}

// Signal sends sig to the running process.
func (p *Proc) Signal(sig syscall.Signal) error {
	cmd, _ := p.current()
	if cmd == nil {
		return errors.New("not started")
	}
	return cmd.Process.Signal(sig)
}

// Alive reports whether the process was started and has not exited.
func (p *Proc) Alive() bool {
	_, done := p.current()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Wait waits at most d for the process to exit by itself.
func (p *Proc) Wait(d time.Duration) error {
	_, done := p.current()
	if done == nil {
		return errors.New("not started")
	}
	select {
	case <-done:
		return nil
	case <-time.After(d):
		return fmt.Errorf("still running after %s", d)
	}
}

// Kill sends SIGKILL (a stopped process dies too) and waits at most d
// until it is reaped; it reports whether it was (true when not running).
func (p *Proc) Kill(d time.Duration) bool {
	if !p.Alive() {
		return true
	}
	_ = p.Signal(syscall.SIGKILL)
	return p.Wait(d) == nil
}
