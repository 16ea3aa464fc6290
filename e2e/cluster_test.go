package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

type memberOut struct {
	ID            string `json:"id"`
	ClientAddress string `json:"client_address"`
	Leader        bool   `json:"leader"`
}

// TestThreeMasterProcesses starts three gin-master processes with the same
// --bootstrap-expect 3 --join line, attaches a gin-agent process, kills the
// leader with SIGKILL, and checks that a new leader is elected, the agent's
// node stays registered and up (it reattached), and ginctl works through
// any master in the list.
func TestThreeMasterProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := binaries(t)
	var ports []int
	for len(ports) < 6 {
		p := freePort(t)
		dup := false
		for _, q := range ports {
			dup = dup || p == q
		}
		if !dup {
			ports = append(ports, p)
		}
	}
	var clients []string
	for i := range 3 {
		clients = append(clients, "127.0.0.1:"+strconv.Itoa(ports[i]))
	}
	join := strings.Join(clients, ",")
	procs := make([]*exec.Cmd, 3)
	logs := make([]*lockedBuffer, 3)
	for i := range 3 {
		logs[i] = &lockedBuffer{}
		cmd := exec.Command(filepath.Join(bin, "gin-master"), "--node-id", fmt.Sprintf("m%d", i+1),
			"--bind", clients[i], "--raft-bind", "127.0.0.1:"+strconv.Itoa(ports[3+i]), "--http-bind", "",
			"--data-dir", t.TempDir(), "--bootstrap-expect", "3", "--join", join, "--heartbeat-interval", "1s", "--log-level", "warn", "--insecure")
		cmd.Stderr = logs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i] = cmd
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	members := func(master string) []memberOut {
		out, err := runTool(t, bin, "ginctl", "--master", master, "--timeout", "2s", "members", "-o", "json")
		if err != nil {
			return nil
		}
		var ms []memberOut
		_ = json.Unmarshal([]byte(out), &ms)
		return ms
	}
	leaderIdx := func(via string) int {
		for _, m := range members(via) {
			if m.Leader {
				for i, c := range clients {
					if c == m.ClientAddress {
						return i
					}
				}
			}
		}
		return -1
	}
	waitFor(t, "3 members with a leader", 90*time.Second, func() bool {
		ms := members(clients[0])
		return len(ms) == 3 && leaderIdx(clients[0]) >= 0
	})
	// Plaintext by choice: every master says so loudly at its start.
	for i, l := range logs {
		if !strings.Contains(l.String(), `level=WARN msg="INSECURE: --insecure: gRPC and Raft are plaintext and unauthenticated`) {
			t.Errorf("m%d started with --insecure without the warning:\n%s", i+1, l.String())
		}
	}
	agent := exec.Command(filepath.Join(bin, "gin-agent"), "--source", "sim:dgx-h100", "--master", join,
		"--node-name", "node001", "--heartbeat-interval", "1s", "--metrics-bind", "")
	var agentLog lockedBuffer
	agent.Stderr = &agentLog
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Process.Kill(); _ = agent.Wait() })
	waitFor(t, "node001 to register", 60*time.Second, func() bool {
		ns := nodes(t, bin, join)
		return len(ns) == 1 && ns[0].State == "up"
	})

	old := leaderIdx(clients[0])
	// ginctl watch, reading from the leader first, moves to another master
	// when the leader dies and resumes after the last change it printed.
	others := []string{clients[(old+1)%3], clients[(old+2)%3]}
	watch := exec.Command(filepath.Join(bin, "ginctl"), "--master", clients[old]+","+strings.Join(others, ","), "watch", "-o", "json")
	var watchOut, watchErr lockedBuffer
	watch.Stdout, watch.Stderr = &watchOut, &watchErr
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = watch.Process.Kill(); _ = watch.Wait() })
	waitFor(t, "the watch header", 30*time.Second, func() bool { return strings.Contains(watchErr.String(), "watching changes after index") })
	if out, err := runTool(t, bin, "ginctl", "--master", join, "plan", "--job", "76", "--nodes", "node001"); err != nil {
		t.Fatalf("plan 76: %v\n%s", err, out)
	}
	waitFor(t, "the watch to print plan 76", 30*time.Second, func() bool { return strings.Contains(watchOut.String(), `"job_id":"76"`) })
	start := time.Now()
	if err := procs[old].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = procs[old].Wait()
	other := clients[(old+1)%3]
	waitFor(t, "a new leader", 60*time.Second, func() bool { i := leaderIdx(other); return i >= 0 && i != old })
	t.Logf("new leader after %s", time.Since(start))
	// The agent's node is still there and up on the survivors (it reattached
	// to the new leader; heartbeats keep it up past the missed-beat limit).
	waitFor(t, "node001 up on the new leader", 60*time.Second, func() bool {
		out, err := runTool(t, bin, "ginctl", "--master", join, "--timeout", "3s", "--consistent", "nodes", "-o", "json")
		return err == nil && strings.Contains(out, `"state": "up"`)
	})
	waitFor(t, "plan 77 pinned through the new leader", 60*time.Second, func() bool {
		_, err := runTool(t, bin, "ginctl", "--master", join, "--timeout", "3s", "plan", "--job", "77", "--nodes", "node001")
		return err == nil
	})
	waitFor(t, "the watch to resume on another master and print plan 77", 30*time.Second, func() bool {
		return strings.Contains(watchErr.String(), "resuming after index") && strings.Contains(watchOut.String(), `"job_id":"77"`)
	})
	if n := strings.Count(watchOut.String(), `"job_id":"76"`); n != 1 {
		t.Errorf("plan 76 printed %d times across the move, want once:\n%s", n, watchOut.String())
	}
	if strings.Count(agentLog.String(), "inventory sent") != 1 {
		t.Errorf("the agent re-sent its inventory after failover (want exactly one send):\n%s", agentLog.String())
	}
}
