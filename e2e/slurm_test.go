package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/export"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/testwait"
)

// slurmCIScript is the throw-away Slurm recipe; in CI the shared directory
// sits beside the repository (/work/shared next to /work/main).
const slurmCIScript = "../../shared/scripts/slurm-ci.sh"

// TestSlurmTopologyTree feeds a topology.conf written by export.SlurmTree to
// a real slurmctld (TopologyPlugin=topology/tree) and checks that Slurm
// accepts it: `scontrol show topology` lists our switches and nodes, jobs
// see SLURM_TOPOLOGY_ADDR through our switches, and slurmctld logs no
// topology error. The nodes are slurm-ci.sh's n1..n4 (four slurmd on this
// machine), as four simulated DGX H100 in two scalable units.
func TestSlurmTopologyTree(t *testing.T) {
	if testing.Short() {
		t.Skip("slurm e2e: skipped with -short (starts a real munged, slurmctld and four slurmd)")
	}
	if os.Geteuid() != 0 {
		ciSkipf(t, "slurm e2e: needs root (slurm-ci.sh runs the Slurm daemons as root and may apt-get install slurm)")
	}
	script, err := filepath.Abs(slurmCIScript)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		ciSkipf(t, "slurm e2e: %s not found (CI has the shared directory beside the repository): %v", script, err)
	}
	start := time.Now()

	// The topology: n1..n4 as 4 DGX H100 in 2 leaf groups under 2 spines.
	names := []string{"n1", "n2", "n3", "n4"}
	conf := simTree(t, names)
	t.Logf("topology.conf:\n%s", conf)

	dir := "/tmp/gin-slurm-" + randHex(t, 6)
	ctldPort := freePort(t)
	nodePort := freePortRange(t, len(names), ctldPort)
	env := append(os.Environ(),
		"SLURM_CI_DIR="+dir,
		"SLURM_CI_NODES="+strconv.Itoa(len(names)),
		"SLURM_CI_GPUS=0",
		"SLURM_CI_CPUS=2",
		"SLURM_CI_CTLD_PORT="+strconv.Itoa(ctldPort),
		"SLURM_CI_NODE_PORT="+strconv.Itoa(nodePort),
		"SLURM_CONF="+dir+"/etc/slurm.conf",
	)
	outFile := filepath.Join(t.TempDir(), "slurm-ci.out")
	run := func(timeout time.Duration, name string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		// Output goes to a file, not a pipe: the daemons inherit it and would
		// keep a pipe open after the command returns.
		f, err := os.Create(outFile)
		if err != nil {
			return "", err
		}
		defer f.Close()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, f, f
		err = cmd.Run()
		out, _ := os.ReadFile(outFile)
		return string(out), err
	}
	t.Cleanup(func() {
		t0 := time.Now()
		out, err := run(2*time.Minute, "bash", script, "down")
		if err != nil {
			t.Errorf("slurm-ci.sh down: %v\n%s", err, out)
		}
		t.Logf("slurm-ci.sh down: %.1fs", time.Since(t0).Seconds())
	})

	t0 := time.Now()
	out, err := run(8*time.Minute, "bash", script, "up")
	if err != nil {
		t.Fatalf("slurm-ci.sh up: %v\n%s", err, out)
	}
	t.Logf("slurm-ci.sh up (install if needed, start, all idle): %.1fs\n%s", time.Since(t0).Seconds(), out)

	// slurm-ci.sh writes slurm.conf when it starts; switch the topology
	// plugin on and restart the daemons (a plugin change needs a restart).
	t0 = time.Now()
	stopPidFiles(t, dir)
	f, err := os.OpenFile(filepath.Join(dir, "etc", "slurm.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("TopologyPlugin=topology/tree\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(dir, "etc", "topology.conf"), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(time.Minute, "slurmctld"); err != nil {
		t.Fatalf("slurmctld: %v\n%s\n%s", err, out, tailFile(filepath.Join(dir, "log", "slurmctld.log")))
	}
	for _, n := range names {
		if out, err := run(time.Minute, "slurmd", "-N", n); err != nil {
			t.Fatalf("slurmd -N %s: %v\n%s", n, err, out)
		}
	}
	waitIdle(t, run, len(names), dir)
	t.Logf("restart with topology/tree until all nodes idle: %.1fs", time.Since(t0).Seconds())

	// scontrol show topology lists every switch with our nodes or children.
	topo, err := run(time.Minute, "scontrol", "show", "topology")
	if err != nil {
		t.Fatalf("scontrol show topology: %v\n%s", err, topo)
	}
	t.Logf("scontrol show topology:\n%s", topo)
	shown := map[string]string{}
	for _, line := range strings.Split(topo, "\n") {
		if m := regexp.MustCompile(`^SwitchName=(\S+) `).FindStringSubmatch(line); m != nil {
			shown[m[1]] = " " + line + " "
		}
	}
	for _, line := range strings.Split(string(conf), "\n") {
		if !strings.HasPrefix(line, "SwitchName=") {
			continue
		}
		f := strings.Fields(line)
		name := strings.TrimPrefix(f[0], "SwitchName=")
		got, ok := shown[name]
		if !ok {
			t.Errorf("slurmctld does not show switch %s", name)
			continue
		}
		if !strings.Contains(got, " "+f[1]+" ") {
			t.Errorf("switch %s: slurmctld shows %q, want %s", name, strings.TrimSpace(got), f[1])
		}
	}

	// Jobs see the topology: SLURM_TOPOLOGY_ADDR is spine.leaf.node.
	addrs, err := run(2*time.Minute, "srun", "-N4", "--ntasks-per-node=1", "-t", "1", "bash", "-c", `echo "$SLURMD_NODENAME $SLURM_TOPOLOGY_ADDR"`)
	if err != nil {
		t.Fatalf("srun: %v\n%s", err, addrs)
	}
	lines := strings.Split(strings.TrimSpace(addrs), "\n")
	sort.Strings(lines)
	want := []string{"n1 spine01.leaf01.n1", "n2 spine01.leaf01.n2", "n3 spine01.leaf02.n3", "n4 spine01.leaf02.n4"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("SLURM_TOPOLOGY_ADDR per node:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	// No topology complaint in slurmctld's log.
	logText, err := os.ReadFile(filepath.Join(dir, "log", "slurmctld.log"))
	if err != nil {
		t.Fatal(err)
	}
	bad := regexp.MustCompile(`(?i)(error|fatal|warning).*(topolog|switch)|(topolog|switch).*(error|fatal|warning)`)
	for _, line := range strings.Split(string(logText), "\n") {
		if bad.MatchString(line) {
			t.Errorf("slurmctld.log: %s", line)
		}
	}
	t.Logf("total (generate, up, restart, checks): %.1fs", time.Since(start).Seconds())
}

// simTree generates the topology.conf of simulated DGX H100 nodes with
// the given names: two scalable units under two spines.
func simTree(t *testing.T, names []string) []byte {
	t.Helper()
	fnodes := make([]sim.FabricNode, len(names))
	for i, n := range names {
		fnodes[i] = sim.FabricNode{Name: n, Profile: "dgx-h100", Index: i}
	}
	c, err := sim.NewCluster("slurm-e2e", &sim.FabricSpec{LeafGroups: 2, Spines: 2, Oversubscription: 1}, fnodes)
	if err != nil {
		t.Fatal(err)
	}
	invs, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build(invs, c.Fabric)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := export.SlurmTree(g)
	if err != nil {
		t.Fatal(err)
	}
	return conf
}

// stopPidFiles stops the slurmd's and slurmctld started by slurm-ci.sh, by
// their pid files (munged keeps running), and waits until they are gone.
func stopPidFiles(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "run", "slurmd-*.pid"))
	files = append(files, filepath.Join(dir, "run", "slurmctld.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("pid file: %v", err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 1 {
			t.Fatalf("pid file %s: %q", f, b)
		}
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			t.Fatalf("kill %d (%s): %v", pid, f, err)
		}
		testwait.For(t, 15*time.Second, fmt.Sprintf("pid %d (%s) to exit after SIGTERM", pid, f), func() bool { return !alive(pid) })
		_ = os.Remove(f)
	}
}

