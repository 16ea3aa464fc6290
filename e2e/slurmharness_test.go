package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/testkit"
)

// slurmHarnessScript starts and stops the throw-away Slurm cluster; it is
// part of the repository, so a fresh clone runs the Slurm tests.
const slurmHarnessScript = "../scripts/slurm-harness.sh"

// slurmConfig sizes a slurmCluster.
type slurmConfig struct {
	Nodes, CPUs, GPUs int    // n1..nNodes, CPUs and gres/gpu declared per node
	Topology          []byte // a topology.conf; when set slurmctld runs topology/tree
	Env               []string
	// ConfExtra are lines appended to slurm.conf (Prolog=..., PrologFlags=...).
	ConfExtra string
}

// slurmCluster is a real Slurm cluster on this machine: a private munged,
// one slurmctld and one slurmd per node (n1..nN), every file under Dir.
// startSlurm tears it down when the test ends.
type slurmCluster struct {
	Dir   string   // config, state, logs and pid files; deleted by the teardown
	Nodes []string // n1..nN
	// Env is the environment of Run: this process's, the config's Env and
	// SLURM_CONF pointing at the cluster.
	Env    []string
	script string
	tmp    string
	down   func() error
}

// Down cancels the jobs, stops every process the harness started and
// deletes Dir; again, it does nothing. The test's cleanup calls it.
func (c *slurmCluster) Down() error { return c.down() }

// requireSlurm skips the test (fails it under CI=true) when this machine
// cannot run the harness, saying what it needs. It returns the script.
func requireSlurm(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("slurm e2e: skipped with -short (starts a real munged, slurmctld and slurmd's)")
	}
	if os.Geteuid() != 0 {
		ciSkipf(t, "slurm e2e: needs root (the harness runs munged, slurmctld and slurmd as root): sudo make test")
	}
	script, err := filepath.Abs(slurmHarnessScript)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("GIN_SLURM_INSTALL") == "1" {
		return script
	}
	if out, err := exec.Command("bash", script, "check").CombinedOutput(); err != nil {
		ciSkipf(t, "slurm e2e: %s(or GIN_SLURM_INSTALL=1 to let the test install them)", out)
	}
	return script
}

