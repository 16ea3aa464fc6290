package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/testkit"
)

// liveReport is what the test reads of ginctl job report -o json.
type liveReport struct {
	Suspects []struct {
		Node, Component, Kind, NIC string
		Confirmed                  bool
		Slowdown                   float64
		Evidence                   []string
	} `json:"suspects"`
	Live struct {
		Running        bool `json:"running"`
		RanksReporting int  `json:"ranks_reporting"`
	} `json:"live"`
}

// TestLiveJobOnRealProcesses: a dev master and one real gin-agent process
// per simulated node (node001..node008, plan sockets in a temp dir); the
// C harness loads the real libnccl-profiler-gin.so as NCCL does in 16
// rank processes, and from iteration 300 node004's second rank (rank 7)
// sends 1.6x slower. `ginctl job report` names node004 and the NIC of
// that rank's GPU (from the agent's inventory) while the job runs, and
// `ginctl job watch --once` shows it.
func TestLiveJobOnRealProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gin-master, 8 gin-agent processes and the profiler harness")
	}
	if _, err := exec.LookPath("cc"); err != nil {
		ciSkipf(t, "live e2e: no C compiler for the profiler and its harness")
	}
	bin := binaries(t)
	lib := filepath.Join(bin, "libnccl-profiler-gin.so")
	if out, err := exec.Command("cc", "-O2", "-Wall", "-Wextra", "-fPIC", "-shared", "-fvisibility=hidden", "-pthread", "-o", lib,
		"../internal/ncclplugin/profiler/profiler.c").CombinedOutput(); err != nil {
		t.Fatalf("build profiler: %v\n%s", err, out)
	}
	harness := filepath.Join(bin, "profharness")
	if out, err := exec.Command("cc", "-O2", "-Wall", "-pthread", "-rdynamic", "-o", harness,
		"../internal/ncclplugin/profharness/profharness.c", "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("build harness: %v\n%s", err, out)
	}
	addr, _, _ := startDev(t, bin, "--dev-nodes", "devsim1", "--heartbeat-interval", "1s")
	dir, err := os.MkdirTemp("", "glv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	logs := map[string]*lockedBuffer{}
	for i := 1; i <= 8; i++ {
		n := fmt.Sprintf("node%03d", i)
		logb := &lockedBuffer{}
		cmd := exec.Command(filepath.Join(bin, "gin-agent"), "--source", "sim:dgx-h100", "--node-name", n, "--master", addr,
			"--metrics-bind", "", "--plan-socket", filepath.Join(dir, n+".sock"), "--plan-dir", filepath.Join(dir, n+"-plans"))
		cmd.Stderr = logb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		logs[n] = logb
	}
	for n, l := range logs {
		testkit.WaitFor(t, 60*time.Second, n+"'s inventory acknowledged",
			func() bool { return strings.Contains(l.String(), "inventory acknowledged") }, l.String)
	}
	job := exec.Command(harness, "--lib", lib, "--ranks", "16", "--nodes", "8", "--socket-dir", dir, "--job", "4242",
		"--net-us", "1000", "--duration-ms", "300000", "--fault", "slow:7:300:1.6")
	job.Env = append(os.Environ(), "NCCL_GIN_ENABLED=1", "NCCL_GIN_PROFILER_INTERVAL_MS=500")
	out, err := job.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	jobErr := &lockedBuffer{}
	job.Stderr = jobErr
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = job.Process.Signal(os.Interrupt); _ = job.Wait() })
	onset := make(chan time.Time, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "FAULT ") {
				onset <- time.Now()
			}
		}
	}()
	var began time.Time
	select {
	case began = <-onset:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the harness never injected its fault\n%s", jobErr)
	}
	var rep liveReport
	var last string
	named := func() bool {
		o, err := runTool(t, bin, "ginctl", "--master", addr, "job", "report", "--job", "4242", "-o", "json")
		last = o
		if err != nil {
			return false
		}
		rep = liveReport{}
		if err := json.Unmarshal([]byte(o), &rep); err != nil {
			t.Fatalf("job report -o json: %v\n%s", err, o)
		}
		for _, s := range rep.Suspects {
			if s.Confirmed && s.Kind == "slow-link" {
				return true
			}
		}
		return false
	}
	testkit.WaitFor(t, 90*time.Second, "a confirmed slow link in ginctl job report", named, func() string { return last })
	t.Logf("named %s after the fault began", time.Since(began).Round(100*time.Millisecond))
	s := rep.Suspects[0]
	if s.Node != "node004" || !regexp.MustCompile(`^mlx5_\d+$`).MatchString(s.Component) || !rep.Live.Running || rep.Live.RanksReporting != 16 {
		t.Fatalf("report %+v, want node004's NIC named while 16 ranks report", rep)
	}
	t.Logf("suspect %s %s %.2fx:\n  %s", s.Node, s.Component, s.Slowdown, strings.Join(s.Evidence, "\n  "))
	w, err := runTool(t, bin, "ginctl", "--master", addr, "job", "watch", "--job", "4242", "--once")
	if err != nil || !strings.Contains(w, "+ slow-link node004 "+s.Component) {
		t.Fatalf("job watch --once: %v\n%s", err, w)
	}
}
