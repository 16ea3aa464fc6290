package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPluginUnderSrun runs the NCCL tuner plugin in 16 ranks (4 GPUs per node) on 4 Slurm
// nodes (slurm-ci.sh's n1..n4) through the C harness, which loads the
// library as NCCL does, against a dev master whose simulated nodes carry the
// Slurm node names. Every rank must reach byte-identical decisions:
//  1. prolog stages the plan, then srun: same plan hash and decisions;
//  2. the master killed between prolog and srun: the staged plan serves;
//  3. no prolog, the first master address unreachable: every rank connects;
//  4. every master down: all ranks stand aside alike; strict mode fails all.
func TestPluginUnderSrun(t *testing.T) {
	if testing.Short() {
		t.Skip("slurm e2e: skipped with -short")
	}
	if os.Geteuid() != 0 {
		ciSkipf(t, "slurm e2e: needs root (slurm-ci.sh runs the Slurm daemons as root)")
	}
	script, err := filepath.Abs(slurmCIScript)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		ciSkipf(t, "slurm e2e: %s not found: %v", script, err)
	}
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("slurm e2e: no C compiler for the harness")
	}
	bin := binaries(t)
	lib := filepath.Join(bin, "libnccl-tuner-gin.so")
	build := exec.Command("go", "build", "-buildmode=c-shared", "-ldflags", "-extldflags -Wl,-z,nodelete", "-o", lib, "./internal/ncclplugin")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build plugin: %v\n%s", err, out)
	}
	harness := filepath.Join(bin, "harness")
	if out, err := exec.Command("cc", "-O2", "-o", harness, "../internal/ncclplugin/harness/harness.c", "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("build harness: %v\n%s", err, out)
	}
	prolog, _ := filepath.Abs("../deploy/slurm/gin-prolog.sh")

	// The master, its simulated nodes named like the Slurm nodes.
	addr, master, _ := startDev(t, bin, "--dev-nodes", "n[1-4]", "--heartbeat-interval", "1s")

	// Slurm.
	dir := "/tmp/gin-plugin-" + randHex(t, 6)
	ctldPort := freePort(t)
	nodePort := freePortRange(t, 4, ctldPort)
	cache := filepath.Join(dir, "gin-nccl")
	env := append(os.Environ(), "SLURM_CI_DIR="+dir, "SLURM_CI_NODES=4", "SLURM_CI_GPUS=4", "SLURM_CI_CPUS=16",
		"SLURM_CI_CTLD_PORT="+strconv.Itoa(ctldPort), "SLURM_CI_NODE_PORT="+strconv.Itoa(nodePort),
		"SLURM_CONF="+dir+"/etc/slurm.conf", "NCCL_GIN_CACHE_DIR="+cache, "GINCTL="+filepath.Join(bin, "ginctl"))
	outFile := filepath.Join(t.TempDir(), "out")
	run := func(timeout time.Duration, extra []string, name string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		f, err := os.Create(outFile)
		if err != nil {
			return "", err
		}
		defer f.Close()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env, cmd.Stdout, cmd.Stderr = append(append([]string(nil), env...), extra...), f, f
		err = cmd.Run()
		out, _ := os.ReadFile(outFile)
		return string(out), err
	}
	t.Cleanup(func() { _, _ = run(2*time.Minute, nil, "bash", script, "down") })
	if out, err := run(8*time.Minute, nil, "bash", script, "up"); err != nil {
		t.Fatalf("slurm-ci.sh up: %v\n%s", err, out)
	}

	// allocate returns a job id holding n1..n4 for 16 tasks.
	allocate := func() string {
		t.Helper()
		out, err := run(time.Minute, nil, "salloc", "-N4", "-n16", "--gpus-per-node=4", "--no-shell")
		if err != nil {
			t.Fatalf("salloc: %v\n%s", err, out)
		}
		m := regexp.MustCompile(`Granted job allocation (\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("salloc: no job id in\n%s", out)
		}
		t.Cleanup(func() { _, _ = run(time.Minute, nil, "scancel", m[1]) })
		return m[1]
	}
	release := func(job string) {
		t.Helper()
		if out, err := run(time.Minute, nil, "scancel", job); err != nil {
			t.Fatalf("scancel %s: %v\n%s", job, err, out)
		}
	}
	pinEnv := []string{"GIN_MASTER_HOST=" + addr}
	ranks := func(job string, extra ...string) map[int]string {
		t.Helper()
		ex := append([]string{"NCCL_GIN_INIT_TIMEOUT_MS=3000"}, extra...)
		out, _ := run(2*time.Minute, ex, "srun", "--jobid="+job, "-N4", "-n16", "-l",
			"--export=ALL,NCCL_GIN_ENABLED=1", harness, "--iters", "0", lib, "16", "4")
		per := map[int]string{}
		for _, line := range strings.Split(out, "\n") {
			k, rest, ok := strings.Cut(line, ": ")
			r, err := strconv.Atoi(strings.TrimSpace(k))
			if !ok || err != nil {
				continue
			}
			per[r] += rest + "\n"
		}
		if len(per) != 16 {
			t.Fatalf("srun: output from %d ranks, want 16:\n%s", len(per), out)
		}
		return per
	}
	summaryRE := regexp.MustCompile(`SUMMARY .*decisions_hash=(\S+).*plan_hash=(\S+)`)
	same := func(what string, per map[int]string, wantConnected bool) (decisions, planHash string) {
		t.Helper()
		for r, out := range per {
			m := summaryRE.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("%s: rank %d has no SUMMARY:\n%s", what, r, out)
			}
			if decisions == "" {
				decisions, planHash = m[1], m[2]
			}
			if m[1] != decisions || m[2] != planHash {
				t.Fatalf("%s: rank %d decided %s with plan %s; rank 0's peers decided %s with plan %s", what, r, m[1], m[2], decisions, planHash)
			}
			if wantConnected && !strings.Contains(out, "GIN: Connected to topology service at "+addr) {
				t.Fatalf("%s: rank %d did not log the connection line:\n%s", what, r, out)
			}
		}
		return decisions, planHash
	}

	// 1. Prolog on every node, then the ranks.
	job := allocate()
	if out, err := run(time.Minute, pinEnv, "srun", "--jobid="+job, "-N4", "--ntasks-per-node=1", "-n4", "bash", prolog); err != nil {
		t.Fatalf("prolog step: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(cache, "plan-"+job+".pb")); err != nil {
		t.Fatalf("the prolog staged no plan: %v", err)
	}
	pinned, err := runTool(t, bin, "ginctl", "--master", addr, "plan", "--job", job, "-o", "json")
	if err != nil {
		t.Fatalf("ginctl plan: %v\n%s", err, pinned)
	}
	dec1, hash1 := same("prolog + srun", ranks(job, "NCCL_GIN_MASTER_HOST="+addr), false)
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(hash1) || !regexp.MustCompile(`"content_hash":\s*"`+hash1+`"`).MatchString(pinned) {
		t.Fatalf("ranks used plan %s; the master pinned:\n%s", hash1, pinned)
	}
	release(job)

	// 3 (before the master goes away). No prolog; the first master address is unreachable.
	job3 := allocate()
	same("one master unreachable", ranks(job3, "NCCL_GIN_MASTER_HOST=127.0.0.1:1,"+addr), true)
	release(job3)

	// 2. The master dies between prolog and srun: the staged plan serves every rank.
	job2 := allocate()
	if out, err := run(time.Minute, pinEnv, "srun", "--jobid="+job2, "-N4", "--ntasks-per-node=1", "-n4", "bash", prolog); err != nil {
		t.Fatalf("prolog step: %v\n%s", err, out)
	}
	if err := master.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = master.Wait()
	dec2, hash2 := same("master killed after the prolog", ranks(job2, "NCCL_GIN_MASTER_HOST="+addr), false)
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(hash2) {
		t.Fatal("ranks stood aside although the plan was staged")
	}
	t.Logf("decisions: job %s %s (plan %s), job %s %s (plan %s)", job, dec1, hash1, job2, dec2, hash2)
	release(job2)

	// 4. Every master down, nothing staged: all ranks stand aside alike ...
	job4 := allocate()
	per := ranks(job4, "NCCL_GIN_MASTER_HOST="+addr)
	if _, h := same("every master down", per, false); h != "none" {
		t.Fatalf("ranks used plan %s with every master down", h)
	}
	for r, out := range per {
		if !strings.Contains(out, "WARN") {
			t.Fatalf("rank %d stood aside without a WARN:\n%s", r, out)
		}
	}
	// ... and strict mode fails init on every rank.
	out, _ := run(2*time.Minute, []string{"NCCL_GIN_INIT_TIMEOUT_MS=2000", "NCCL_GIN_STRICT=1", "NCCL_GIN_MASTER_HOST=" + addr},
		"srun", "--jobid="+job4, "-N4", "-n16", "-l", "--export=ALL,NCCL_GIN_ENABLED=1", harness, "--iters", "0", lib, "16", "4")
	if n := strings.Count(out, "SUMMARY"); n != 0 {
		t.Fatalf("strict mode: %d ranks went on without a plan:\n%s", n, out)
	}
	fmt.Fprintf(os.Stderr, "plugin under srun: 4 scenarios, 16 ranks each\n")
}
