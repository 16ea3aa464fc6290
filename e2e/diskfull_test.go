package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/testkit"
)

// Disk-full tests: a master's --data-dir on a real small tmpfs (root; CI
// requires it through REQUIRE_FAULT_TESTS=1). Sizes: the first WAL segment
// is preallocated at 64 MiB, so a 160 MiB tmpfs leaves about 94 MiB; the
// masters keep 64 MiB free (--data-dir-min-free-mib, at least one segment:
// less is refused) and the ballast leaves 32 MiB.
const (
	diskFullTmpfs   = 160 << 20
	diskFullMinFree = 64 // MiB
	diskFullLeave   = 32 << 20
)

// diskFullCluster is n real gin-master processes and an agent for node001.
type diskFullCluster struct {
	t       *testing.T
	bin     string
	clients []string
	procs   []*testkit.Proc
	join    string
}

// startDiskFullCluster starts n masters (data dirs from dataDir(i)) and an
// agent, and waits until node001 is registered.
func startDiskFullCluster(t *testing.T, bin string, n int, dataDir func(i int) string, httpPort int) *diskFullCluster {
	t.Helper()
	ports := distinctPorts(t, 2*n)
	c := &diskFullCluster{t: t, bin: bin}
	for i := range n {
		c.clients = append(c.clients, "127.0.0.1:"+strconv.Itoa(ports[i]))
	}
	c.join = strings.Join(c.clients, ",")
	logDir := t.TempDir()
	for i := range n {
		httpBind := ""
		if i == 0 && httpPort > 0 {
			httpBind = "127.0.0.1:" + strconv.Itoa(httpPort)
		}
		argv := []string{filepath.Join(bin, "gin-master"), "--node-id", fmt.Sprintf("m%d", i+1),
			"--bind", c.clients[i], "--raft-bind", "127.0.0.1:" + strconv.Itoa(ports[n+i]), "--http-bind", httpBind,
			"--data-dir", dataDir(i), "--data-dir-min-free-mib", strconv.Itoa(diskFullMinFree),
			"--heartbeat-interval", "1s", "--log-level", "info", "--insecure"}
		if n > 1 {
			argv = append(argv, "--bootstrap-expect", strconv.Itoa(n), "--join", c.join)
		}
		p := &testkit.Proc{Name: fmt.Sprintf("m%d", i+1), Argv: argv, Log: filepath.Join(logDir, fmt.Sprintf("m%d.log", i+1))}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Kill(10 * time.Second) })
		c.procs = append(c.procs, p)
	}
	agent := &testkit.Proc{Name: "agent", Log: filepath.Join(logDir, "agent.log"), Argv: []string{filepath.Join(bin, "gin-agent"),
		"--source", "sim:dgx-h100", "--master", c.join, "--node-name", "node001", "--heartbeat-interval", "1s", "--metrics-bind", "", "--plan-socket", ""}}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Kill(10 * time.Second) })
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range append(c.procs, agent) {
				b, _ := os.ReadFile(p.Log)
				t.Logf("%s log:\n%s", p.Name, b)
			}
		}
	})
	waitFor(t, "node001 to register", 90*time.Second, func() bool {
		out, err := runTool(t, bin, "ginctl", "--master", c.join, "--timeout", "2s", "nodes", "-o", "json")
		return err == nil && strings.Contains(out, `"node001"`)
	})
	return c
}

// plan pins job's plan through masters; it returns the content hash, or
// ginctl's output and error.
func (c *diskFullCluster) plan(masters string, job int) (hash, out string, err error) {
	c.t.Helper()
	out, err = runTool(c.t, c.bin, "ginctl", "--master", masters, "--timeout", "5s", "plan", "--job", strconv.Itoa(job), "--nodes", "node001", "-o", "json")
	if err != nil {
		return "", out, err
	}
	m := contentHashRE.FindStringSubmatch(out)
	if m == nil {
		return "", out, fmt.Errorf("no content_hash in %s", out)
	}
	return m[1], out, nil
}

// pinStatus asks the master at addr to pin job's plan over gRPC and
// returns the status of the answer.
func (c *diskFullCluster) pinStatus(addr string, job int) *status.Status {
	c.t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = ginv1.NewPlanServiceClient(conn).GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: strconv.Itoa(job), Nodes: "node001"})
	return status.Convert(err)
}

// raftView is `ginctl cluster` as the master asked sees it.
type raftView struct {
	leader, term    string
	commit, applied uint64
}

