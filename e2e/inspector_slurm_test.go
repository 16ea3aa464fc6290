package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestInspectorUnderSlurm: production measurements from a job under real
// Slurm, with no user action. The prolog step prepares the job's NCCL
// Inspector directory (GIN_INSPECTOR_DIR), the task prolog points the
// ranks' NCCL_INSPECTOR_DUMP_DIR at it, the ranks "write" Inspector dumps
// as the Inspector does (<host>-pid<pid>.log, one object per collective),
// the epilog step on the job's first node imports them (ginctl calibrate
// import --nccl-inspector DIR --job ID) and removes the directory; then
// ginctl job report names the NIC the dev cluster degraded (--dev-fault
// n1/mlx5_0=200) on the job's slower rows.
func TestInspectorUnderSlurm(t *testing.T) {
	requireSlurm(t)
	bin := binaries(t)
	addr, _, _ := startDev(t, bin, "--dev-nodes", "n[1-2]", "--dev-fault", "n1/mlx5_0=200")
	sc := startSlurm(t, slurmConfig{Nodes: 2, GPUs: 1, CPUs: 4})
	dir, run := sc.Dir, sc.Run
	inspect := filepath.Join(dir, "inspector")
	if err := os.MkdirAll(inspect, 0o755); err != nil {
		t.Fatal(err)
	}
	defaults := filepath.Join(dir, "gin-slurm-inspector")
	if err := os.WriteFile(defaults, []byte("GIN_MASTER_HOST="+addr+"\nGIN_INSPECTOR_DIR="+inspect+"\nGIN_PLAN_SOCKET="+filepath.Join(dir, "none.sock")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := func(name string) string {
		p, _ := filepath.Abs(filepath.Join("..", "deploy", "slurm", name))
		return p
	}
	env := []string{"GIN_SLURM_DEFAULTS=" + defaults, "GIN_AGENT=" + filepath.Join(bin, "gin-agent"), "GINCTL=" + filepath.Join(bin, "ginctl")}
	out, err := run(time.Minute, nil, "salloc", "-N2", "-n2", "--no-shell")
	if err != nil {
		t.Fatalf("salloc: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Granted job allocation (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("salloc: no job id in\n%s", out)
	}
	job := m[1]
	t.Cleanup(func() { _, _ = run(time.Minute, nil, "scancel", job) })
	step := func(what string, args ...string) string {
		t.Helper()
		out, err := run(2*time.Minute, env, "srun", append([]string{"--jobid=" + job, "-N2", "-n2", "--ntasks-per-node=1"}, args...)...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, out)
		}
		return out
	}
	step("prolog", "bash", script("gin-prolog.sh"))
	jobDir := filepath.Join(inspect, job)
	if st, err := os.Stat(jobDir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the prolog did not prepare %s (0700): %v %v", jobDir, st, err)
	}
	// Each rank: the task prolog's exports, then the Inspector's dump of a
	// 2-rank all_reduce communicator, 256 MiB-1 GiB at 10 GB/s busbw (GIN
	// predicts ~48 GB/s for one 400 Gb/s NIC per node).
	rank := `eval "$(bash ` + script("gin-task-prolog.sh") + `)"
[ -n "$NCCL_INSPECTOR_DUMP_DIR" ] || { echo "no NCCL_INSPECTOR_DUMP_DIR"; exit 1; }
f="$NCCL_INSPECTOR_DUMP_DIR/$SLURMD_NODENAME-pid$$.log"
for sn in 1 2 3; do for size in 268435456 536870912 1073741824; do
  us=$(( size / 10000 ))
  printf '{"header":{"id":"0xfeed","comm_name":"","rank":%d,"n_ranks":2,"nnodes":2},"metadata":{"inspector_output_format_version":"v4.0","git_rev":"","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":1752867229276385,"hostname":"%s","pid":%d},"coll_perf":{"coll":"AllReduce","coll_sn":%d,"coll_msg_size_bytes":%d,"coll_exec_time_us":%d,"coll_timing_source":"kernel_gpu","coll_algobw_gbs":10.0,"coll_busbw_gbs":10.0}}\n' "$SLURM_PROCID" "$SLURMD_NODENAME" $$ $sn $size $us >>"$f"
done; done
echo "wrote $f"`
	if out := step("ranks", "bash", "-c", rank); strings.Count(out, "wrote ") != 2 {
		t.Fatalf("ranks:\n%s", out)
	}
	out = step("epilog", "bash", script("gin-epilog.sh"))
	if strings.Contains(out, "not imported") {
		t.Fatalf("epilog:\n%s", out)
	}
	if _, err := os.Stat(jobDir); !os.IsNotExist(err) {
		t.Fatalf("the epilog left %s: %v", jobDir, err)
	}
	rep, err := runTool(t, bin, "ginctl", "--master", addr, "job", "report", "--job", job)
	if err != nil {
		t.Fatalf("job report: %v\n%s", err, rep)
	}
	for _, w := range []string{"job " + job + " on n[1-2]: 3 rows", "all_reduce  256M", "slower than GIN expected by",
		"suspect n1: NIC mlx5_0 port 1 at 200 Gb/s, the job's other compute NICs at 400 Gb/s"} {
		if !strings.Contains(rep, w) {
			t.Errorf("job report lacks %q:\n%s", w, rep)
		}
	}
	if strings.Contains(rep, "suspect n2") {
		t.Errorf("a healthy node is a suspect:\n%s", rep)
	}
}
