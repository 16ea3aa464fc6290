package faulttest

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/testkit"
)

const nMasters = 3

// killWait bounds the wait for a SIGKILLed process to be reaped.
const killWait = 30 * time.Second

// ---------------------------------------------------------------- processes

// ---------------------------------------------------------------- cluster

type cluster struct {
	t       *testing.T
	net     *testNet
	masters []*testkit.Proc
	addrs   []string // client addresses
	conns   []*grpc.ClientConn
	agents  []*testkit.Proc
	data    []string // masters' data dirs
}

func (c *cluster) admin(i int) ginv1.AdminServiceClient {
	return ginv1.NewAdminServiceClient(c.conns[i])
}
func (c *cluster) plans(i int) ginv1.PlanServiceClient { return ginv1.NewPlanServiceClient(c.conns[i]) }
func (c *cluster) topo(i int) ginv1.TopologyServiceClient {
	return ginv1.NewTopologyServiceClient(c.conns[i])
}

func (c *cluster) info(i int, d time.Duration) (*ginv1.GetClusterInfoResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.admin(i).GetClusterInfo(ctx, &ginv1.GetClusterInfoRequest{})
}

func (c *cluster) infos(d time.Duration) []*ginv1.GetClusterInfoResponse {
	out := make([]*ginv1.GetClusterInfoResponse, len(c.addrs))
	var wg sync.WaitGroup
	for i := range c.addrs {
		wg.Go(func() { out[i], _ = c.info(i, d) })
	}
	wg.Wait()
	return out
}

// leader is the index of the master that says it leads with the highest
// term, or -1.
func (c *cluster) leader() int {
	best, term := -1, uint64(0)
	for i, in := range c.infos(700 * time.Millisecond) {
		if in != nil && in.GetRaftState() == "Leader" && in.GetTerm() >= term {
			best, term = i, in.GetTerm()
		}
	}
	return best
}

// healthy: every master answers, one of them leads, all agree on it in the
// same term, and each sees all masters as voters with client addresses.
func (c *cluster) healthy() (bool, string) {
	ins := c.infos(700 * time.Millisecond)
	lead, term := "", uint64(0)
	for i, in := range ins {
		if in == nil {
			return false, fmt.Sprintf("m%d does not answer", i+1)
		}
		if in.GetRaftState() == "Leader" {
			lead, term = in.GetServerId(), in.GetTerm()
		}
	}
	if lead == "" {
		return false, "no leader"
	}
	for i, in := range ins {
		if in.GetLeaderId() != lead || in.GetTerm() != term {
			return false, fmt.Sprintf("m%d sees leader %q term %d, leader %s term %d", i+1, in.GetLeaderId(), in.GetTerm(), lead, term)
		}
		n := 0
		for _, m := range in.GetMembers() {
			if m.GetVoter() && m.GetClientAddress() != "" {
				n++
			}
		}
		if n != nMasters {
			return false, fmt.Sprintf("m%d sees %d registered voters", i+1, n)
		}
	}
	return true, ""
}

// waitFor polls cond every 100 ms (it makes RPCs) until it holds or d
// passes, then names the last reason it gave.
func waitFor(what string, d time.Duration, cond func() (bool, string)) error {
	last := ""
	ok := testkit.WaitUntilEvery(d, 100*time.Millisecond, func() bool {
		ok, why := cond()
		if why != "" {
			last = why
		}
		return ok
	})
	if !ok {
		return fmt.Errorf("timed out after %s waiting for %s (last: %s)", d, what, last)
	}
	return nil
}

// ---------------------------------------------------------------- history

// Job plans are the registers: key = job id; a create is put-if-absent of
// the plan for one node list (each writer has its own), and its result is
// the pinned plan's node list; a read returns the pinned node list or ""
// (NOT_FOUND). The content hash covers the job id, so it cannot name the
// value across keys; it is checked separately (every OK answer for a key
// carries the same hash, on every master).
type regInput struct {
	Key    string
	Create bool
	Value  string // the node list this create proposes
}

type regOutput struct {
	Value   string // the pinned plan's node list
	Unknown bool   // a create whose outcome the client could not learn
}

var registerModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(regInput).Key
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(string), input.(regInput), output.(regOutput)
		if !in.Create {
			return out.Value == s, s
		}
		next := s
		if next == "" {
			next = in.Value
		}
		// An unknown create returns at +inf, so it may be linearised last,
		// which is the same as "never applied".
		return out.Unknown || out.Value == next, next
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		res := short(out.Value)
		if out.Unknown {
			res = "?"
		}
		if in.Create {
			return fmt.Sprintf("create(%s, %s) -> %s", in.Key, in.Value, res)
		}
		return fmt.Sprintf("get(%s) -> %s", in.Key, res)
	},
	DescribeState: func(state any) string { return short(state.(string)) },
}

func short(h string) string {
	if h == "" {
		return "∅"
	}
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

type history struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
	// counters
	writesOK, writesFailed, writesUnknown, readsOK, readsFailed int
	// writesRefused: creates refused because the job is pinned to another
	// node list, recorded with the pinned list a consistent read found.
	writesRefused int
	acked         map[string]string // key -> hash of an OK create
	createdTrue   map[string]int
}

