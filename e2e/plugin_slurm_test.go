package e2e

import (
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

	"github.com/gin-topology/gin/internal/testkit"
)

// TestPluginUnderSrun runs the NCCL tuner plugin in 16 ranks (4 GPUs per node) on 4 Slurm
// nodes (the Slurm harness's n1..n4) through the C harness, which loads the
// library as NCCL does, against a dev master whose simulated nodes carry the
// Slurm node names, with one real gin-agent process per Slurm node serving
// plans on its own socket (the ranks and the prolog of node nX use
// $dir/sock/nX.sock). In every case the ranks must reach byte-identical
// decisions, or all fail init in strict mode:
//  1. prolog (gin-agent plan on every node), then srun: plans from the agents;
//  2. no prolog: one request per node reaches the master, plans from the agents;
//  3. a local user's hostile plan file (FIFO, symlink, huge, another user's):
//     every rank refuses it alike, in bounded time;
//  4. one node's agent down: its ranks ask the master and get the same plan;
//  5. the master killed after the prolog: the agents serve every rank;
//  6. every master down and nothing held: all stand aside alike; strict fails all;
//  7. one node's agent down with every master down: strict fails that node's ranks
//     (the job fails at init instead of diverging);
//  8. mutual TLS: a TLS master with agents named like the Slurm nodes carrying their
//     agent certificates, the strict prolog through them, ranks from the agents; one
//     node's agent down, its ranks read the plan from the master with a reader
//     certificate; the epilog expires it with the scheduler certificate.
func TestPluginUnderSrun(t *testing.T) {
	requireSlurm(t)
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("slurm e2e: no C compiler for the harness")
	}
	bin := binaries(t)
	lib := filepath.Join(bin, "libnccl-tuner-gin.so")
	// As make plugin builds them: the C shim NCCL loads and the Go loader next to it.
	build := exec.Command("go", "build", "-buildmode=c-shared", "-ldflags", "-extldflags -Wl,-z,nodelete",
		"-o", filepath.Join(bin, "libnccl-tuner-gin-go.so"), "./internal/ncclplugin")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build plugin: %v\n%s", err, out)
	}
	if out, err := exec.Command("cc", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-o", lib,
		"../internal/ncclplugin/shim/shim.c", "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("build shim: %v\n%s", err, out)
	}
	harness := filepath.Join(bin, "harness")
	if out, err := exec.Command("cc", "-O2", "-o", harness, "../internal/ncclplugin/harness/harness.c", "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("build harness: %v\n%s", err, out)
	}
	prolog, _ := filepath.Abs("../deploy/slurm/gin-prolog.sh")

	// The master, its simulated nodes named like the Slurm nodes.
	addr, master, _ := startDev(t, bin, "--dev-nodes", "n[1-4]", "--heartbeat-interval", "1s")

	// Slurm.
	sc := startSlurm(t, slurmConfig{Nodes: 4, GPUs: 4, CPUs: 16, Env: []string{"GINCTL=" + filepath.Join(bin, "ginctl")}})
	dir, run := sc.Dir, sc.Run

	// One gin-agent per Slurm node, each with its own plan socket and dir.
	sockDir := filepath.Join(dir, "sock")
	if err := os.MkdirAll(sockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	agents := map[string]*exec.Cmd{}
	agentLogs := map[string]*lockedBuffer{}
	startAgent := func(node string) {
		t.Helper()
		sock := filepath.Join(sockDir, node+".sock")
		logb := &lockedBuffer{}
		cmd := exec.Command(filepath.Join(bin, "gin-agent"), "--source", "sim:dgx-h100", "--node-name", "plan-agent-"+node,
			"--master", addr, "--metrics-bind", "", "--plan-socket", sock, "--plan-dir", filepath.Join(dir, "plans-"+node))
		cmd.Stderr = logb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		agents[node], agentLogs[node] = cmd, logb
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		testkit.WaitFor(t, 30*time.Second, "the agent for "+node+" to serve plans", func() bool { return strings.Contains(logb.String(), "serving plans") },
			func() string { return logb.String() })
	}
	stopAgent := func(node string) {
		t.Helper()
		_ = agents[node].Process.Signal(syscall.SIGTERM)
		_ = agents[node].Wait()
	}
	nodes := []string{"n1", "n2", "n3", "n4"}
	for _, n := range nodes {
		startAgent(n)
	}
	// Tasks (ranks and the prolog step) find their node's socket by name.
	perNode := []string{"bash", "-c", `export NCCL_GIN_AGENT_SOCKET=` + sockDir + `/$SLURMD_NODENAME.sock GIN_PLAN_SOCKET=` + sockDir + `/$SLURMD_NODENAME.sock; exec "$@"`, "pernode"}

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
	prologEnv := []string{"GIN_AGENT=" + filepath.Join(bin, "gin-agent")}
	prologStep := func(job string, extra ...string) (string, error) {
		args := append([]string{"--jobid=" + job, "-N4", "--ntasks-per-node=1", "-n4"}, perNode...)
		return run(time.Minute, append(prologEnv, extra...), "srun", append(args, "bash", prolog)...)
	}
	srunRanks := func(job string, extra ...string) string {
		t.Helper()
		ex := append([]string{"NCCL_GIN_INIT_TIMEOUT_MS=3000"}, extra...)
		args := append([]string{"--jobid=" + job, "-N4", "-n16", "--ntasks-per-node=4", "-l", "--export=ALL,NCCL_GIN_ENABLED=1"}, perNode...)
		out, _ := run(2*time.Minute, ex, "srun", append(args, harness, "--iters", "0", lib, "16", "4")...)
		return out
	}
	ranks := func(job string, extra ...string) map[int]string {
		t.Helper()
		out := srunRanks(job, extra...)
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
	same := func(what string, per map[int]string, wantSource string) (decisions, planHash string) {
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
			if wantSource != "" && !strings.Contains(out, wantSource) {
				t.Fatalf("%s: rank %d: no %q:\n%s", what, r, wantSource, out)
			}
		}
		return decisions, planHash
	}
	fromAgent := "GIN: Connected to topology service at unix:" + sockDir + "/"
	hashRE := regexp.MustCompile(`^[0-9a-f]{64}$`)
	fetched := func(node, job string) int {
		return strings.Count(agentLogs[node].String(), `msg="plan fetched" job=`+job+" ")
	}

	// 1. The prolog on every node, then the ranks: plans from the agents.
	job := allocate()
	if out, err := prologStep(job); err != nil {
		t.Fatalf("prolog step: %v\n%s", err, out)
	}
	pinned, err := runTool(t, bin, "ginctl", "--master", addr, "plan", "--job", job, "-o", "json")
	if err != nil {
		t.Fatalf("ginctl plan: %v\n%s", err, pinned)
	}
	dec1, hash1 := same("prolog + srun", ranks(job), fromAgent)
	if !hashRE.MatchString(hash1) || !regexp.MustCompile(`"content_hash":\s*"`+hash1+`"`).MatchString(pinned) {
		t.Fatalf("ranks used plan %s; the master pinned:\n%s", hash1, pinned)
	}
	for _, n := range nodes {
		if c := fetched(n, job); c != 1 {
			t.Fatalf("agent %s: %d fetches for job %s, want 1 (the prolog's)\n%s", n, c, job, agentLogs[n])
		}
	}
	release(job)

	// 2. No prolog: the agents fetch at task start, one request per node.
	job2 := allocate()
	_, hash2 := same("no prolog", ranks(job2), fromAgent)
	if !hashRE.MatchString(hash2) {
		t.Fatalf("no prolog: plan %s", hash2)
	}
	for _, n := range nodes {
		if c := fetched(n, job2); c != 1 {
			t.Fatalf("agent %s: %d fetches for job %s from 4 ranks, want 1", n, c, job2)
		}
	}
	release(job2)

	// 3. Hostile plan files, as another local user could leave them: every
	// rank refuses the file alike, within its deadline.
	job3 := allocate()
	hostile := filepath.Join(dir, "hostile")
	if err := os.MkdirAll(hostile, 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(hostile, "fifo.pb")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(hostile, "link.pb")
	if err := os.Symlink("/proc/self/fd/1", link); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(hostile, "huge.pb")
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 58<<20); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(hostile, "foreign.pb")
	if err := os.WriteFile(foreign, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(foreign, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, cause string }{
		{fifo, "not a regular file"}, {link, "symbolic link"}, {huge, "more than the"}, {foreign, "owned by uid 65534"},
	} {
		start := time.Now()
		per := ranks(job3, "NCCL_GIN_PLAN_FILE="+tc.path, "NCCL_GIN_INIT_TIMEOUT_MS=2000")
		if _, h := same("plan file "+tc.path, per, tc.cause); h != "none" {
			t.Fatalf("plan file %s: ranks used plan %s", tc.path, h)
		}
		if took := time.Since(start); took > time.Minute {
			t.Fatalf("plan file %s: the step took %s", tc.path, took)
		}
		out := srunRanks(job3, "NCCL_GIN_PLAN_FILE="+tc.path, "NCCL_GIN_STRICT=1")
		if n := strings.Count(out, "SUMMARY"); n != 0 {
			t.Fatalf("strict, plan file %s: %d ranks went on:\n%s", tc.path, n, out)
		}
	}
	release(job3)

	// 4. One node's agent down (prolog ran on the others): its ranks find
	// no agent, ask the master, and get the same pinned plan.
	job4 := allocate()
	if out, err := prologStep(job4); err != nil {
		t.Fatalf("prolog step: %v\n%s", err, out)
	}
	stopAgent("n4")
	per := ranks(job4, "NCCL_GIN_MASTER_HOST="+addr)
	_, hash4 := same("n4's agent down", per, "")
	if !hashRE.MatchString(hash4) {
		t.Fatalf("n4's agent down: plan %s", hash4)
	}
	viaMaster := 0
	for r, out := range per {
		switch {
		case strings.Contains(out, "no node agent at "+sockDir+"/n4.sock"):
			if !strings.Contains(out, "GIN: Connected to topology service at "+addr) {
				t.Fatalf("rank %d on n4 did not get the plan from the master:\n%s", r, out)
			}
			viaMaster++
		case !strings.Contains(out, fromAgent):
			t.Fatalf("rank %d neither from its agent nor from the master:\n%s", r, out)
		}
	}
	if viaMaster == 0 || viaMaster > 4 {
		t.Fatalf("%d ranks asked the master, want n4's (1..4)", viaMaster)
	}
	startAgent("n4")
	release(job4)

	// 5. The master dies after the prolog: the agents serve every rank.
	job5 := allocate()
	if out, err := prologStep(job5); err != nil {
		t.Fatalf("prolog step: %v\n%s", err, out)
	}
	if err := master.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = master.Wait()
	dec5, hash5 := same("master killed after the prolog", ranks(job5, "NCCL_GIN_MASTER_HOST="+addr), fromAgent)
	if !hashRE.MatchString(hash5) {
		t.Fatal("ranks stood aside although every agent held the plan")
	}
	t.Logf("decisions: job %s %s (plan %s), job %s %s (plan %s)", job, dec1, hash1, job5, dec5, hash5)

	// 6. The master down and n4's agent down, the others holding the plan
	// of job 5: in strict mode n4's ranks fail init (the job fails) while
	// the others hold the plan; no rank applies a different one.
	stopAgent("n4")
	per = ranks(job5, "NCCL_GIN_STRICT=1", "NCCL_GIN_MASTER_HOST="+addr)
	failed := 0
	for r, out := range per {
		switch {
		case strings.Contains(out, "no node agent at "+sockDir+"/n4.sock"):
			if strings.Contains(out, "SUMMARY") || !strings.Contains(out, "strict mode (NCCL_GIN_STRICT=1), failing communicator init") {
				t.Fatalf("strict, rank %d on n4 without agent or master went on:\n%s", r, out)
			}
			failed++
		case !strings.Contains(out, "plan_hash="+hash5) || !strings.Contains(out, fromAgent):
			t.Fatalf("strict, rank %d: not on plan %s from its agent:\n%s", r, hash5, out)
		}
	}
	if failed == 0 {
		t.Fatal("strict: no rank of n4 failed init")
	}
	release(job5)
	// 7. Every master down, no agent holds the job's plan: all stand aside
	// alike, and strict mode fails init on every rank.
	job6 := allocate()
	per = ranks(job6, "NCCL_GIN_MASTER_HOST="+addr)
	if _, h := same("every master down", per, "WARN"); h != "none" {
		t.Fatalf("ranks used plan %s with every master down", h)
	}
	out := srunRanks(job6, "NCCL_GIN_STRICT=1", "NCCL_GIN_MASTER_HOST="+addr)
	if n := strings.Count(out, "SUMMARY"); n != 0 {
		t.Fatalf("strict mode: %d ranks went on without a plan:\n%s", n, out)
	}
	release(job6)

	// 8. Mutual TLS: a master serving it, one agent per Slurm node named like
	// it with its agent certificate (an agent pins only jobs that include its
	// node), the prolog through them, the ranks from their agents; with n4's
	// agent down its ranks ask the master with a reader certificate
	// (NCCL_GIN_TLS_*); the epilog expires the plan with the scheduler
	// certificate of its defaults file.
	tdir := filepath.Join(dir, "tls")
	initArgs := []string{"tls", "init", "--dir", tdir, "--cert", "master/tm1", "--cert", "reader", "--cert", "scheduler"}
	for _, n := range nodes {
		initArgs = append(initArgs, "--cert", "agent/"+n)
	}
	if out, err := runTool(t, bin, "ginctl", initArgs...); err != nil {
		t.Fatalf("ginctl tls init: %v\n%s", err, out)
	}
	tcerts := testkit.CertDir(tdir)
	tflags := tcerts.Flags
	_, taddr := startTLSMaster(t, bin, dir, tcerts, "tm1")
	tsockDir := filepath.Join(dir, "tsock")
	if err := os.MkdirAll(tsockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	tagents := map[string]*testkit.Proc{}
	for _, n := range nodes {
		a := &testkit.Proc{Name: "tls-agent-" + n, Log: filepath.Join(dir, "tls-agent-"+n+".log"), Argv: append([]string{
			filepath.Join(bin, "gin-agent"), "--source", "sim:dgx-h100", "--node-name", n, "--master", taddr, "--metrics-bind", "",
			"--plan-socket", filepath.Join(tsockDir, n+".sock"), "--plan-dir", filepath.Join(dir, "tls-plans-"+n), "--heartbeat-interval", "1s"},
			tflags("agent-"+n)...)}
		if err := a.Start(); err != nil {
			t.Fatal(err)
		}
		tagents[n] = a
		t.Cleanup(func() { a.Kill(10 * time.Second) })
	}
	reader := append([]string{"--master", taddr}, tflags("reader")...)
	waitFor(t, "the 4 TLS agents registered", 60*time.Second, func() bool {
		out, err := runTool(t, bin, "ginctl", append(reader, "nodes", "-o", "json")...)
		return err == nil && strings.Count(out, `"state": "up"`) == 4
	})
	perNode = []string{"bash", "-c", `export NCCL_GIN_AGENT_SOCKET=` + tsockDir + `/$SLURMD_NODENAME.sock GIN_PLAN_SOCKET=` + tsockDir + `/$SLURMD_NODENAME.sock; exec "$@"`, "pernode"}
	fromTLSAgent := "GIN: Connected to topology service at unix:" + tsockDir + "/"
	job8 := allocate()
	if out, err := prologStep(job8, "GIN_PROLOG_STRICT=1"); err != nil {
		t.Fatalf("TLS: prolog step (strict): %v\n%s", err, out)
	}
	pinned8, err := runTool(t, bin, "ginctl", append(reader, "plan", "--job", job8, "-o", "json")...)
	if err != nil {
		t.Fatalf("TLS: ginctl plan as reader: %v\n%s", err, pinned8)
	}
	_, hash8 := same("TLS: prolog + srun", ranks(job8), fromTLSAgent)
	if !hashRE.MatchString(hash8) || !strings.Contains(pinned8, hash8) {
		t.Fatalf("TLS: ranks used plan %s; the master pinned:\n%s", hash8, pinned8)
	}
	tagents["n4"].Kill(10 * time.Second)
	per = ranks(job8, "NCCL_GIN_MASTER_HOST="+taddr, "NCCL_GIN_TLS_CA="+filepath.Join(tdir, "ca.pem"),
		"NCCL_GIN_TLS_CERT="+filepath.Join(tdir, "reader.pem"), "NCCL_GIN_TLS_KEY="+filepath.Join(tdir, "reader-key.pem"))
	if _, h := same("TLS: n4's agent down", per, ""); h != hash8 {
		t.Fatalf("TLS: n4's agent down: plan %s, want %s", h, hash8)
	}
	viaMaster = 0
	for r, out := range per {
		if strings.Contains(out, "no node agent at "+tsockDir+"/n4.sock") {
			if !strings.Contains(out, "over mTLS as spiffe://gin/reader") {
				t.Fatalf("TLS: rank %d on n4 did not read the plan from the master as reader:\n%s", r, out)
			}
			viaMaster++
		}
	}
	if viaMaster == 0 {
		t.Fatal("TLS: no rank of n4 asked the master")
	}
	defaults := filepath.Join(dir, "gin-slurm-tls")
	if err := os.WriteFile(defaults, []byte("GIN_MASTER_HOST="+taddr+"\nGIN_TLS_CA="+filepath.Join(tdir, "ca.pem")+
		"\nGIN_TLS_CERT="+filepath.Join(tdir, "scheduler.pem")+"\nGIN_TLS_KEY="+filepath.Join(tdir, "scheduler-key.pem")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	epilog, _ := filepath.Abs("../deploy/slurm/gin-epilog.sh")
	if out, err := run(time.Minute, []string{"GIN_SLURM_DEFAULTS=" + defaults}, "srun", "--jobid="+job8, "-N4", "-n4", "--ntasks-per-node=1", "bash", epilog); err != nil || strings.Contains(out, "not expired") {
		t.Fatalf("TLS: epilog step: %v\n%s", err, out)
	}
	if out, err := runTool(t, bin, "ginctl", append(reader, "plan", "--job", job8)...); err == nil || !strings.Contains(out, "has no plan") {
		t.Fatalf("TLS: the epilog did not expire the plan: %v\n%s", err, out)
	}
	release(job8)

	fmt.Fprintf(os.Stderr, "plugin under srun: 8 scenarios (the last with mutual TLS), 16 ranks each\n")
}