// cluster returns the Raft view of the master at addr (zero when it does
// not answer).
func (c *diskFullCluster) cluster(addr string) raftView {
	c.t.Helper()
	out, err := runTool(c.t, c.bin, "ginctl", "--master", addr, "--timeout", "3s", "cluster", "-o", "json")
	if err != nil {
		return raftView{}
	}
	var v map[string]any
	if json.Unmarshal([]byte(out), &v) != nil {
		return raftView{}
	}
	num := func(k string) uint64 { n, _ := strconv.ParseUint(fmt.Sprint(v[k]), 10, 64); return n }
	return raftView{leader: fmt.Sprint(v["leader_id"]), term: fmt.Sprint(v["term"]), commit: num("commit_index"), applied: num("applied_index")}
}

// registered reports whether the master at addr lists n members, each
// with the client address its registration carries.
func (c *diskFullCluster) registered(addr string, n int) bool {
	c.t.Helper()
	out, err := runTool(c.t, c.bin, "ginctl", "--master", addr, "--timeout", "3s", "members", "-o", "json")
	if err != nil {
		return false
	}
	var ms []struct {
		ClientAddress string `json:"client_address"`
	}
	if json.Unmarshal([]byte(out), &ms) != nil || len(ms) != n {
		return false
	}
	for _, m := range ms {
		if m.ClientAddress == "" {
			return false
		}
	}
	return true
}

var dataDirFreeRE = regexp.MustCompile(`(?m)^gin_master_data_dir_(min_)?free_bytes\{server="m1"\} (\S+)$`)

// TestDiskFullSingleMaster: a single master whose data dir fills refuses
// writes with RESOURCE_EXHAUSTED naming the dir, keeps its leadership and
// every acknowledged write, exports the free space, and takes writes again
// without a restart once space is freed.
func TestDiskFullSingleMaster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir := testkit.MountTmpfs(t, diskFullTmpfs)
	bin := binaries(t)
	httpPort := distinctPorts(t, 1)[0]
	c := startDiskFullCluster(t, bin, 1, func(int) string { return dir }, httpPort)

	hashes := map[int]string{}
	for job := 1; job <= 3; job++ {
		h, out, err := c.plan(c.join, job)
		if err != nil {
			t.Fatalf("plan %d with space: %v\n%s", job, err, out)
		}
		hashes[job] = h
	}
	before := c.cluster(c.join)

	testkit.FillTmpfs(t, dir, diskFullLeave)
	for job := 10; job <= 12; job++ {
		st := c.pinStatus(c.clients[0], job)
		if st.Code() != codes.ResourceExhausted || !apierr.IsDataDirFull(st.Err()) || !strings.Contains(st.Message(), "data dir "+dir+" is full") {
			t.Fatalf("plan %d on a full data dir: %s %q %v; want RESOURCE_EXHAUSTED (DATA_DIR_FULL) naming the data dir %s", job, st.Code(), st.Message(), st.Details(), dir)
		}
	}
	if _, out, err := c.plan(c.join, 13); err == nil || !strings.Contains(out, "data dir "+dir+" is full") {
		t.Fatalf("ginctl plan on a full data dir: %v; want a refusal naming the data dir:\n%s", err, out)
	}
	during := c.cluster(c.join)
	if during.leader != "m1" || during.term != before.term || during.commit != before.commit || !c.procs[0].Alive() {
		t.Fatalf("while writes were refused: %+v, before %+v (alive %v); want the same leader, term and commit index", during, before, c.procs[0].Alive())
	}
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(httpPort) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	got := map[string]float64{}
	for _, m := range dataDirFreeRE.FindAllStringSubmatch(string(body), -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		got[m[1]] = v
	}
	if got["min_"] != diskFullMinFree<<20 || got[""] >= got["min_"] {
		t.Fatalf("metrics: gin_master_data_dir_free_bytes %v, min %v; want free below %d", got[""], got["min_"], diskFullMinFree<<20)
	}

	testkit.FreeTmpfs(t, dir)
	h, out, err := c.plan(c.join, 10)
	if err != nil {
		t.Fatalf("plan after space returned (no restart): %v\n%s", err, out)
	}
	hashes[10] = h
	for job, want := range hashes {
		if got, out, err := c.plan(c.join, job); err != nil || got != want {
			t.Fatalf("plan %d: hash %q (%v), want %q (acknowledged)\n%s", job, got, err, want, out)
		}
	}
	if after := c.cluster(c.join); after.leader != "m1" || after.term != before.term {
		t.Fatalf("leadership changed: %+v, before %+v", after, before)
	}
	if b, _ := os.ReadFile(c.procs[0].Log); !strings.Contains(string(b), "data dir has space again") {
		t.Errorf("the master did not log that writes are taken again")
	}
}