// startSlurm brings a cluster up with scripts/slurm-harness.sh (ports it
// picks free) and registers its teardown.
func startSlurm(t *testing.T, cfg slurmConfig) *slurmCluster {
	t.Helper()
	script := requireSlurm(t)
	if cfg.Nodes < 1 {
		cfg.Nodes = 1
	}
	if cfg.CPUs < 1 {
		cfg.CPUs = 2
	}
	// Under /tmp, not t.TempDir(): munged wants every directory above its
	// socket world-executable, and the teardown deletes it.
	dir, err := os.MkdirTemp("/tmp", "gin-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	c := &slurmCluster{Dir: dir, script: script, tmp: t.TempDir()}
	for i := 1; i <= cfg.Nodes; i++ {
		c.Nodes = append(c.Nodes, "n"+strconv.Itoa(i))
	}
	c.Env = append(append(os.Environ(), cfg.Env...), "SLURM_CONF="+filepath.Join(dir, "etc", "slurm.conf"))
	up := []string{
		"GIN_SLURM_DIR=" + dir,
		"GIN_SLURM_NODES=" + strconv.Itoa(cfg.Nodes),
		"GIN_SLURM_CPUS=" + strconv.Itoa(cfg.CPUs),
		"GIN_SLURM_GPUS=" + strconv.Itoa(cfg.GPUs),
		"GIN_SLURM_CONF_EXTRA=" + cfg.ConfExtra,
	}
	if cfg.Topology != nil {
		topo := filepath.Join(c.tmp, "topology.conf")
		if err := os.WriteFile(topo, cfg.Topology, 0o644); err != nil {
			t.Fatal(err)
		}
		up = append(up, "GIN_SLURM_TOPOLOGY="+topo)
	}
	c.down = func() error {
		t0 := time.Now()
		out, err := c.Run(2*time.Minute, up, "bash", script, "down")
		if err != nil {
			return fmt.Errorf("slurm-harness.sh down: %w\n%s", err, out)
		}
		t.Logf("slurm-harness.sh down: %.1fs", time.Since(t0).Seconds())
		return nil
	}
	t.Cleanup(func() {
		if err := c.Down(); err != nil {
			t.Error(err)
		}
	})
	t0 := time.Now()
	out, err := c.Run(8*time.Minute, up, "bash", script, "up")
	if err != nil {
		t.Fatalf("slurm-harness.sh up: %v\n%s\n%s", err, out, tailFile(c.LogFile("slurmctld.log")))
	}
	t.Logf("slurm-harness.sh up (%d nodes, install if needed, start, all idle): %.1fs\n%s", cfg.Nodes, time.Since(t0).Seconds(), out)
	return c
}

// Run runs a command (srun, sinfo, ...) against the cluster with extra
// environment and returns its output, stdout and stderr together.
func (c *slurmCluster) Run(timeout time.Duration, extra []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// Output goes to a file, not a pipe: daemons that a command starts
	// inherit it and would hold a pipe open after the command returns.
	f, err := os.CreateTemp(c.tmp, "run-")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = append(append([]string(nil), c.Env...), extra...), f, f
	err = cmd.Run()
	out, _ := os.ReadFile(f.Name())
	return string(out), err
}

// LogFile is the path of a daemon's log (slurmctld.log, slurmd-n1.log, munged.log).
func (c *slurmCluster) LogFile(name string) string { return filepath.Join(c.Dir, "log", name) }

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

// TestSlurmHarnessDown: the harness's teardown leaves nothing behind: a
// job still running is ended with its slurmstepd, no process carries the
// cluster's marker, the directory is gone, and a second Down is a no-op.
func TestSlurmHarnessDown(t *testing.T) {
	c := startSlurm(t, slurmConfig{Nodes: 2, GPUs: 1})
	out, err := c.Run(time.Minute, nil, "srun", "-N2", "--gres=gpu:1", "bash", "-c", `echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES"`)
	if err != nil {
		t.Fatalf("srun: %v\n%s", err, out)
	}
	if got := strings.Fields(out); len(got) != 4 {
		t.Fatalf("srun on two nodes with a GPU each printed %q, want two lines of name and device", out)
	}
	pidFile := filepath.Join(t.TempDir(), "job.pid")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	job := exec.CommandContext(ctx, "srun", "-N1", "bash", "-c", `echo $$ >`+pidFile+`.tmp && mv `+pidFile+`.tmp `+pidFile+` && exec sleep 600`)
	job.Env = c.Env
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = job.Wait() }()
	var pid int
	testkit.WaitFor(t, time.Minute, "the job to start", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 1
	})
	if err := c.Down(); err != nil {
		t.Fatal(err)
	}
	if procAlive(pid) {
		t.Errorf("the job's process %d still runs after Down", pid)
	}
	if left := marked("GIN_SLURM_HARNESS=" + c.Dir); len(left) > 0 {
		t.Errorf("processes of the cluster left after Down: %v", left)
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("%s after Down: %v, want it gone", c.Dir, err)
	}
	if err := c.Down(); err != nil {
		t.Errorf("a second Down: %v", err)
	}
}

// procAlive: the process exists and is not a zombie.
func procAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	return err == nil && !strings.Contains(string(b), "State:\tZ")
}

// marked lists the processes whose environment holds the entry env.
func marked(env string) []string {
	dirs, _ := filepath.Glob("/proc/[0-9]*/environ")
	var out []string
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, e := range strings.Split(string(b), "\x00") {
			if e == env {
				out = append(out, filepath.Base(filepath.Dir(f)))
			}
		}
	}
	return out
}
