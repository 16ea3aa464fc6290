package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/testkit"
)

// TestLiveUnderSrun: the live path under a real Slurm. A dev master (its
// one simulated node devsim1, so no simulated agent shares a name with a
// real one) and one real gin-agent per Slurm node (n1..n4), named like it,
// its node socket at $dir/sock/nX.sock. srun -N4 --ntasks-per-node=1 runs
// one profharness per node: ranks 4*SLURM_PROCID..+3 of one 16-rank job
// that meets in a --shm file, each rank loading the real
// libnccl-profiler-gin.so with NCCL_GIN_ENABLED=1 and reporting to its
// node's agent under the Slurm job id (SLURM_JOB_ID, --job -). From
// iteration 300 rank 5 (the second task's, normally on n2) sends 1.6x
// slower; `ginctl job report --job <Slurm job id>` must name a confirmed
// slow link on the node its FAULT line names, as a NIC (mlx5_N), within
// 90 s. scancel then ends every process of the step.
func TestLiveUnderSrun(t *testing.T) {
	requireSlurm(t)
	if _, err := exec.LookPath("cc"); err != nil {
		ciSkipf(t, "slurm e2e: no C compiler for the profiler and its harness")
	}
	bin := binaries(t)
	lib := filepath.Join(bin, "libnccl-profiler-gin.so")
	if out, err := exec.Command("cc", "-O2", "-Wall", "-Wextra", "-fPIC", "-shared", "-fvisibility=hidden", "-pthread", "-o", lib,
		"../internal/ncclplugin/profiler/profiler.c").CombinedOutput(); err != nil {
		t.Fatalf("build profiler: %v\n%s", err, out)
	}
	harness := filepath.Join(bin, "profharness")
	if out, err := exec.Command("cc", "-O2", "-Wall", "-Wextra", "-pthread", "-rdynamic", "-o", harness,
		"../internal/ncclplugin/profharness/profharness.c", "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("build harness: %v\n%s", err, out)
	}

	addr, _, _ := startDev(t, bin, "--dev-nodes", "devsim1", "--heartbeat-interval", "1s")
	sc := startSlurm(t, slurmConfig{Nodes: 4, CPUs: 4})
	dir := sc.Dir

	sockDir := filepath.Join(dir, "sock")
	if err := os.MkdirAll(sockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	logs := map[string]*lockedBuffer{}
	for _, n := range sc.Nodes {
		logb := &lockedBuffer{}
		cmd := exec.Command(filepath.Join(bin, "gin-agent"), "--source", "sim:dgx-h100", "--node-name", n, "--master", addr,
			"--metrics-bind", "", "--plan-socket", filepath.Join(sockDir, n+".sock"), "--plan-dir", filepath.Join(dir, "plans-"+n))
		cmd.Stderr = logb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		logs[n] = logb
	}
	for _, n := range sc.Nodes {
		l := logs[n]
		testkit.WaitFor(t, 60*time.Second, n+"'s inventory acknowledged",
			func() bool {
				return strings.Contains(l.String(), "inventory acknowledged") && strings.Contains(l.String(), "serving plans")
			}, l.String)
	}

	// The step: one task per node, each running 4 of the 16 ranks. The
	// mark in the tasks' environment finds every process of the step later.
	const slowRank = 5
	mark := "GIN_LIVE_SRUN_TEST=" + dir
	shm := filepath.Join(dir, "job.shm")
	task := `echo "TASK procid=$SLURM_PROCID node=$SLURMD_NODENAME job=$SLURM_JOB_ID"
exec "$0" --lib "$1" --ranks 16 --nodes 4 --local-ranks 4 --first-rank $((SLURM_PROCID*4)) --shm "$2" \
  --socket "$3/$SLURMD_NODENAME.sock" --node-name "$SLURMD_NODENAME" --job - --net-us 1000 --duration-ms 120000 \
  --fault slow:` + strconv.Itoa(slowRank) + `:300:1.6`
	outPath := filepath.Join(dir, "srun.out")
	outF, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer outF.Close()
	// Output to a file, not a pipe (as slurmCluster.Run does).
	srun := exec.Command("srun", "-N4", "-n4", "--ntasks-per-node=1", "-l", "--kill-on-bad-exit=1", "--job-name=gin-live-srun",
		"--export=ALL,NCCL_GIN_ENABLED=1,NCCL_GIN_PROFILER_INTERVAL_MS=500,"+mark,
		"bash", "-c", task, harness, lib, shm, sockDir)
	srun.Env, srun.Stdout, srun.Stderr = sc.Env, outF, outF
	if err := srun.Start(); err != nil {
		t.Fatal(err)
	}
	srunDone := make(chan error, 1)
	go func() { srunDone <- srun.Wait() }()
	srunOut := func() string { b, _ := os.ReadFile(outPath); return string(b) }
	var jobID string
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if jobID != "" {
			if out, err := sc.Run(time.Minute, nil, "scancel", jobID); err != nil {
				t.Errorf("scancel %s: %v\n%s", jobID, err, out)
			}
		} else {
			_ = srun.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-srunDone:
		case <-time.After(60 * time.Second):
			t.Errorf("srun still running 60 s after the stop; killing it\n%s", srunOut())
			_ = srun.Process.Kill()
			<-srunDone
		}
	}
	t.Cleanup(stop)

	// The job id and each task's node, then the FAULT line (the node that
	// really runs the slow rank).
	taskRE := regexp.MustCompile(`(?m)^\s*(\d+): TASK procid=(\d+) node=(\S+) job=(\d+)$`)
	faultRE := regexp.MustCompile(`(?m)^\s*\d+: FAULT kind=slow rank=` + strconv.Itoa(slowRank) + ` node=(\S+) gpu=(\d+) iter=\d+ at_ns=(\d+)$`)
	var fault []string
	testkit.WaitForEvery(t, 2*time.Minute, 100*time.Millisecond, "the 4 tasks to start and rank 5's FAULT line", func() bool {
		select {
		case err := <-srunDone:
			srunDone <- err
			t.Fatalf("srun ended (%v) before the fault:\n%s", err, srunOut())
		default:
		}
		out := srunOut()
		tasks := taskRE.FindAllStringSubmatch(out, -1)
		if len(tasks) > 0 {
			jobID = tasks[0][4]
		}
		fault = faultRE.FindStringSubmatch(out)
		return len(tasks) == 4 && fault != nil
	}, srunOut)
	where := map[string]string{}
	for _, m := range taskRE.FindAllStringSubmatch(srunOut(), -1) {
		where[m[2]] = m[3]
	}
	slowNode := fault[1]
	if want := where[strconv.Itoa(slowRank/4)]; slowNode != want {
		t.Fatalf("rank %d's FAULT line names %s; task %d runs on %s", slowRank, slowNode, slowRank/4, want)
	}
	ns, _ := strconv.ParseInt(fault[3], 10, 64)
	began := time.Unix(0, ns)
	t.Logf("Slurm job %s: tasks on %v; rank %d (GPU %s) slow on %s from %s", jobID, where, slowRank, fault[2], slowNode, began.Format(time.RFC3339Nano))

	var rep liveReport
	var last string
	var found int
	named := func() bool {
		select {
		case err := <-srunDone:
			srunDone <- err
			t.Fatalf("srun ended (%v) before the suspect was named:\n%s", err, srunOut())
		default:
		}
		o, err := runTool(t, bin, "ginctl", "--master", addr, "job", "report", "--job", jobID, "-o", "json")
		last = o
		if err != nil {
			return false
		}
		rep = liveReport{}
		if err := json.Unmarshal([]byte(o), &rep); err != nil {
			t.Fatalf("job report -o json: %v\n%s", err, o)
		}
		for i, s := range rep.Suspects {
			if s.Confirmed && s.Kind == "slow-link" {
				found = i
				return true
			}
		}
		return false
	}
	testkit.WaitForEvery(t, 90*time.Second, time.Second, "a confirmed slow link in ginctl job report --job "+jobID, named,
		func() string { return last + "\n" + srunOut() })
	took := time.Since(began)
	s := rep.Suspects[found]
	t.Logf("ginctl job report --job %s named %s %s (%s, %.2fx) %s after the fault began:\n  %s", jobID, s.Node, s.Component, s.Kind, s.Slowdown,
		took.Round(100*time.Millisecond), strings.Join(s.Evidence, "\n  "))
	if s.Node != slowNode || !regexp.MustCompile(`^mlx5_\d+$`).MatchString(s.Component) {
		t.Fatalf("suspect %+v, want a NIC (mlx5_N) of %s\n%s", s, slowNode, last)
	}
	if !rep.Live.Running || rep.Live.RanksReporting != 16 {
		t.Errorf("live: running=%v with %d ranks reporting, want 16\n%s", rep.Live.Running, rep.Live.RanksReporting, last)
	}

	// scancel ends the step: srun returns, no process of it is left (the 4
	// tasks and their 16 ranks carry the mark), and Slurm forgets the job.
	if n := len(marked(mark)); n < 20 {
		t.Errorf("%d processes carry the step's mark while it runs, want 20 (4 tasks, 16 ranks)", n)
	}
	stop()
	var left []string
	var queued string
	if !testkit.WaitUntilEvery(30*time.Second, 500*time.Millisecond, func() bool {
		left = marked(mark)
		out, err := sc.Run(time.Minute, nil, "squeue", "-h", "-j", jobID, "-o", "%i %T")
		queued = strings.TrimSpace(out)
		return len(left) == 0 && (err != nil || queued == "")
	}) {
		t.Fatalf("30 s after scancel %s: processes of the step %v, squeue %q\n%s", jobID, left, queued, srunOut())
	}
}