// TestDiskFullOneOfThreeMasters: a follower whose data dir fills stops
// appending, without an election and without dying, while the other two
// keep taking writes; once space is freed it catches up by itself.
func TestDiskFullOneOfThreeMasters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	full := testkit.MountTmpfs(t, diskFullTmpfs)
	bin := binaries(t)
	dirs := []string{t.TempDir(), t.TempDir(), full}
	c := startDiskFullCluster(t, bin, 3, func(i int) string { return dirs[i] }, 0)
	m3 := c.clients[2]

	// m3 (on the tmpfs) must be a follower: a leader that stops (SIGTERM)
	// hands leadership over, and comes back as a follower.
	waitFor(t, "a leader", 60*time.Second, func() bool { l := c.cluster(c.join).leader; return l != "" && l != "<nil>" })
	if c.cluster(c.join).leader == "m3" {
		if err := c.procs[2].Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := c.procs[2].Wait(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		if err := c.procs[2].Start(); err != nil {
			t.Fatal(err)
		}
	}
	var before raftView
	waitFor(t, "m3 a follower, seeing the leader", 60*time.Second, func() bool {
		before = c.cluster(m3)
		return before.leader == "m1" || before.leader == "m2"
	})
	leaderAddr := c.clients[0]
	if before.leader == "m2" {
		leaderAddr = c.clients[1]
	}
	if _, out, err := c.plan(c.join, 1); err != nil {
		t.Fatalf("plan 1: %v\n%s", err, out)
	}
	committed := c.cluster(leaderAddr).commit
	waitFor(t, "m3 to apply plan 1", 30*time.Second, func() bool { return c.cluster(m3).applied >= committed })

	testkit.FillTmpfs(t, full, diskFullLeave)
	hashes := map[int]string{}
	for job := 20; job <= 24; job++ {
		h, out, err := c.plan(c.join, job)
		if err != nil {
			t.Fatalf("plan %d with one follower's disk full: %v\n%s", job, err, out)
		}
		hashes[job] = h
	}
	committed = c.cluster(leaderAddr).commit
	during := c.cluster(m3)
	if during.applied >= committed {
		t.Fatalf("m3 applied index %d reached the leader's commit %d although its data dir is full (it must refuse to append)", during.applied, committed)
	}
	if during.leader != before.leader || during.term != before.term || !c.procs[2].Alive() {
		t.Fatalf("while m3's disk was full: %+v, before %+v (m3 alive %v); want the same leader and term", during, before, c.procs[2].Alive())
	}

	testkit.FreeTmpfs(t, full)
	waitFor(t, "m3 to catch up without a restart", 60*time.Second, func() bool { return c.cluster(m3).applied >= committed })
	if after := c.cluster(m3); after.leader != before.leader || after.term != before.term {
		t.Fatalf("leadership changed: %+v, before %+v", after, before)
	}
	// m3 alone with the leader is the quorum now: stop the other follower;
	// a new write needs m3's append, and every plan is still there.
	other := 0
	if before.leader == "m1" {
		other = 1
	}
	if !c.procs[other].Kill(10 * time.Second) {
		t.Fatal("the other follower did not die")
	}
	if _, out, err := c.plan(leaderAddr+","+m3, 25); err != nil {
		t.Fatalf("plan 25 with m3 as the only follower: %v\n%s", err, out)
	}
	for job, want := range hashes {
		if got, out, err := c.plan(leaderAddr+","+m3, job); err != nil || got != want {
			t.Fatalf("plan %d with m3 in the quorum: hash %q (%v), want %q\n%s", job, got, err, want, out)
		}
	}
	if b, _ := os.ReadFile(c.procs[2].Log); !strings.Contains(string(b), "data dir is full") || !strings.Contains(string(b), "data dir has space again") {
		t.Errorf("m3 did not log that its data dir was full and had space again")
	}
}

