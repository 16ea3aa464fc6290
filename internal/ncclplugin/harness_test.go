package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/devcluster"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/nodeplans"
	"github.com/gin-topology/gin/internal/plan"
	"github.com/gin-topology/gin/internal/planread"
	"github.com/gin-topology/gin/internal/plansock"
	"github.com/gin-topology/gin/internal/plantable"
)

// The tests build the real library and the C harness once, then load the
// library in harness processes exactly as NCCL would.

var (
	buildOnce sync.Once
	buildErr  error
	buildDir  string
	libPath   string
	harness   string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func artifacts(t *testing.T) (lib, hns string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the c-shared library")
	}
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler")
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "gin-ncclplugin-")
		if buildErr != nil {
			return
		}
		libPath = filepath.Join(buildDir, "libnccl-tuner-gin.so")
		harness = filepath.Join(buildDir, "harness")
		// As make plugin builds them: the C shim NCCL loads, and the Go
		// plan loader next to it.
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-ldflags", "-extldflags -Wl,-z,nodelete",
			"-o", filepath.Join(buildDir, "libnccl-tuner-gin-go.so"), ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build -buildmode=c-shared: %v\n%s", err, out)
			return
		}
		if out, err := exec.Command("cc", shimFlags(libPath)...).CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("cc shim.c: %v\n%s", err, out)
			return
		}
		if out, err := exec.Command("cc", "-O2", "-Wall", "-rdynamic", "-o", harness, "harness/harness.c", "-ldl").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("cc harness.c: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return libPath, harness
}

// shimFlags are the C compiler's arguments for the shim (as in the Makefile).
func shimFlags(out string) []string {
	return []string{"-O2", "-Wall", "-Wextra", "-fPIC", "-shared", "-fvisibility=hidden", "-o", out, "shim/shim.c", "-ldl"}
}

// run is one harness process's outcome.
// reInit is the harness's timing of the plugin's init call.
var reInit = regexp.MustCompile(`(?m)^INIT rc=-?\d+ ctx=\w+ ms=([0-9.]+)$`)

type run struct {
	out      string
	exit     int
	elapsed  time.Duration
	version  int
	ctxSet   bool
	summary  map[string]string
	masks    [numColls]uint32
	numAlgo  int
	running  uint32 // the NCCL_VERSION_CODE the harness's ncclGetVersion answers; 0 unknown
	decision []decisionLine
}

type decisionLine struct {
	coll, algo, proto, nch, fa, fp int
	bytes                          uint64
}

var (
	reDecision = regexp.MustCompile(`^DECISION coll=(\d+) bytes=(\d+) algo=(-?\d+) proto=(-?\d+) nch=(-?\d+) forced=(-?\d+)/(-?\d+)$`)
	reMask     = regexp.MustCompile(`^MASK coll=(\d+) bits=(\d+)$`)
	reUsing    = regexp.MustCompile(`^USING v(\d+) name=GIN numAlgo=(\d+)`)
)

// baseEnv is the test process's environment without anything the plugin reads.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "NCCL_") || strings.HasPrefix(k, "SLURM_") || k == "GIN_MASTER_HOST" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func runHarness(t *testing.T, env []string, args ...string) *run {
	t.Helper()
	lib, hns := artifacts(t)
	full := append([]string{}, args[:len(args)-2]...)
	full = append(full, lib, args[len(args)-2], args[len(args)-1])
	cmd := exec.Command(hns, full...)
	cmd.Env = append(baseEnv(), env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	r := &run{out: string(out), elapsed: time.Since(start), summary: map[string]string{}}
	if ee, ok := err.(*exec.ExitError); ok {
		r.exit = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("harness: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case reDecision.MatchString(line):
			m := reDecision.FindStringSubmatch(line)
			n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
			b, _ := strconv.ParseUint(m[2], 10, 64)
			r.decision = append(r.decision, decisionLine{coll: n(1), bytes: b, algo: n(3), proto: n(4), nch: n(5), fa: n(6), fp: n(7)})
		case reMask.MatchString(line):
			m := reMask.FindStringSubmatch(line)
			c, _ := strconv.Atoi(m[1])
			v, _ := strconv.ParseUint(m[2], 10, 32)
			r.masks[c] = uint32(v)
		case reUsing.MatchString(line):
			m := reUsing.FindStringSubmatch(line)
			r.version, _ = strconv.Atoi(m[1])
			r.numAlgo, _ = strconv.Atoi(m[2])
		case strings.HasPrefix(line, "NCCL_VERSION_CODE "):
			v, _ := strconv.ParseUint(strings.TrimPrefix(line, "NCCL_VERSION_CODE "), 10, 32)
			r.running = uint32(v)
		case strings.HasPrefix(line, "INIT "):
			r.ctxSet = strings.Contains(line, "ctx=set")
		case strings.HasPrefix(line, "SUMMARY "):
			for _, f := range strings.Fields(line)[1:] {
				k, v, _ := strings.Cut(f, "=")
				r.summary[k] = v
			}
		}
	}
	return r
}