func (h *history) now() int64 { return time.Since(h.start).Nanoseconds() }

// ---------------------------------------------------------------- client

// definite reports whether err proves the request was not applied.
func definite(err error) bool {
	switch status.Code(err) {
	case codes.FailedPrecondition, codes.NotFound, codes.InvalidArgument, codes.AlreadyExists:
		return true
	}
	return false
}

func retryable(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.NotFound:
		return false
	}
	return true
}

type workload struct {
	c        *cluster
	h        *history
	variants []string // node lists, one per writer
	guess    atomic.Int32
	maxKey   atomic.Int64
	acks     atomic.Int64
}

// create runs GetOrCreatePlan(key, variant) against the master list until
// one answers OK or the op's deadline passes.
func (w *workload) create(client, k, v int) {
	key := "ft-" + strconv.Itoa(k)
	in := regInput{Key: key, Create: true, Value: w.variants[v]}
	call := w.h.now()
	deadline := time.Now().Add(6 * time.Second)
	ambiguous := false
	var lastErr error
	var tries []string
	for try := 0; time.Now().Before(deadline); try++ {
		i := (int(w.guess.Load()) + try) % nMasters
		ctx, cancel := context.WithDeadline(context.Background(), earliest(deadline, time.Now().Add(2*time.Second)))
		resp, err := w.c.plans(i).GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: key, Nodes: w.variants[v]})
		cancel()
		if err == nil {
			ret := w.h.now()
			w.guess.Store(int32(i))
			w.h.mu.Lock()
			w.h.ops = append(w.h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: regOutput{Value: strings.Join(resp.GetPlan().GetNodes(), ",")},
				Return: ret, Metadata: fmt.Sprintf("hash %s via m%d created=%v", short(resp.GetPlan().GetContentHash()), i+1, resp.GetCreated())})
			w.h.writesOK++
			if prev, ok := w.h.acked[key]; ok && prev != resp.GetPlan().GetContentHash() {
				w.h.acked[key+"!conflict"] = resp.GetPlan().GetContentHash()
			}
			w.h.acked[key] = resp.GetPlan().GetContentHash()
			if resp.GetCreated() {
				w.h.createdTrue[key]++
			}
			w.h.mu.Unlock()
			w.acks.Add(1)
			return
		}
		if status.Code(err) == codes.FailedPrecondition && !apierr.IsNotLeader(err) {
			// The job is pinned to another writer's node list and the master
			// refuses a different placement (never a silent squat). A pinned
			// plan never changes (the campaign deletes none), so the value a
			// consistent read finds now is the one the refusal saw: the op is
			// the put-if-absent that returned it.
			if nodes, ok := w.pinnedNodes(key, deadline); ok {
				w.h.mu.Lock()
				w.h.ops = append(w.h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: regOutput{Value: nodes},
					Return: w.h.now(), Metadata: fmt.Sprintf("refused via m%d: %s", i+1, status.Convert(err).Message())})
				w.h.writesRefused++
				w.h.mu.Unlock()
				return
			}
		}
		lastErr = err
		tries = append(tries, fmt.Sprintf("m%d@%.3fs:%s", i+1, float64(w.h.now())/1e9, status.Convert(err).Message()))
		if !definite(err) {
			ambiguous = true
		}
		if !retryable(err) {
			break
		}
		if try%nMasters == nMasters-1 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	if ambiguous {
		w.h.ops = append(w.h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: regOutput{Unknown: true}, Return: math.MaxInt64,
			Metadata: fmt.Sprintf("%v; tries: %s", lastErr, strings.Join(tries, " | "))})
		w.h.writesUnknown++
		return
	}
	w.h.writesFailed++
}