// TestDiskFullAtStartExitsForARestart: a master whose data dir has no room
// for its first log segment exits with status 75 (what the systemd unit
// restarts), naming the data dir; once the disk has room, the same command
// line starts and serves.
func TestDiskFullAtStartExitsForARestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir := testkit.MountTmpfs(t, 32<<20) // less than one 64 MiB segment
	bin := binaries(t)
	ports := distinctPorts(t, 2)
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	argv := []string{"--node-id", "m1", "--bind", addr, "--raft-bind", "127.0.0.1:" + strconv.Itoa(ports[1]), "--http-bind", "",
		"--data-dir", dir, "--data-dir-min-free-mib", strconv.Itoa(diskFullMinFree), "--insecure"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "gin-master"), argv...).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 75 {
		t.Fatalf("gin-master on a data dir without room: %v, want exit status 75:\n%s", err, out)
	}
	if !strings.Contains(string(out), "data dir "+dir+" is full") {
		t.Fatalf("the exit does not name the full data dir %s:\n%s", dir, out)
	}

	testkit.ResizeTmpfs(t, dir, diskFullTmpfs)
	p := &testkit.Proc{Name: "m1", Argv: append([]string{filepath.Join(bin, "gin-master")}, argv...), Log: filepath.Join(t.TempDir(), "m1.log")}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(10 * time.Second) })
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(p.Log)
			t.Logf("m1 log:\n%s", b)
		}
	})
	c := &diskFullCluster{t: t, bin: bin}
	waitFor(t, "the restarted master to lead", 60*time.Second, func() bool { return c.cluster(addr).leader == "m1" })
}

// TestDiskFullLeaderHandsOver: when the leader's data dir fills in a
// cluster of three, it refuses the write that finds it full, hands
// leadership over once to a master with space, and writes go on there; it
// keeps its own state and catches up once space is freed. Leadership moves
// once, not back and forth.
func TestDiskFullLeaderHandsOver(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dirs := []string{testkit.MountTmpfs(t, diskFullTmpfs), testkit.MountTmpfs(t, diskFullTmpfs), testkit.MountTmpfs(t, diskFullTmpfs)}
	bin := binaries(t)
	c := startDiskFullCluster(t, bin, 3, func(i int) string { return dirs[i] }, 0)
	var before raftView
	waitFor(t, "a leader", 60*time.Second, func() bool {
		before = c.cluster(c.join)
		return strings.HasPrefix(before.leader, "m")
	})
	old, _ := strconv.Atoi(strings.TrimPrefix(before.leader, "m"))
	old-- // index of the leader
	if _, out, err := c.plan(c.join, 1); err != nil {
		t.Fatalf("plan 1: %v\n%s", err, out)
	}
	// Every master's registration (a follower's Join, committed by the
	// leader) is in before the fill: else that write, not the test's,
	// would be the one that finds the data dir full.
	waitFor(t, "every master registered", 60*time.Second, func() bool { return c.registered(c.join, 3) })

	testkit.FillTmpfs(t, dirs[old], diskFullLeave)
	if st := c.pinStatus(c.clients[old], 30); st.Code() != codes.ResourceExhausted || !apierr.IsDataDirFull(st.Err()) {
		t.Fatalf("the write that finds the leader's data dir full: %s %q, want RESOURCE_EXHAUSTED (DATA_DIR_FULL)", st.Code(), st.Message())
	}
	var after raftView
	waitFor(t, "another master to lead", 30*time.Second, func() bool {
		after = c.cluster(c.join)
		return strings.HasPrefix(after.leader, "m") && after.leader != before.leader
	})
	newIdx, _ := strconv.Atoi(strings.TrimPrefix(after.leader, "m"))
	leaderAddr := c.clients[newIdx-1]
	hashes := map[int]string{}
	for job := 30; job <= 34; job++ {
		h, out, err := c.plan(c.join, job)
		if err != nil {
			t.Fatalf("plan %d after the hand-over: %v\n%s", job, err, out)
		}
		hashes[job] = h
	}
	committed := c.cluster(leaderAddr).commit
	if now := c.cluster(leaderAddr); now.leader != after.leader || now.term != after.term || !c.procs[old].Alive() {
		t.Fatalf("leadership moved again: %+v after the hand-over %+v (old leader alive %v)", now, after, c.procs[old].Alive())
	}
	if v := c.cluster(c.clients[old]); v.applied >= committed {
		t.Fatalf("the full master applied up to %d, the leader's commit %d: it must refuse to append", v.applied, committed)
	}

	testkit.FreeTmpfs(t, dirs[old])
	waitFor(t, "the old leader to catch up without a restart", 60*time.Second, func() bool {
		return c.cluster(c.clients[old]).applied >= committed
	})
	if now := c.cluster(leaderAddr); now.leader != after.leader || now.term != after.term {
		t.Fatalf("leadership moved again: %+v after the hand-over %+v", now, after)
	}
	for job, want := range hashes {
		if got, out, err := c.plan(c.join, job); err != nil || got != want {
			t.Fatalf("plan %d: hash %q (%v), want %q\n%s", job, got, err, want, out)
		}
	}
	if b, _ := os.ReadFile(c.procs[old].Log); !strings.Contains(string(b), "leadership handed over") {
		t.Errorf("the full leader did not log the hand-over")
	}
}