// check compares every swept decision with what planread.Lookup says, under
// the harness's cost-table mask.
func (r *run) check(t *testing.T, p *ginv1.Plan, nRanks, nNodes uint32) (forced int) {
	t.Helper()
	if r.exit != 0 || r.summary["violations"] != "0" || r.summary["errors"] != "0" {
		t.Fatalf("exit %d, summary %v\n%s", r.exit, r.summary, r.out)
	}
	if len(r.decision) != numColls*35 {
		t.Fatalf("%d decisions, want %d\n%s", len(r.decision), numColls*35, r.out)
	}
	for _, d := range r.decision {
		want := plantable.Leave
		if p != nil {
			want = Decide(p, d.coll, nRanks, nNodes, d.bytes)
		}
		res := want.Resolve(plantable.Mask(r.masks[d.coll]), r.numAlgo, plantable.MaxProtos, r.running)
		wa, wp, wn := res.Algo, res.Proto, int(res.Channels)
		if d.fa != wa || d.fp != wp || d.nch != wn {
			t.Fatalf("v%d coll %d bytes %d: plugin forced %d/%d nch %d, plan says %d/%d nch %d (rule cell %+v)",
				r.version, d.coll, d.bytes, d.fa, d.fp, d.nch, wa, wp, wn, want)
		}
		if wa >= 0 {
			forced++
			if d.algo != wa || d.proto != wp {
				t.Fatalf("coll %d bytes %d: NCCL would pick %d/%d after forcing %d/%d", d.coll, d.bytes, d.algo, d.proto, wa, wp)
			}
		}
	}
	return forced
}

func (r *run) untouched(t *testing.T) {
	t.Helper()
	r.check(t, nil, 0, 0)
	if r.ctxSet {
		t.Fatalf("context set while standing aside\n%s", r.out)
	}
}

