package testkit

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestProcLifecycle(t *testing.T) {
	log := filepath.Join(t.TempDir(), "p.log")
	p := &Proc{Name: "sleeper", Argv: []string{"sleep", "60"}, Log: log}
	if p.Alive() || p.Pid() != 0 {
		t.Fatal("a process that was never started is alive")
	}
	for round := range 2 { // restartable
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		if !p.Alive() || p.Pid() == 0 {
			t.Fatalf("round %d: not alive after Start", round)
		}
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if !p.Kill(10 * time.Second) {
			t.Fatalf("round %d: a stopped process survived Kill", round)
		}
		if p.Alive() {
			t.Fatalf("round %d: alive after Kill", round)
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "start sleep 60"); n != 2 {
		t.Fatalf("log names %d starts, want 2:\n%s", n, b)
	}

	q := &Proc{Name: "true", Argv: []string{"true"}, Log: log}
	if err := q.Start(); err != nil {
		t.Fatal(err)
	}
	if err := q.Wait(10 * time.Second); err != nil {
		t.Fatalf("a process that exits by itself: %v", err)
	}
}
