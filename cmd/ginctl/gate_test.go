package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/devcluster"
)

// fakeScontrol writes an scontrol that appends its arguments (one call a
// line) to calls and answers "show node" with show.
func fakeScontrol(t *testing.T, show string) (path, calls string) {
	t.Helper()
	dir := t.TempDir()
	path, calls = filepath.Join(dir, "scontrol"), filepath.Join(dir, "calls")
	script := "#!/bin/sh\necho \"$*\" >> " + calls + "\nif [ \"$1\" = show ]; then echo '" + show + "'; fi\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, calls
}

func readCalls(t *testing.T, calls string) string {
	t.Helper()
	b, err := os.ReadFile(calls)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestGate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dev cluster")
	}
	f, err := devcluster.ParseFault("node002/GPU3/nvlink7=down")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cl, done, err := devcluster.Start(ctx, devcluster.Config{Bind: "127.0.0.1:0", DataDir: t.TempDir(), HeartbeatInterval: time.Hour, Faults: []devcluster.Fault{f}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-done })
	addr := cl.Master.Addr()
	const drainedByGIN = "NodeName=node001 Arch=x86_64 State=IDLE+DRAIN ThreadsPerCore=1 Reason=GIN: nvlink-down GPU0/nvlink1 [root@2026-12-01T20:00:00]"
	const drainedByOperator = "NodeName=node001 State=IDLE+DRAIN Reason=bad fan [alice@2026-12-01T19:00:00]"
	for _, tc := range []struct {
		name      string
		show      string
		args      []string
		master    string
		code      int
		calls     string // scontrol calls, one a line
		stderrHas string
	}{
		{"strict drains a failing node", "", []string{"gate", "--node", "node002"}, addr, exitErr,
			"update NodeName=node002 State=DRAIN Reason=GIN: nvlink-down GPU3/nvlink7", "node002 fails its health check; drained: GIN: nvlink-down GPU3/nvlink7"},
		{"advisory only says so", "", []string{"gate", "--node", "node002", "--mode", "advisory"}, addr, 0,
			"", "fail (advisory, not drained): GIN: nvlink-down GPU3/nvlink7"},
		{"a passing node is left alone", "", []string{"gate", "--node", "node001"}, addr, 0, "", ""},
		{"auto-resume resumes what GIN drained", drainedByGIN, []string{"gate", "--node", "node001", "--auto-resume"}, addr, 0,
			"show node node001 -o\nupdate NodeName=node001 State=RESUME", "resumed (was drained: GIN: nvlink-down GPU0/nvlink1)"},
		{"auto-resume leaves an operator's drain", drainedByOperator, []string{"gate", "--node", "node001", "--auto-resume"}, addr, 0,
			"show node node001 -o", ""},
		{"auto-resume never resumes a failing node", drainedByGIN, []string{"gate", "--node", "node002", "--auto-resume"}, addr, exitErr,
			"update NodeName=node002 State=DRAIN Reason=GIN: nvlink-down GPU3/nvlink7", ""},
		{"no master: the job starts", "", []string{"--timeout", "2s", "gate", "--node", "node002"}, "127.0.0.1:1", 0, "", "no verdict"},
		{"no master, fail closed", "", []string{"--timeout", "2s", "gate", "--node", "node002", "--fail-closed"}, "127.0.0.1:1", exitErr, "", "cannot reach a master"},
		// A Slurm node GIN does not know (no agent there) is not GIN's to block.
		{"unknown node", "", []string{"gate", "--node", "node099"}, addr, 0, "", "node099: no verdict (node(s) node099 not found"},
		{"no node", "", []string{"gate"}, addr, exitUsage, "", "--node is required"},
		{"bad mode", "", []string{"gate", "--node", "node001", "--mode", "maybe"}, addr, exitUsage, "", "--mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, calls := fakeScontrol(t, tc.show)
			r := ctl(context.Background(), tc.master, "", append(tc.args, "--scontrol", sc)...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", r.code, tc.code, r.stdout, r.stderr)
			}
			if got := readCalls(t, calls); got != tc.calls {
				t.Errorf("scontrol calls:\n%s\nwant:\n%s", got, tc.calls)
			}
			if !strings.Contains(r.stderr, tc.stderrHas) {
				t.Errorf("stderr %q lacks %q", r.stderr, tc.stderrHas)
			}
		})
	}
	if s, r := nodeStateReason(drainedByGIN); s != "IDLE+DRAIN" || r != "GIN: nvlink-down GPU0/nvlink1" {
		t.Errorf("nodeStateReason = %q, %q", s, r)
	}
}

// TestLiveGate: the epilog's gate on a job's live report drains only a
// node that is a confirmed suspect, with the suspect as the reason.
func TestLiveGate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		node      string
		answer    liveAnswer
		mode      string
		code      int
		calls     string
		stderrHas string
	}{
		{"confirmed suspect drained", "node003", liveAnswer{resp: liveResp(slowLink(1.52, true))}, "strict", 1,
			"update NodeName=node003 State=DRAIN Reason=GIN: slow-link mlx5_2 1.52x in job 9", "drained: GIN: slow-link mlx5_2 1.52x in job 9"},
		{"advisory only says it", "node003", liveAnswer{resp: liveResp(slowLink(1.52, true))}, "advisory", 0, "", "not drained"},
		{"not yet confirmed", "node003", liveAnswer{resp: liveResp(slowLink(1.52, false))}, "strict", 0, "", ""},
		{"another node's suspect", "node004", liveAnswer{resp: liveResp(slowLink(1.52, true))}, "strict", 0, "", ""},
		{"job not live", "node003", liveAnswer{err: notFound}, "strict", 0, "", ""},
		{"no master", "node003", liveAnswer{err: noMasters}, "strict", 0, "", "no live report of job 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := serveLive(t, &fakeLiveMaster{script: []liveAnswer{tc.answer}})
			sc, calls := fakeScontrol(t, "")
			r := ctl(context.Background(), addr, "", "gate", "--node", tc.node, "--live-job", "9", "--mode", tc.mode, "--scontrol", sc)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", r.code, tc.code, r.stdout, r.stderr)
			}
			if got := readCalls(t, calls); got != tc.calls {
				t.Errorf("scontrol calls:\n%s\nwant:\n%s", got, tc.calls)
			}
			if !strings.Contains(r.stderr, tc.stderrHas) {
				t.Errorf("stderr %q lacks %q", r.stderr, tc.stderrHas)
			}
		})
	}
}