// simPlan builds a plan on a simulated 4-node DGX H100 cluster.
func simPlan(t *testing.T, job string) *ginv1.Plan {
	t.Helper()
	fnodes := make([]sim.FabricNode, 4)
	for i := range fnodes {
		fnodes[i] = sim.FabricNode{Name: devcluster.NodeName(i), Profile: "dgx-h100", Index: i}
	}
	spec := sim.DefaultFabricSpec()
	c, err := sim.NewCluster("test", &spec, fnodes)
	if err != nil {
		t.Fatal(err)
	}
	names := c.Names()
	invs, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build(invs, c.Fabric)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(g, job, names, 0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// forcingPlan is a hand-made plan (hash recomputed) whose rules force
// every kind of cell on the three shapes: usable ones, ones the harness's
// NCCL marks -1 (NVLS, Tree/LL128, CollNet), PAT (beyond NCCL 2.22's 6
// algorithms), channel overrides, and "leave it to NCCL" with channels.
func forcingPlan(t *testing.T, job string) *ginv1.Plan {
	t.Helper()
	p := simPlan(t, job)
	type ch struct {
		a ginv1.Algorithm
		p ginv1.Protocol
		n uint32
	}
	choices := []ch{
		{ginv1.Algorithm_ALGORITHM_RING, ginv1.Protocol_PROTOCOL_SIMPLE, 0},
		{ginv1.Algorithm_ALGORITHM_TREE, ginv1.Protocol_PROTOCOL_LL, 0},
		{ginv1.Algorithm_ALGORITHM_TREE, ginv1.Protocol_PROTOCOL_LL128, 0},
		{ginv1.Algorithm_ALGORITHM_NVLS, ginv1.Protocol_PROTOCOL_SIMPLE, 0},
		{ginv1.Algorithm_ALGORITHM_NVLS_TREE, ginv1.Protocol_PROTOCOL_SIMPLE, 8},
		{ginv1.Algorithm_ALGORITHM_PAT, ginv1.Protocol_PROTOCOL_SIMPLE, 0},
		{ginv1.Algorithm_ALGORITHM_RING, ginv1.Protocol_PROTOCOL_LL128, 4},
		{ginv1.Algorithm_ALGORITHM_UNSPECIFIED, ginv1.Protocol_PROTOCOL_UNSPECIFIED, 2},
		{ginv1.Algorithm_ALGORITHM_COLLNET_DIRECT, ginv1.Protocol_PROTOCOL_SIMPLE, 0},
		{ginv1.Algorithm_ALGORITHM_RING, ginv1.Protocol_PROTOCOL_LL, 0},
		{ginv1.Algorithm_ALGORITHM_UNSPECIFIED, ginv1.Protocol_PROTOCOL_UNSPECIFIED, 0},
	}
	p.Rules = nil
	for si, s := range shapes {
		for coll := range numColls {
			for lo, k := uint32(0), 0; lo <= planread.MaxLog2Bytes; lo, k = lo+5, k+1 {
				c := choices[(coll+k+si)%len(choices)]
				p.Rules = append(p.Rules, &ginv1.PlanRule{Collective: ginv1.Collective(coll + 1), NRanks: s[0], NNodes: s[1],
					MinLog2Bytes: lo, MaxLog2Bytes: min(lo+4, planread.MaxLog2Bytes), Algorithm: c.a, Protocol: c.p, Channels: c.n})
			}
		}
	}
	p.ContentHash = planread.Hash(p)
	if err := planread.Verify(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func writePlan(t *testing.T, p *ginv1.Plan) string {
	t.Helper()
	b, err := proto.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "plan.pb")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// shapes are the communicators a 4-node, 32-GPU plan covers.
var shapes = [][2]uint32{{32, 4}, {8, 1}, {4, 4}}

// (a) Not enabled: the plugin never enters Go and NCCL tunes alone.
func TestDisabled(t *testing.T) {
	p := simPlan(t, "job-a")
	file := writePlan(t, p)
	for _, v := range []string{"", "0", "yes", "1 "} {
		env := []string{"NCCL_GIN_PLAN_FILE=" + file, "SLURM_JOB_ID=job-a"}
		if v != "" {
			env = append(env, "NCCL_GIN_ENABLED="+v)
		}
		r := runHarness(t, env, "--iters", "0", "32", "4")
		r.untouched(t)
		if strings.Contains(r.out, "NCCL INFO") || strings.Contains(r.out, "NCCL WARN") {
			t.Fatalf("NCCL_GIN_ENABLED=%q: plugin logged\n%s", v, r.out)
		}
	}
}

// (b) A pre-staged plan file: decisions equal planread.Lookup for every call.
func TestPlanFile(t *testing.T) {
	for _, forcing := range []bool{false, true} {
		p := simPlan(t, "job-b")
		if forcing {
			p = forcingPlan(t, "job-b")
		}
		file := writePlan(t, p)
		env := []string{"NCCL_GIN_ENABLED=1", "NCCL_GIN_PLAN_FILE=" + file, "SLURM_JOB_ID=job-b"}
		for _, s := range shapes {
			r := runHarness(t, env, "--iters", "0", fmt.Sprint(s[0]), fmt.Sprint(s[1]))
			if !r.ctxSet || r.summary["plan_hash"] != p.GetContentHash() {
				t.Fatalf("shape %v: ctx %v plan_hash %q want %q\n%s", s, r.ctxSet, r.summary["plan_hash"], p.GetContentHash(), r.out)
			}
			if !strings.Contains(r.out, "NCCL INFO GIN: plan "+p.GetContentHash()+" for job job-b") {
				t.Fatalf("no plan hash line\n%s", r.out)
			}
			if strings.Contains(r.out, "Connected to topology service") {
				t.Fatalf("plan file run claims a connection\n%s", r.out)
			}
			if n := r.check(t, p, s[0], s[1]); forcing && n == 0 {
				t.Fatalf("forcing plan forced nothing on %v\n%s", s, r.out)
			}
		}
	}
	p := forcingPlan(t, "job-b")
	file := writePlan(t, p)
	env := []string{"NCCL_GIN_ENABLED=1", "NCCL_GIN_PLAN_FILE=" + file, "SLURM_JOB_ID=job-b"}
	// A shape the plan does not cover: NCCL tunes that communicator.
	r := runHarness(t, env, "--iters", "0", "16", "2")
	r.untouched(t)
	if !strings.Contains(r.out, "no rules for nRanks=16 nNodes=2") {
		t.Fatalf("no note about the uncovered shape\n%s", r.out)
	}
	// The hot path and the example tuner's CSV scan, timed in one run.
	csv := filepath.Join(t.TempDir(), "nccl_tuner.conf")
	if err := os.WriteFile(csv, []byte(exampleCSV(p)), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runHarness(t, env, "--iters", "200000", "--baseline-csv", csv, "32", "4")
	for _, l := range strings.Split(r.out, "\n") {
		if strings.HasPrefix(l, "HOTPATH") || strings.HasPrefix(l, "BASELINE") || strings.HasPrefix(l, "SUMMARY") ||
			strings.Contains(l, "GIN: plan") {
			t.Log(l)
		}
	}
}

// exampleCSV writes a plan as NVIDIA example tuner rules.
func exampleCSV(p *ginv1.Plan) string {
	colls := []string{"broadcast", "reduce", "allgather", "reducescatter", "allreduce"}
	algos := []string{"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"}
	protos := []string{"ll", "ll128", "simple"}
	var b strings.Builder
	for _, r := range p.GetRules() {
		a, pr := int(r.GetAlgorithm())-1, int(r.GetProtocol())-1
		if a < 0 || pr < 0 {
			continue
		}
		ch := int(r.GetChannels())
		if ch == 0 {
			ch = -1
		}
		hi := uint64(1)<<(r.GetMaxLog2Bytes()+1) - 1
		fmt.Fprintf(&b, "%s,%d,%d,%s,%s,%d,%d,%d\n", colls[int(r.GetCollective())-1], uint64(1)<<r.GetMinLog2Bytes(), hi,
			algos[a], protos[pr], ch, r.GetNNodes(), r.GetNRanks())
	}
	return b.String()
}

// (e) Every ABI version loads and decides as the plan says.
func TestVersions(t *testing.T) {
	p := forcingPlan(t, "job-e")
	file := writePlan(t, p)
	env := []string{"NCCL_GIN_ENABLED=1", "NCCL_GIN_PLAN_FILE=" + file, "NCCL_GIN_JOB_ID=job-e"}
	for v := 2; v <= 6; v++ {
		for _, s := range shapes {
			r := runHarness(t, env, "--iters", "0", "--version", fmt.Sprint(v), fmt.Sprint(s[0]), fmt.Sprint(s[1]))
			if r.version != v || !r.ctxSet {
				t.Fatalf("v%d: using v%d ctx %v\n%s", v, r.version, r.ctxSet, r.out)
			}
			if r.check(t, p, s[0], s[1]) == 0 {
				t.Fatalf("v%d %v: nothing forced\n%s", v, s, r.out)
			}
		}
	}
}

// startMaster runs a real single-master cluster with four simulated nodes.
func startMaster(t *testing.T) (addr string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cl, done, err := devcluster.Start(ctx, devcluster.Config{Bind: "127.0.0.1:0", Agents: 4, HeartbeatInterval: time.Second, DataDir: t.TempDir()})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return cl.Master.Addr(), stop
}

// pinnedPlan reads a job's pinned plan from the master.
func pinnedPlan(t *testing.T, addr, job string) *ginv1.Plan {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := ginv1.NewPlanServiceClient(conn).GetPlan(ctx, &ginv1.GetPlanRequest{JobId: job})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetPlan()
}

// sameDecisions fails unless every rank applied the same plan and made
// the same decisions.
func sameDecisions(t *testing.T, runs []*run) {
	t.Helper()
	for i, r := range runs {
		if !r.ctxSet || r.summary["plan_hash"] == "none" || r.summary["plan_hash"] != runs[0].summary["plan_hash"] ||
			r.summary["decisions_hash"] != runs[0].summary["decisions_hash"] {
			t.Fatalf("rank %d disagrees: %v vs %v\n%s", i, r.summary, runs[0].summary, r.out)
		}
	}
}

func concurrently(t *testing.T, n int, env []string, args ...string) []*run {
	runs := make([]*run, n)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() { runs[i] = runHarness(t, env, args...) })
	}
	wg.Wait()
	return runs
}

// (c) The node's agent: eight ranks starting at once get the plan from the
// agent's socket; one request reaches the master for the whole node; with
// the master gone, later ranks still get the same plan.
func TestAgentRanks(t *testing.T) {
	artifacts(t)
	addr, stopMaster := startMaster(t)
	masters, err := nodeplans.NewMasters([]string{addr}, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer masters.Close()
	store, err := nodeplans.Open(nodeplans.Options{Fetcher: masters})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(shortDir(t), "agent.sock")
	srv, err := plansock.Listen(sock, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	defer func() { cancel(); <-served }()

	env := []string{"NCCL_GIN_ENABLED=1", "SLURM_JOB_ID=4243", "SLURM_JOB_NODELIST=node[001-004]",
		"NCCL_GIN_AGENT_SOCKET=" + sock, "NCCL_GIN_MASTER_HOST=127.0.0.1:1"}
	runs := concurrently(t, 8, env, "--iters", "0", "32", "4")
	sameDecisions(t, runs)
	for i, r := range runs {
		if !strings.Contains(r.out, "from node agent unix:"+sock) ||
			!strings.Contains(r.out, "NCCL INFO GIN: Connected to topology service at unix:"+sock+" (node agent)") {
			t.Fatalf("rank %d: not from the agent\n%s", i, r.out)
		}
	}
	if n := store.Fetches(); n != 1 {
		t.Fatalf("%d requests reached the master for 8 ranks of one node, want 1", n)
	}
	p := pinnedPlan(t, addr, "4243")
	if p.GetContentHash() != runs[0].summary["plan_hash"] {
		t.Fatalf("master pinned %s, ranks applied %s", p.GetContentHash(), runs[0].summary["plan_hash"])
	}
	runs[0].check(t, p, 32, 4)
	// Every master down: the agent still serves the plan.
	stopMaster()
	r := runHarness(t, env, "--iters", "0", "8", "1")
	if !strings.Contains(r.out, "from node agent") || r.summary["plan_hash"] != p.GetContentHash() {
		t.Fatalf("with the master down\n%s", r.out)
	}
	r.check(t, p, 8, 1)
}

// (c2) No agent on the node: each rank asks the master itself, and all
// apply the one pinned plan.
func TestNoAgentRanksAskTheMaster(t *testing.T) {
	artifacts(t)
	addr, _ := startMaster(t)
	env := []string{"NCCL_GIN_ENABLED=1", "SLURM_JOB_ID=4242", "SLURM_JOB_NODELIST=node[001-004]",
		"NCCL_GIN_MASTER_HOST=" + addr, "NCCL_GIN_AGENT_SOCKET=" + filepath.Join(t.TempDir(), "none.sock")}
	runs := concurrently(t, 4, env, "--iters", "0", "32", "4")
	sameDecisions(t, runs)
	for i, r := range runs {
		if !strings.Contains(r.out, "NCCL INFO GIN: Connected to topology service at "+addr+" ") ||
			!strings.Contains(r.out, "from master "+addr) || !strings.Contains(r.out, "no node agent at") {
			t.Fatalf("rank %d\n%s", i, r.out)
		}
	}
	p := pinnedPlan(t, addr, "4242")
	if p.GetContentHash() != runs[0].summary["plan_hash"] {
		t.Fatalf("master pinned %s, ranks applied %s", p.GetContentHash(), runs[0].summary["plan_hash"])
	}
	runs[0].check(t, p, 32, 4)
}

// shortDir is a directory whose paths fit a socket address (108 bytes).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "gnp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// (d) No plan to be had: stand aside with the cause, or fail in strict mode.
func TestStandAside(t *testing.T) {
	good := simPlan(t, "job-d")
	goodFile := writePlan(t, good)
	b, _ := proto.Marshal(good)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	garbage := write("garbage.pb", []byte("this is not a protobuf \xff\xff\xff\xff"))
	truncated := write("truncated.pb", b[:len(b)*2/3])
	tampered := proto.Clone(good).(*ginv1.Plan)
	tampered.Rules[0].Channels += 7
	tb, _ := proto.Marshal(tampered)
	badHash := write("badhash.pb", tb)

	// A listener that accepts and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range held {
			_ = c.Close()
		}
		mu.Unlock()
	})

	// Hostile plan files: a FIFO (reading it would block), a symlink to
	// a good plan (links are not followed), and one past the size cap.
	fifo := filepath.Join(dir, "fifo.pb")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.pb")
	if err := os.Symlink(goodFile, link); err != nil {
		t.Fatal(err)
	}
	huge := write("huge.pb", nil)
	if err := os.Truncate(huge, planread.MaxBytes+1); err != nil {
		t.Fatal(err)
	}

	// Agents: one that accepts and never answers, one without the plan.
	sdir := shortDir(t)
	silentSock := filepath.Join(sdir, "silent.sock")
	sl, err := net.Listen("unix", silentSock)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := sl.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { _ = sl.Close() })
	emptyStore, err := nodeplans.Open(nodeplans.Options{})
	if err != nil {
		t.Fatal(err)
	}
	emptySock := filepath.Join(sdir, "empty.sock")
	esrv, err := plansock.Listen(emptySock, emptyStore, nil)
	if err != nil {
		t.Fatal(err)
	}
	ectx, ecancel := context.WithCancel(context.Background())
	edone := make(chan error, 1)
	go func() { edone <- esrv.Serve(ectx) }()
	t.Cleanup(func() { ecancel(); <-edone })
	noAgent := "NCCL_GIN_AGENT_SOCKET=" + filepath.Join(sdir, "none.sock")

	const deadline = 1500 * time.Millisecond
	// hardCut is what init says when its hard deadline fires before the
	// attempt's own error (which comes at the deadline less a tenth, at
	// most 200 ms: load can spend that margin): a silent peer may end
	// either way, both bounded by the configured deadline.
	hardCut := fmt.Sprintf("init did not finish within its deadline of %s (NCCL_GIN_INIT_TIMEOUT_MS)", deadline)
	cases := []struct {
		name  string
		env   []string
		cause []string
		// silent: the peer never answers, the deadline ends the wait:
		// the cause, or hardCut.
		silent bool
	}{
		{"garbage plan file", []string{"NCCL_GIN_PLAN_FILE=" + garbage}, []string{garbage, "cannot decode"}, false},
		{"truncated plan file", []string{"NCCL_GIN_PLAN_FILE=" + truncated}, []string{truncated}, false},
		{"bad hash", []string{"NCCL_GIN_PLAN_FILE=" + badHash}, []string{"fails verification", "content_hash"}, false},
		{"plan for another job", []string{"NCCL_GIN_PLAN_FILE=" + goodFile, "SLURM_JOB_ID=other"}, []string{`plan is for job "job-d", not job "other"`}, false},
		{"plan file is a FIFO", []string{"NCCL_GIN_PLAN_FILE=" + fifo}, []string{fifo, "not a regular file"}, false},
		{"plan file is a symlink", []string{"NCCL_GIN_PLAN_FILE=" + link}, []string{link, "symbolic link"}, false},
		{"huge plan file", []string{"NCCL_GIN_PLAN_FILE=" + huge}, []string{huge, "more than the"}, false},
		{"silent agent", []string{"NCCL_GIN_AGENT_SOCKET=" + silentSock, "NCCL_GIN_MASTER_HOST=127.0.0.1:1"},
			[]string{"node agent " + silentSock, "no answer in time"}, true},
		{"agent without the plan", []string{"NCCL_GIN_AGENT_SOCKET=" + emptySock, "NCCL_GIN_MASTER_HOST=127.0.0.1:1"},
			[]string{"node agent " + emptySock + ": has no plan for job job-d: NOT_FOUND"}, false},
		{"unreachable master", []string{noAgent, "NCCL_GIN_MASTER_HOST=127.0.0.1:1"}, []string{"127.0.0.1:1", "Unavailable", "no node agent at"}, false},
		{"silent master", []string{noAgent, "NCCL_GIN_MASTER_HOST=" + ln.Addr().String()}, []string{ln.Addr().String(), "no answer within"}, true},
		{"no job id", []string{"NCCL_GIN_JOB_ID=", "SLURM_JOB_ID=", "NCCL_GIN_MASTER_HOST=127.0.0.1:1"}, []string{"no job id"}, false},
		{"no agent, no master list", []string{noAgent}, []string{"no node agent and no master list"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, strict := range []bool{false, true} {
				env := []string{"NCCL_GIN_ENABLED=1", "SLURM_JOB_ID=job-d",
					fmt.Sprintf("NCCL_GIN_INIT_TIMEOUT_MS=%d", deadline.Milliseconds())}
				if strict {
					env = append(env, "NCCL_GIN_STRICT=1")
				}
				env = append(env, tc.env...)
				r := runHarness(t, env, "--iters", "0", "32", "4")
				warn := ""
				for _, l := range strings.Split(r.out, "\n") {
					if strings.HasPrefix(l, "NCCL WARN") && strings.Contains(l, "GIN:") &&
						(strings.Contains(l, "standing aside") || strings.Contains(l, "strict mode")) {
						warn = l
					}
				}
				if !tc.silent || !strings.Contains(r.out, hardCut) {
					for _, c := range tc.cause {
						if !strings.Contains(r.out, c) {
							t.Fatalf("strict=%v: cause %q not logged\n%s", strict, c, r.out)
						}
					}
				}
				// The deadline bounds init itself (the harness times the
				// call in-process; the process's start and exit, which
				// load stretches, are not init's).
				m := reInit.FindStringSubmatch(r.out)
				if m == nil {
					t.Fatalf("strict=%v: no INIT line\n%s", strict, r.out)
				}
				ms, _ := strconv.ParseFloat(m[1], 64)
				if took := time.Duration(ms * float64(time.Millisecond)); took > deadline+2*time.Second {
					t.Fatalf("strict=%v: init took %s, deadline %s", strict, took, deadline)
				}
				if strict {
					if r.exit != 2 || !strings.Contains(warn, "strict mode (NCCL_GIN_STRICT=1), failing communicator init") {
						t.Fatalf("strict: exit %d, warn %q\n%s", r.exit, warn, r.out)
					}
					continue
				}
				if warn == "" || !strings.Contains(warn, "standing aside, NCCL tunes alone") {
					t.Fatalf("no stand-aside WARN\n%s", r.out)
				}
				r.untouched(t)
				if strings.Contains(r.out, "asking the masters") && !strings.Contains(strings.Join(tc.env, " "), noAgent) {
					t.Fatalf("asked the masters although an agent answered\n%s", r.out)
				}
			}
		})
	}
}

// A child that forked without exec never enters Go: it stands aside.
func TestForkedChild(t *testing.T) {
	file := writePlan(t, simPlan(t, "job-f"))
	env := []string{"NCCL_GIN_ENABLED=1", "NCCL_GIN_PLAN_FILE=" + file, "SLURM_JOB_ID=job-f"}
	r := runHarness(t, env, "--fork", "--iters", "0", "32", "4")
	if !strings.Contains(r.out, "FORKED child") || !strings.Contains(r.out, "init in a forked child") {
		t.Fatalf("no fork stand-aside\n%s", r.out)
	}
	r.untouched(t)
	r = runHarness(t, append(env, "NCCL_GIN_STRICT=1"), "--fork", "--iters", "0", "32", "4")
	if r.exit != 2 {
		t.Fatalf("strict forked child: exit %d\n%s", r.exit, r.out)
	}
	// With the plan from the node's agent the child needs no Go: it
	// applies the plan.
	p := simPlan(t, "job-f")
	sock := serveAgent(t, p)
	r = runHarness(t, []string{"NCCL_GIN_ENABLED=1", "NCCL_GIN_AGENT_SOCKET=" + sock, "SLURM_JOB_ID=job-f"}, "--fork", "--iters", "0", "32", "4")
	if !strings.Contains(r.out, "FORKED child") || !r.ctxSet || r.summary["plan_hash"] != p.GetContentHash() {
		t.Fatalf("forked child with an agent\n%s", r.out)
	}
	r.check(t, p, 32, 4)
}

// serveAgent serves p on a plan socket with the agent's own code
// (nodeplans store, plansock server) and returns the socket's path.
func serveAgent(t *testing.T, p *ginv1.Plan) string {
	t.Helper()
	store, err := nodeplans.Open(nodeplans.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(p); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(shortDir(t), "agent.sock")
	srv, err := plansock.Listen(sock, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-served })
	return sock
}

// A plan file is trusted only when root or the rank's own user owns it:
// another user cannot plant a plan for a job.
func TestPlanFileFromAnotherUserIsRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to chown a file to another user")
	}
	path := writePlan(t, simPlan(t, "777"))
	if _, err := readPlanFile(path); err != nil {
		t.Fatalf("a plan file owned by root: %v", err)
	}
	if err := os.Chown(path, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if _, err := readPlanFile(path); err == nil || !strings.Contains(err.Error(), "owned by uid 4242") {
		t.Fatalf("a plan file owned by another user: %v", err)
	}
	if err := os.Chown(path, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := readPlanFile(path); err == nil || !strings.Contains(err.Error(), "writable by every user") {
		t.Fatalf("a world-writable plan file: %v", err)
	}
}

// gb200Plan is the published GB200 case as a plan rule (three GB200 NVL4
// partitions over InfiniBand, all_reduce from 16 MiB): NVLSTree when NCCL
// offers it, NCCL's own choice; else tree/simple, measured 19% faster than
// ring on NCCL 2.27.3 (nccl#1801). Other sizes and collectives: NCCL.
func gb200Plan(t *testing.T, job string) *ginv1.Plan {
	t.Helper()
	p := &ginv1.Plan{FormatVersion: planread.FormatVersion, JobId: job, Nodes: []string{"a", "b", "c"}, GpusPerNode: 4,
		Rules: []*ginv1.PlanRule{
			{Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, NRanks: 12, NNodes: 3, MaxLog2Bytes: 23},
			{Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, NRanks: 12, NNodes: 3, MinLog2Bytes: 24, MaxLog2Bytes: planread.MaxLog2Bytes,
				Reason: "NVLSTree if NCCL offers it (NCCL's own choice, not measured), else tree/simple (measured 19% faster than ring)",
				Choices: []*ginv1.PlanChoice{
					{Algorithm: ginv1.Algorithm_ALGORITHM_NVLS_TREE, NcclIfOffered: true, Basis: "nccl"},
					{Algorithm: ginv1.Algorithm_ALGORITHM_TREE, Protocol: ginv1.Protocol_PROTOCOL_SIMPLE, Basis: "measured",
						MinNcclVersion: 22703, MaxNcclVersion: 22703},
				}},
		}}
	p.ContentHash = planread.Hash(p)
	if err := planread.Verify(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestResolvedAgainstCostTable: one plan, two cost tables. Where NCCL
// marks NVLSTree usable the plugin leaves NCCL's choice (NVLSTree); where
// NVLS is off (NCCL_NVLS_ENABLE=0) it forces the measured tree/simple; the
// same on every simulated rank. On another NCCL release series the
// measured tree is set aside by the version rule, logged at init; finalize
// logs once what each row resolved to.
func TestResolvedAgainstCostTable(t *testing.T) {
	p := gb200Plan(t, "job-r")
	file := writePlan(t, p)
	env := []string{"NCCL_GIN_ENABLED=1", "NCCL_GIN_PLAN_FILE=" + file, "SLURM_JOB_ID=job-r"}
	at16G := func(r *run) decisionLine {
		for _, d := range r.decision {
			if d.coll == 4 && d.bytes == 16<<30 {
				return d
			}
		}
		t.Fatalf("no 16 GiB all_reduce decision\n%s", r.out)
		return decisionLine{}
	}
	for _, tc := range []struct {
		name    string
		args    []string
		forced  [2]int // at 16 GiB; -1/-1: NCCL's choice
		picked  [2]int // what NCCL then runs
		logLine string
	}{
		{"NVLSTree usable", []string{"--nvls", "on", "--nccl-version", "22703"}, [2]int{-1, -1}, [2]int{5, 2},
			"all_reduce 16M-32G: resolved to choice 1 of 2, nccl(nvls_tree)"},
		{"NVLS off", []string{"--nvls", "off", "--nccl-version", "22703"}, [2]int{0, 2}, [2]int{0, 2},
			"all_reduce 16M-32G: resolved to choice 2 of 2, tree/simple (passed over: nccl(nvls_tree) (not offered))"},
		{"NVLS off, NCCL 2.27.7", []string{"--nvls", "off", "--nccl-version", "22707"}, [2]int{0, 2}, [2]int{0, 2},
			"resolved to choice 2 of 2, tree/simple"},
		{"NVLS off, NCCL 2.29.7", []string{"--nvls", "off", "--nccl-version", "22907"}, [2]int{-1, -1}, [2]int{1, 2},
			"no choice usable (nccl(nvls_tree) (not offered), tree/simple (version rule)); NCCL's choice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"--iters", "0"}, tc.args...), "12", "3")
			runs := concurrently(t, 3, env, args...)
			sameDecisions(t, runs)
			for _, r := range runs {
				r.check(t, p, 12, 3)
				d := at16G(r)
				if [2]int{d.fa, d.fp} != tc.forced || [2]int{d.algo, d.proto} != tc.picked {
					t.Fatalf("16 GiB all_reduce: forced %d/%d, runs %d/%d; want forced %v, runs %v\n%s", d.fa, d.fp, d.algo, d.proto, tc.forced, tc.picked, r.out)
				}
				if strings.Count(r.out, tc.logLine) != 1 {
					t.Fatalf("want the resolution logged once: %q\n%s", tc.logLine, r.out)
				}
			}
		})
	}
	r := runHarness(t, env, "--iters", "0", "--nvls", "off", "--nccl-version", "22907", "12", "3")
	if !strings.Contains(r.out, "was measured on NCCL 2.27.3..2.27.3; running 2.29.7 is another release series") {
		t.Fatalf("the version rule is not logged at init\n%s", r.out)
	}
	r = runHarness(t, env, "--iters", "0", "--nvls", "off", "12", "3")
	if !strings.Contains(r.out, "running NCCL unknown (ncclGetVersion not found in the process); 1 measured choices, 0 set aside by the version rule; measured choices applied as planned") {
		t.Fatalf("an unknown version is not logged\n%s", r.out)
	}
	if d := at16G(r); d.fa != 0 || d.fp != 2 {
		t.Fatalf("unknown version: forced %d/%d, want the measured tree", d.fa, d.fp)
	}
}

var reHotpath = regexp.MustCompile(`HOTPATH median_ns=([0-9.]+)`)

// TestHotPathAgainstBaseline times getCollInfo of this library against a
// baseline build (GIN_HOTPATH_BASELINE: a directory holding an older
// libnccl-tuner-gin.so and its libnccl-tuner-gin-go.so), alternating the
// two nine times in one run with the same 135-rule plan, and logs each
// run's median ns/call and the fastest and median of those (on a shared,
// loaded machine the fastest run is the least disturbed one);
// docs/BENCHMARKS.md has the figures. Skipped without a baseline.
func TestHotPathAgainstBaseline(t *testing.T) {
	base := os.Getenv("GIN_HOTPATH_BASELINE")
	if base == "" {
		t.Skip("GIN_HOTPATH_BASELINE names no baseline build")
	}
	lib, hns := artifacts(t)
	p := forcingPlan(t, "job-h")
	file := writePlan(t, p)
	gb := writePlan(t, gb200Plan(t, "job-h"))
	env := append(baseEnv(), "NCCL_GIN_ENABLED=1", "SLURM_JOB_ID=job-h")
	timeOf := func(l, plan string, args ...string) float64 {
		cmd := exec.Command(hns, append(append([]string{"--iters", "200000"}, args...), l, "32", "4")...)
		if plan == gb {
			cmd = exec.Command(hns, append(append([]string{"--iters", "200000"}, args...), l, "12", "3")...)
		}
		cmd.Env = append(env, "NCCL_GIN_PLAN_FILE="+plan)
		out, err := cmd.CombinedOutput()
		m := reHotpath.FindSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("%s: %v\n%s", l, err, out)
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v
	}
	var olds, news, choices []float64
	for range 9 {
		olds = append(olds, timeOf(filepath.Join(base, "libnccl-tuner-gin.so"), file))
		news = append(news, timeOf(lib, file))
		choices = append(choices, timeOf(lib, gb, "--nvls", "off"))
	}
	med := func(v []float64) float64 {
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		return s[len(s)/2]
	}
	low := func(v []float64) float64 {
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		return s[0]
	}
	t.Logf("baseline %v: fastest %.2f ns, median %.2f ns", olds, low(olds), med(olds))
	t.Logf("this build %v: fastest %.2f ns (%.2f×), median %.2f ns (%.2f×)", news, low(news), low(news)/low(olds), med(news), med(news)/med(olds))
	t.Logf("two-choice rule, first not offered %v: fastest %.2f ns (%.2f×), median %.2f ns", choices, low(choices), low(choices)/low(olds), med(choices))
	if low(news) > 2*low(olds) {
		t.Errorf("getCollInfo fastest run %.2f ns, more than twice the baseline's %.2f ns", low(news), low(olds))
	}
}