// alive: the process exists and is not a zombie (the daemons' parent is
// PID 1, which may reap them late).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	return !regexp.MustCompile(`(?m)^State:\s*Z`).Match(b)
}

func waitIdle(t *testing.T, run func(time.Duration, string, ...string) (string, error), want int, dir string) {
	t.Helper()
	var out string
	if testwait.UntilEvery(60*time.Second, 200*time.Millisecond, func() bool {
		out, _ = run(10*time.Second, "sinfo", "-h", "-N", "-o", "%N %T")
		idle := map[string]bool{}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[1] == "idle" {
				idle[f[0]] = true
			}
		}
		return len(idle) >= want
	}) {
		return
	}
	t.Fatalf("nodes not idle after 60 s:\n%s\n%s", out, tailFile(filepath.Join(dir, "log", "slurmctld.log")))
}

func tailFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return path + ":\n" + strings.Join(lines, "\n")
}

func randHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// freePort returns a TCP port free on 127.0.0.1 and on all addresses.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// freePortRange finds n consecutive free ports not including avoid.
func freePortRange(t *testing.T, n, avoid int) int {
	t.Helper()
	for try := 0; try < 100; try++ {
		r, err := rand.Int(rand.Reader, big.NewInt(20000))
		if err != nil {
			t.Fatal(err)
		}
		base := 20000 + int(r.Int64())
		ok := true
		var ls []net.Listener
		for p := base; p < base+n && ok; p++ {
			l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
			if err != nil || p == avoid {
				ok = false
			}
			if l != nil {
				ls = append(ls, l)
			}
		}
		for _, l := range ls {
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port range")
	return 0
}