// pinnedNodes reads key's pinned node list with a consistent read, trying
// every master until deadline.
func (w *workload) pinnedNodes(key string, deadline time.Time) (string, bool) {
	for try := 0; time.Now().Before(deadline); try++ {
		i := (int(w.guess.Load()) + try) % nMasters
		ctx, cancel := context.WithDeadline(context.Background(), earliest(deadline, time.Now().Add(1500*time.Millisecond)))
		resp, err := w.c.plans(i).GetPlan(ctx, &ginv1.GetPlanRequest{JobId: key, Consistency: ginv1.ReadConsistency_READ_CONSISTENCY_CONSISTENT})
		cancel()
		if err == nil {
			return strings.Join(resp.GetPlan().GetNodes(), ","), true
		}
		if try%nMasters == nMasters-1 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	return "", false
}

// read runs a consistent GetPlan(key); a read without an answer is dropped.
func (w *workload) read(client, k int) {
	key := "ft-" + strconv.Itoa(k)
	call := w.h.now()
	deadline := time.Now().Add(4 * time.Second)
	for try := 0; time.Now().Before(deadline); try++ {
		i := (int(w.guess.Load()) + try) % nMasters
		ctx, cancel := context.WithDeadline(context.Background(), earliest(deadline, time.Now().Add(1500*time.Millisecond)))
		resp, err := w.c.plans(i).GetPlan(ctx, &ginv1.GetPlanRequest{JobId: key, Consistency: ginv1.ReadConsistency_READ_CONSISTENCY_CONSISTENT})
		cancel()
		if err == nil || status.Code(err) == codes.NotFound {
			ret := w.h.now()
			w.h.mu.Lock()
			w.h.ops = append(w.h.ops, porcupine.Operation{ClientId: client, Input: regInput{Key: key}, Call: call,
				Output: regOutput{Value: strings.Join(resp.GetPlan().GetNodes(), ",")}, Return: ret,
				Metadata: fmt.Sprintf("hash %s served by %s", short(resp.GetPlan().GetContentHash()), resp.GetRead().GetServedBy())})
			w.h.readsOK++
			w.h.mu.Unlock()
			return
		}
		if try%nMasters == nMasters-1 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	w.h.mu.Lock()
	w.h.readsFailed++
	w.h.mu.Unlock()
}

// ---------------------------------------------------------------- leader claims

type claims struct {
	mu sync.Mutex
	// term -> server -> samples in which that server said it led that term
	leaders map[uint64]map[string]int
	// term -> leader id -> samples in which some follower named it
	views map[uint64]map[string]int
	// last is each server's previous sample; pending holds a follower's
	// sample that may be hashicorp/raft's transitional view (see note).
	last    map[string]leaderView
	pending map[string]leaderView
	// transitional counts the samples set aside as that view, by term.
	transitional map[uint64]int
}

// leaderView is one server's answer: the term it is in and the leader it
// names for it.
type leaderView struct {
	term   uint64
	leader string
}

// noteView records a follower's (or candidate's) naming of a leader.
//
// hashicorp/raft v1.7.3 handles an AppendEntries of a new term by calling
// setCurrentTerm before setLeader, so for a moment a follower reports the
// new term with the previous term's leader. Such a sample is set aside
// only when it is exactly that: the same server's previous sample named
// the same leader at a lower term, and its next sample no longer names
// (term, leader). A follower that keeps naming the old leader in the new
// term is counted in views, and the split checks below catch it.
func (cl *claims) noteView(server string, v leaderView) {
	if p, ok := cl.pending[server]; ok {
		delete(cl.pending, server)
		if p == v {
			cl.addView(p)
		} else {
			cl.transitional[p.term]++
		}
	}
	if prev, ok := cl.last[server]; ok && prev.term < v.term && prev.leader == v.leader {
		cl.pending[server] = v
		return
	}
	cl.addView(v)
}

func (cl *claims) addView(v leaderView) {
	if cl.views[v.term] == nil {
		cl.views[v.term] = map[string]int{}
	}
	cl.views[v.term][v.leader]++
}

// settle counts every sample still pending as a view: a sample the
// campaign never saw superseded is not excused.
func (cl *claims) settle() {
	for server, p := range cl.pending {
		cl.addView(p)
		delete(cl.pending, server)
	}
}

func (cl *claims) sample(c *cluster, stop <-chan struct{}) {
	var wg sync.WaitGroup
	for i := range c.addrs {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				in, err := c.info(i, 500*time.Millisecond)
				if err == nil {
					cl.mu.Lock()
					v := leaderView{term: in.GetTerm(), leader: in.GetLeaderId()}
					if in.GetRaftState() == "Leader" && in.GetLeaderId() == in.GetServerId() {
						if cl.leaders[in.GetTerm()] == nil {
							cl.leaders[in.GetTerm()] = map[string]int{}
						}
						cl.leaders[in.GetTerm()][in.GetServerId()]++
					} else if in.GetLeaderId() != "" {
						cl.noteView(in.GetServerId(), v)
					}
					if v.leader != "" {
						cl.last[in.GetServerId()] = v
					}
					cl.mu.Unlock()
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	wg.Wait()
}

// ---------------------------------------------------------------- faults

type fault int

const (
	killLeader fault = iota
	stopLeader
	isolateFollower
	isolateLeader
	noQuorum
	oneWayLeader
	lossyLinks
	termLeader
	killFollower
	rotateCerts
	killAgentMaster
	nFaults
)

func (f fault) String() string {
	return [...]string{
		"kill-9 leader + restart",
		"SIGSTOP/SIGCONT leader",
		"isolate a follower (minority)",
		"isolate the leader (majority elects)",
		"isolate the leader and a follower (no quorum anywhere)",
		"leader deaf to the other masters (one-way partition)",
		"30% packet loss into every master",
		"SIGTERM leader (planned shutdown) + restart",
		"kill-9 a follower, restart it behind the snapshots",
		"reissue every certificate in place (rotation under load)",
		"kill-9 the master holding agents (its share), restart it",
	}[f]
}

// Flags of a longer or replayed campaign:
//
//	go test ./faulttest -run Campaign -v -args -rounds 45 -seed 777
//
// GIN_FAULT_ROUNDS and GIN_FAULT_SEED set the same from make.
var (
	roundsFlag = flag.Int("rounds", 0, "fault rounds (default: GIN_FAULT_ROUNDS, else one of each kind)")
	seedFlag   = flag.Int64("seed", 0, "campaign seed (default: GIN_FAULT_SEED, else the clock)")
)

func envInt(name string, def int64) int64 {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil {
			return n
		}
	}
	return def
}

// ---------------------------------------------------------------- the test

func TestFaultCampaign(t *testing.T) {
	requireNetns(t)
	seed := envInt("GIN_FAULT_SEED", time.Now().UnixNano())
	if *seedFlag != 0 {
		seed = *seedFlag
	}
	rounds := int(envInt("GIN_FAULT_ROUNDS", int64(nFaults)))
	if *roundsFlag > 0 {
		rounds = *roundsFlag
	}
	if rounds < 1 || rounds > 1000 {
		t.Fatalf("rounds %d: want 1..1000", rounds)
	}
	t.Logf("fault campaign: seed %d, %d rounds (rerun with GIN_FAULT_SEED=%d GIN_FAULT_ROUNDS=%d)", seed, rounds, seed, rounds)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	began := time.Now()

	bin := testkit.BuildCommands(t, "gin-master", "gin-agent", "ginctl")
	tn := newTestNet(t, nMasters)
	logDir, err := os.MkdirTemp("", fmt.Sprintf("gin-fault-%d-", seed))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("network: namespaces gin-ft-%s-{1..%d,sw}, %s0/24; process logs in %s", tn.suffix, nMasters, tn.prefix, logDir)

	c := &cluster{t: t, net: tn}
	var ips []string
	for i := range nMasters {
		ips = append(ips, tn.IP(i))
		c.addrs = append(c.addrs, tn.IP(i)+":5000")
	}
	nodeNames := []string{"ftn1", "ftn2"}
	// mTLS on every process and every client of the campaign.
	certs, made := campaignCerts(t, bin, filepath.Join(t.TempDir(), "tls"), ips, nodeNames)
	sched := scheduler(t, certs)
	creds := pki.ClientCredentialsFrom(sched)
	join := strings.Join(c.addrs, ",")
	for i := range nMasters {
		dataDir := filepath.Join(t.TempDir(), fmt.Sprintf("m%d", i+1))
		c.data = append(c.data, dataDir)
		p := &testkit.Proc{Name: masterID(i), Log: filepath.Join(logDir, masterID(i)+".log"),
			Argv: append([]string{"ip", "netns", "exec", tn.ns[i], filepath.Join(bin, "gin-master"), "--node-id", masterID(i),
				"--bind", c.addrs[i], "--raft-bind", tn.IP(i) + ":5001", "--http-bind", "", "--data-dir", dataDir,
				"--bootstrap-expect", "3", "--join", join, "--heartbeat-interval", "1s", "--log-level", "info",
				// Snapshots every few dozen entries, so that snapshots, log
				// compaction and snapshot installs happen under the faults.
				"--snapshot-threshold", "64", "--trailing-logs", "32", "--snapshot-interval", "500ms",
				// Dead-server cleanup inside the hold times: a cut-off master
				// is removed and must join again once healed.
				"--dead-server-timeout", "4s"}, certs.Flags("master-"+masterID(i))...)}
		c.masters = append(c.masters, p)
		// Short reconnect backoff: "healed" is measured by this client, and
		// gRPC's default backoff (up to 120 s) would measure the client.
		conn, err := grpc.NewClient(c.addrs[i], grpc.WithTransportCredentials(creds),
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
				MinConnectTimeout: time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		c.conns = append(c.conns, conn)
		t.Cleanup(func() { _ = conn.Close() })
	}
	for _, p := range c.masters {
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Kill(killWait) })
	}
	failed := true
	t.Cleanup(func() {
		if failed || t.Failed() {
			t.Logf("process logs kept in %s", logDir)
			return
		}
		_ = os.RemoveAll(logDir)
	})
	if err := waitFor("3 masters to form a cluster", 90*time.Second, c.healthy); err != nil {
		t.Fatal(err)
	}
	if err := requireTLS(c); err != nil {
		t.Fatal(err)
	}
	// Each agent its own plan socket and plan dir, as on its own node (the
	// defaults, /run/gin/agent.sock and /var/lib/gin-agent/plans, are one
	// per host: the second agent would serve no plans and keep none pushed).
	agentDir := t.TempDir()
	for _, n := range nodeNames {
		p := &testkit.Proc{Name: n, Log: filepath.Join(logDir, n+".log"),
			Argv: append([]string{filepath.Join(bin, "gin-agent"), "--source", "sim:dgx-h100", "--node-name", n, "--master", join,
				"--heartbeat-interval", "1s", "--metrics-bind", "", "--home-probe-interval", "2s",
				"--plan-socket", filepath.Join(agentDir, n+".sock"), "--plan-dir", filepath.Join(agentDir, n+"-plans")}, certs.Flags("agent-"+n)...)}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		c.agents = append(c.agents, p)
		t.Cleanup(func() { p.Kill(killWait) })
	}
	nodesUp := func() (bool, string) {
		l := c.leader()
		if l < 0 {
			return false, "no leader"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := c.topo(l).ListNodes(ctx, &ginv1.ListNodesRequest{Consistency: ginv1.ReadConsistency_READ_CONSISTENCY_CONSISTENT})
		if err != nil {
			return false, err.Error()
		}
		up := map[string]bool{}
		for _, n := range resp.GetNodes() {
			up[n.GetName()] = n.GetState() == ginv1.NodeState_NODE_STATE_UP
		}
		for _, n := range nodeNames {
			if !up[n] {
				return false, n + " is not up"
			}
		}
		return true, ""
	}
	if err := waitFor("both agents' nodes up", 60*time.Second, nodesUp); err != nil {
		t.Fatal(err)
	}

	w := &workload{c: c, variants: []string{"ftn1", "ftn2", "ftn1,ftn2"}}
	h := &history{acked: map[string]string{}, createdTrue: map[string]int{}}
	w.h = h
	t.Logf("cluster up in %s (leader m%d); writers propose node lists %q", time.Since(began).Round(time.Millisecond), c.leader()+1, w.variants)

	// Workload and leader sampling run through the whole campaign.
	h.start = time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	cl := &claims{leaders: map[uint64]map[string]int{}, views: map[uint64]map[string]int{},
		last: map[string]leaderView{}, pending: map[string]leaderView{}, transitional: map[uint64]int{}}
	wg.Go(func() { cl.sample(c, stop) })
	other := testkit.MakeCerts(t, filepath.Join(bin, "ginctl"), filepath.Join(t.TempDir(), "other-ca"), testkit.Cert{Role: "master", Name: "m1"})
	attack, err := newRaftAttack(certs.Files("agent-"+nodeNames[0]), other.Files("master-m1"), certs.Files("master-"+memberlessID), certs.Files("master-m2"))
	if err != nil {
		t.Fatal(err)
	}
	var raftAddrs []string
	for i := range nMasters {
		raftAddrs = append(raftAddrs, tn.IP(i)+":5001")
	}
	wg.Go(func() { attack.run(raftAddrs, stop) })
	for v := range w.variants {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(seed), uint64(v)+1))
			for k := 1; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				if int64(k) > w.maxKey.Load() {
					w.maxKey.Store(int64(k))
				}
				w.create(v, k, v)
				time.Sleep(time.Duration(5+r.IntN(20)) * time.Millisecond)
			}
		})
	}
	for r := range 2 {
		wg.Go(func() {
			rr := rand.New(rand.NewPCG(uint64(seed), uint64(100+r)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				w.read(len(w.variants)+r, 1+rr.IntN(int(w.maxKey.Load())+2))
				time.Sleep(time.Duration(5+rr.IntN(20)) * time.Millisecond)
			}
		})
	}
	stopped := false
	stopWorkload := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	t.Cleanup(stopWorkload)

	// The campaign: shuffled bags of every fault kind.
	var plan []fault
	for len(plan) < rounds {
		var bag []fault
		for f := range nFaults {
			bag = append(bag, f)
		}
		rng.Shuffle(len(bag), func(i, j int) { bag[i], bag[j] = bag[j], bag[i] })
		plan = append(plan, bag...)
	}
	plan = plan[:rounds]
	var applied []string
	for r, f := range plan {
		l := c.leader()
		if l < 0 {
			t.Fatalf("round %d: no leader before the fault", r+1)
		}
		hold := time.Duration(2000+rng.IntN(4000)) * time.Millisecond
		follower := func(l int) int { return (l + 1 + rng.IntN(nMasters-1)) % nMasters }
		fstart := time.Now()
		t.Logf("round %d: %s at %.3fs (leader m%d)", r+1, f, fstart.Sub(h.start).Seconds(), l+1)
		var desc string
		switch f {
		case killLeader:
			p := c.masters[l]
			if !p.Kill(killWait) {
				t.Fatalf("%s survived SIGKILL for %s", p.Name, killWait)
			}
			time.Sleep(hold)
			if err := p.Start(); err != nil {
				t.Fatalf("restart %s: %v", p.Name, err)
			}
			desc = fmt.Sprintf("kill -9 m%d, restarted after %s", l+1, hold)
		case stopLeader:
			p := c.masters[l]
			if err := p.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			time.Sleep(hold)
			if err := p.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			desc = fmt.Sprintf("SIGSTOP m%d for %s", l+1, hold)
		case isolateFollower, isolateLeader:
			victim := l
			if f == isolateFollower {
				victim = follower(l)
			}
			hold += 2 * time.Second
			if err := tn.Isolate(victim); err != nil {
				t.Fatal(err)
			}
			time.Sleep(hold)
			if err := tn.Heal(victim); err != nil {
				t.Fatal(err)
			}
			role := "follower"
			if victim == l {
				role = "leader"
			}
			desc = fmt.Sprintf("isolate %s m%d for %s", role, victim+1, hold)
		case noQuorum:
			other := follower(l)
			for _, v := range []int{l, other} {
				if err := tn.Isolate(v); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(hold)
			for _, v := range []int{l, other} {
				if err := tn.Heal(v); err != nil {
					t.Fatal(err)
				}
			}
			desc = fmt.Sprintf("isolate leader m%d and follower m%d (every master alone) for %s", l+1, other+1, hold)
		case oneWayLeader:
			var peers []int
			for i := range nMasters {
				if i != l {
					peers = append(peers, i)
				}
			}
			hold += 2 * time.Second
			if err := tn.DropFrom(l, peers); err != nil {
				t.Fatal(err)
			}
			time.Sleep(hold)
			if err := tn.ClearFilters(l); err != nil {
				t.Fatal(err)
			}
			desc = fmt.Sprintf("leader m%d deaf to m%d and m%d for %s", l+1, peers[0]+1, peers[1]+1, hold)
		case lossyLinks:
			for i := range nMasters {
				if err := tn.Lossy(i, 30); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(hold)
			for i := range nMasters {
				if err := tn.ClearFilters(i); err != nil {
					t.Fatal(err)
				}
			}
			desc = fmt.Sprintf("30%% loss into every master for %s", hold)
		case termLeader:
			p := c.masters[l]
			if err := p.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := p.Wait(30 * time.Second); err != nil {
				// SIGQUIT: the Go runtime writes every goroutine's stack to
				// the process log, which shows where the shutdown hangs.
				_ = p.Signal(syscall.SIGQUIT)
				_ = p.Wait(5 * time.Second)
				t.Fatalf("%s after SIGTERM: %v (goroutine dump at the end of its log)", p.Name, err)
			}
			exitedAfter := time.Since(fstart)
			nl := -1
			if err := waitFor("a new leader after the planned shutdown", 30*time.Second, func() (bool, string) {
				nl = c.leader()
				return nl >= 0 && nl != l, "none yet"
			}); err != nil {
				t.Fatalf("round %d: %v", r+1, err)
			}
			newLeader := time.Since(fstart)
			time.Sleep(hold)
			if err := p.Start(); err != nil {
				t.Fatalf("restart %s: %v", p.Name, err)
			}
			desc = fmt.Sprintf("SIGTERM m%d (exited after %s, m%d led after %s), restarted after %s",
				l+1, exitedAfter.Round(time.Millisecond), nl+1, newLeader.Round(time.Millisecond), hold)
		case killFollower:
			victim := follower(l)
			p := c.masters[victim]
			if !p.Kill(killWait) {
				t.Fatalf("%s survived SIGKILL for %s", p.Name, killWait)
			}
			// Wait until the others have written past the trailing logs, so
			// the follower comes back needing a snapshot.
			before := w.acks.Load()
			if err := waitFor("writes while a follower is down", 30*time.Second, func() (bool, string) {
				n := w.acks.Load() - before
				return n >= 80, fmt.Sprintf("%d acknowledged", n)
			}); err != nil {
				t.Fatalf("round %d: %v", r+1, err)
			}
			if err := p.Start(); err != nil {
				t.Fatalf("restart %s: %v", p.Name, err)
			}
			desc = fmt.Sprintf("kill -9 follower m%d, restarted after %d more acknowledged writes", victim+1, w.acks.Load()-before)
		case rotateCerts:
			redials := make([]int, nMasters)
			for i, p := range c.masters {
				redials[i] = logCount(p, raftRedialLine)
			}
			serials := certs.Reissue(t, filepath.Join(bin, "ginctl"), made...)
			// New connections get the new certificates at once (the masters
			// read their files at every handshake; the workload's source
			// too), and each master's Raft layer notices the change within
			// 10 s and redials its peers under the new files.
			if err := waitFor("every master to serve its new certificate", 30*time.Second, func() (bool, string) {
				for i := range nMasters {
					got, err := servedSerial(c.addrs[i], sched)
					if err != nil {
						return false, fmt.Sprintf("m%d: %v", i+1, err)
					}
					if want := serials["master-"+masterID(i)]; got.Cmp(want) != 0 {
						return false, fmt.Sprintf("m%d serves serial %x, the new one is %x", i+1, got, want)
					}
				}
				return true, ""
			}); err != nil {
				t.Fatalf("round %d: %v", r+1, err)
			}
			served := time.Since(fstart)
			if err := waitFor("every master to redial Raft under the new files", 60*time.Second, func() (bool, string) {
				for i, p := range c.masters {
					if logCount(p, raftRedialLine) <= redials[i] {
						return false, fmt.Sprintf("m%d has not redialled", i+1)
					}
				}
				return true, ""
			}); err != nil {
				t.Fatalf("round %d: %v", r+1, err)
			}
			desc = fmt.Sprintf("reissued %d certificates in place; every master served its new one after %s, redialled Raft after %s",
				len(made), served.Round(time.Millisecond), time.Since(fstart).Round(time.Millisecond))
		case killAgentMaster:
			var err error
			if desc, err = killAgentsMaster(c, l, hold); err != nil {
				t.Fatalf("round %d: %v", r+1, err)
			}
		}
		healStart := time.Now()
		var waits []string // what "healthy" waited on, in order, with times
		if err := waitFor("the cluster to heal", 90*time.Second, func() (bool, string) {
			ok, why := c.healthy()
			if !ok && (len(waits) == 0 || !strings.HasSuffix(waits[len(waits)-1], why)) && len(waits) < 6 {
				waits = append(waits, fmt.Sprintf("+%.1fs %s", time.Since(healStart).Seconds(), why))
			}
			return ok, why
		}); err != nil {
			t.Fatalf("round %d (%s): %v", r+1, desc, err)
		}
		// ... and to serve writes again.
		before := w.acks.Load()
		if err := waitFor("5 acknowledged writes after healing", 60*time.Second, func() (bool, string) {
			n := w.acks.Load() - before
			return n >= 5, fmt.Sprintf("%d acknowledged", n)
		}); err != nil {
			t.Fatalf("round %d (%s): %v", r+1, desc, err)
		}
		line := fmt.Sprintf("round %d: %s; healthy %s after the heal (leader m%d), fault+recovery %s",
			r+1, desc, time.Since(healStart).Round(time.Millisecond), c.leader()+1, time.Since(fstart).Round(time.Millisecond))
		if len(waits) > 0 {
			line += "; waited on: " + strings.Join(waits, ", ")
		}
		applied = append(applied, line)
		t.Log(line)
	}
	stopWorkload()

	// (1) Every acknowledged write is on every master with the same hash.
	if err := waitFor("the cluster to be healthy at the end", 60*time.Second, c.healthy); err != nil {
		t.Fatal(err)
	}
	l := c.leader()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err = c.topo(l).ListNodes(ctx, &ginv1.ListNodesRequest{Consistency: ginv1.ReadConsistency_READ_CONSISTENCY_CONSISTENT})
	cancel()
	if err != nil {
		t.Fatalf("barrier read on the leader: %v", err)
	}
	li, err := c.info(l, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	target := li.GetCommitIndex()
	if err := waitFor("every master to apply the leader's commit index", 60*time.Second, func() (bool, string) {
		for i, in := range c.infos(time.Second) {
			if in == nil || in.GetAppliedIndex() < target {
				return false, fmt.Sprintf("m%d behind %d", i+1, target)
			}
		}
		return true, ""
	}); err != nil {
		t.Fatal(err)
	}
	var problems []string
	maxKey := int(w.maxKey.Load())
	lost := 0
	for k := 1; k <= maxKey; k++ {
		key := "ft-" + strconv.Itoa(k)
		seen := make([]string, nMasters)
		for i := range nMasters {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			resp, err := c.plans(i).GetPlan(ctx, &ginv1.GetPlanRequest{JobId: key, Consistency: ginv1.ReadConsistency_READ_CONSISTENCY_ANY})
			cancel()
			switch {
			case err == nil:
				seen[i] = resp.GetPlan().GetContentHash()
			case status.Code(err) == codes.NotFound:
			default:
				problems = append(problems, fmt.Sprintf("%s on m%d: %v", key, i+1, err))
			}
		}
		want, acked := h.acked[key]
		for i := range nMasters {
			if seen[i] != seen[0] {
				problems = append(problems, fmt.Sprintf("%s: masters disagree: %v", key, seen))
				break
			}
		}
		if acked {
			for i := range nMasters {
				if seen[i] != want {
					lost++
					problems = append(problems, fmt.Sprintf("acknowledged write %s=%s is %q on m%d", key, short(want), short(seen[i]), i+1))
				}
			}
		}
		if c2, ok := h.acked[key+"!conflict"]; ok {
			problems = append(problems, fmt.Sprintf("%s: two clients were acknowledged different plans (%s, %s)", key, short(want), short(c2)))
		}
	}

	// (2) Linearizability.
	res, info := porcupine.CheckOperationsVerbose(registerModel, h.ops, 120*time.Second)
	visPath := ""
	if res != porcupine.Ok || os.Getenv("GIN_FAULT_VIS") == "1" {
		visPath = filepath.Join(t.TempDir(), "porcupine.html")
		if err := porcupine.VisualizePath(registerModel, info, visPath); err != nil {
			t.Logf("visualization: %v", err)
		} else if err := copyFile(visPath, fmt.Sprintf("/tmp/gin-fault-%d.html", seed)); err == nil {
			visPath = fmt.Sprintf("%s (copied to /tmp/gin-fault-%d.html)", visPath, seed)
		}
	}

	// (3) At most one leader per term.
	cl.mu.Lock()
	cl.settle()
	transitional := fmt.Sprint(cl.transitional)
	terms := make([]uint64, 0, len(cl.leaders))
	for term := range cl.leaders {
		terms = append(terms, term)
	}
	sort.Slice(terms, func(i, j int) bool { return terms[i] < terms[j] })
	var perTerm []string
	for _, term := range terms {
		var ids []string
		for id, n := range cl.leaders[term] {
			ids = append(ids, fmt.Sprintf("%s(%d samples)", id, n))
		}
		sort.Strings(ids)
		perTerm = append(perTerm, fmt.Sprintf("term %d: %s", term, strings.Join(ids, ", ")))
		if len(cl.leaders[term]) > 1 {
			problems = append(problems, fmt.Sprintf("two leaders in term %d: %v", term, cl.leaders[term]))
		}
	}
	for term, ids := range cl.views {
		if len(ids) > 1 {
			problems = append(problems, fmt.Sprintf("followers named different leaders for term %d: %v", term, ids))
		}
		for id := range ids {
			if lm := cl.leaders[term]; lm != nil && lm[id] == 0 {
				problems = append(problems, fmt.Sprintf("a follower named %s leader of term %d, but %v claimed it", id, term, lm))
			}
		}
	}
	cl.mu.Unlock()

	// (3b) No forged Raft connection got an answer.
	problems = append(problems, attack.problems()...)

	// (4) Every agent reattached: its process runs and its node is up.
	for _, a := range c.agents {
		if !a.Alive() {
			problems = append(problems, fmt.Sprintf("agent %s exited (log %s)", a.Name, a.Log))
		}
	}
	if err := waitFor("both agents' nodes up at the end", 60*time.Second, nodesUp); err != nil {
		problems = append(problems, err.Error())
		for _, a := range c.agents {
			if line := lastProblemLine(a); line != "" {
				problems = append(problems, fmt.Sprintf("  agent %s last logged: %s", a.Name, line))
			}
		}
	}
	if err := agentsUseTLS(c); err != nil {
		problems = append(problems, err.Error())
	}
	// (4b) Each agent served plans on its own socket and kept every plan
	// the masters pushed.
	for _, a := range c.agents {
		if logCount(a, `msg="serving plans"`) == 0 {
			problems = append(problems, fmt.Sprintf("agent %s serves no plans (log %s)", a.Name, a.Log))
		}
		if n := logCount(a, "pushed plan not kept"); n > 0 {
			problems = append(problems, fmt.Sprintf("agent %s logged %d pushed plans not kept (log %s)", a.Name, n, a.Log))
		}
	}

	// (5) Snapshots were taken (and so the log compacted) on every master
	// during the faults; restores count local restarts and installs sent by
	// the leader alike.
	var snapLines []string
	for i := range nMasters {
		snaps, _ := filepath.Glob(filepath.Join(c.data[i], "snapshots", "*", "meta.json"))
		logText, _ := os.ReadFile(c.masters[i].Log)
		restores := strings.Count(string(logText), "restored state from a snapshot")
		snapLines = append(snapLines, fmt.Sprintf("m%d: %d snapshots kept, %d restores", i+1, len(snaps), restores))
		if len(snaps) == 0 {
			problems = append(problems, fmt.Sprintf("m%d took no snapshot (threshold 64 entries)", i+1))
		}
	}

	h.mu.Lock()
	created := 0
	for _, n := range h.createdTrue {
		if n > 1 {
			problems = append(problems, fmt.Sprintf("a key was reported created=true %d times", n))
		}
		created++
	}
	t.Logf("==== fault campaign summary ====")
	t.Logf("seed %d, rounds %d, total %s", seed, rounds, time.Since(began).Round(time.Second))
	for _, a := range applied {
		t.Logf("  %s", a)
	}
	t.Logf("writes: %d ok, %d refused (pinned to another node list), %d failed (definitely not applied), %d unknown; reads: %d ok, %d without answer; keys %d (acknowledged %d, created=true %d)",
		h.writesOK, h.writesRefused, h.writesFailed, h.writesUnknown, h.readsOK, h.readsFailed, maxKey, len(h.acked), created)
	h.mu.Unlock()
	for _, op := range h.ops {
		if out := op.Output.(regOutput); out.Unknown {
			t.Logf("  unknown: client %d %s called at %.3fs: %v", op.ClientId, registerModel.DescribeOperation(op.Input, op.Output), float64(op.Call)/1e9, op.Metadata)
		}
	}
	t.Logf("leaders seen per term: %s", strings.Join(perTerm, "; "))
	t.Logf("follower samples set aside as raft's term-before-leader window, by term: %s", transitional)
	t.Logf("forged Raft connections (every 300 ms to every master): %s", attack.summary())
	t.Logf("snapshots: %s", strings.Join(snapLines, "; "))
	t.Logf("acknowledged writes missing or different on some master: %d", lost)
	t.Logf("linearizability (porcupine, per-key put-if-absent register): %s", res)
	if visPath != "" {
		t.Logf("porcupine visualization: %s", visPath)
	}
	if res != porcupine.Ok {
		for _, d := range illegalKeys(h.ops, h.start, 3) {
			t.Logf("non-linearizable key:\n%s", d)
		}
		problems = append(problems, fmt.Sprintf("history is not linearizable (porcupine: %s), see %s", res, visPath))
	}
	if len(problems) > 0 {
		if len(problems) > 40 {
			problems = append(problems[:40], fmt.Sprintf("... and %d more", len(problems)-40))
		}
		t.Errorf("fault campaign (seed %d) found %d problem(s):\n  %s", seed, len(problems), strings.Join(problems, "\n  "))
		return
	}
	failed = false
}

// illegalKeys describes (up to max) keys whose own history is not
// linearizable, each op with times relative to the workload's start.
func illegalKeys(ops []porcupine.Operation, start time.Time, max int) []string {
	one := registerModel
	one.Partition = nil
	by := map[string][]porcupine.Operation{}
	var keys []string
	for _, op := range ops {
		k := op.Input.(regInput).Key
		if by[k] == nil {
			keys = append(keys, k)
		}
		by[k] = append(by[k], op)
	}
	var out []string
	for _, k := range keys {
		if len(out) >= max {
			break
		}
		if porcupine.CheckOperationsTimeout(one, by[k], 10*time.Second) != porcupine.Illegal {
			continue
		}
		sort.Slice(by[k], func(i, j int) bool { return by[k][i].Call < by[k][j].Call })
		var b strings.Builder
		for _, op := range by[k] {
			ret := "+inf"
			if op.Return != math.MaxInt64 {
				ret = fmt.Sprintf("%.3fs", float64(op.Return)/1e9)
			}
			fmt.Fprintf(&b, "    client %d [%.3fs, %s] %s  %v\n", op.ClientId, float64(op.Call)/1e9, ret,
				one.DescribeOperation(op.Input, op.Output), op.Metadata)
		}
		out = append(out, k+" (workload started "+start.Format("15:04:05.000")+"):\n"+b.String())
	}
	return out
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
