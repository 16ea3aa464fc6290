//go:build linux

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/testkit"
)

// BenchmarkFailover measures failover on real processes: three gin-master
// processes (one Raft cluster on loopback) and GIN_FAILOVER_AGENTS (default
// 16) gin-agent processes with simulated DGX H100 nodes. Each iteration
// SIGKILLs the current leader and measures
//
//   - leader_ms: from the SIGKILL until a survivor answers a consistent read
//     (ListNodes with READ_CONSISTENCY_CONSISTENT: it is the leader and has
//     verified its leadership with a quorum), polled every 10 ms;
//   - reattach_ms: from the SIGKILL until the surviving masters together
//     hold a session with every agent (any master holds sessions: agents
//     spread over the master list, those of the killed leader reattach to
//     the next one, the others keep theirs), read from their
//     gin_master_connected_agents gauges (distinct nodes whose Hello each
//     acknowledged), polled every 10 ms;
//   - nodes_down_max: the most nodes marked DOWN (missed heartbeats) while
//     the agents were reattaching, from the same scrapes;
//   - attempts/agent: session attempts per agent per failover, from the
//     agents' gin_agent_master_reconnects_total;
//   - terms_max: the most Raft terms one iteration went through (1 is one
//     clean election; more are split votes or spurious elections);
//   - resent_inventories: inventories the agents sent during the iteration
//     (kill, failover, restart of the killed master and rejoin), the sum of
//     the agents' own gin_agent_inventories_sent_total counters read from
//     their /metrics before the kill and after the cluster is whole again
//     (the counter counts every inventory update, full or delta, so 0 means
//     no full inventory either; a new session's first send is always full);
//
// then restarts the killed master on its data directory and waits until the
// cluster is whole (three members agreeing on one leader, the restarted one
// caught up, the masters together holding every agent's session and every
// agent reporting one session, every node up).
//
// It runs twice: "tuned" (Raft heartbeat and election timeouts 300 ms, leader
// lease 150 ms) and "default" (hashicorp/raft's 1 s, 1 s, 500 ms) as the
// baseline. Run it with, for instance,
//
//	go test -run '^$' -bench BenchmarkFailover -benchtime=5x -timeout 20m ./e2e/
func BenchmarkFailover(b *testing.B) {
	n := failoverAgents(b)
	bin := binaries(b)
	for _, tm := range failoverTimings {
		b.Run(tm.name, func(b *testing.B) {
			benchFailover(b, bin, n, tm.flags(), false)
		})
	}
}

// BenchmarkFailoverTLS is BenchmarkFailover with the tuned timings twice in
// the same run: "plaintext" (--insecure) as the baseline and "mtls", every
// process with a certificate made by `ginctl tls` (masters: their own, Raft
// over the TLS transport; agents: their node's; the benchmark's clients: a
// reader's). After a failover every agent opens a new TLS connection and
// session to the new leader, and the restarted master's Raft connections
// are TLS handshakes too.
//
//	go test -run '^$' -bench BenchmarkFailoverTLS -benchtime=5x -timeout 20m ./e2e/
func BenchmarkFailoverTLS(b *testing.B) {
	n := failoverAgents(b)
	bin := binaries(b)
	for _, mode := range []struct {
		name string
		tls  bool
	}{{"plaintext", false}, {"mtls", true}} {
		b.Run(mode.name, func(b *testing.B) {
			benchFailover(b, bin, n, failoverTimings[0].flags(), mode.tls)
		})
	}
}

// failoverAgents is GIN_FAILOVER_AGENTS, else defaultFailoverAgents.
func failoverAgents(b *testing.B) int {
	n := defaultFailoverAgents
	if v := os.Getenv(failoverAgentsEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 64 {
			b.Fatalf("%s=%q: want 1..64 agents", failoverAgentsEnv, v)
		}
	}
	return n
}

// failoverAgentsEnv sets the number of agent processes of BenchmarkFailover.
const (
	failoverAgentsEnv     = "GIN_FAILOVER_AGENTS"
	defaultFailoverAgents = 16
)

// failoverTimings are the Raft timeouts compared. On loopback a heartbeat
// takes well under a millisecond and the leader sends one every
// heartbeat timeout / 10 (30 ms when tuned), so 300 ms tolerates a stall of
// ~10 heartbeat periods (a GC pause, an fsync on a shared disk) before a
// follower starts an election; the lease (150 ms) must not exceed the
// heartbeat timeout.
var failoverTimings = []failoverTiming{
	{"tuned", "300ms", "300ms", "150ms"},
	{"default", "1s", "1s", "500ms"},
}

type failoverTiming struct{ name, heartbeat, election, lease string }

// flags are gin-master's Raft timeout flags for tm.
func (tm failoverTiming) flags() []string {
	return []string{"--raft-heartbeat-timeout", tm.heartbeat, "--raft-election-timeout", tm.election, "--raft-leader-lease-timeout", tm.lease}
}

// Poll intervals and bounds of the waits.
const (
	failoverPoll      = 10 * time.Millisecond
	wholePoll         = 50 * time.Millisecond
	failoverWait      = 60 * time.Second
	wholeWait         = 180 * time.Second
	failoverRPCLimit  = time.Second
	failoverHeartbeat = "1s" // the agents' heartbeat interval, set by the masters
)

// foProc is a testkit.Proc under a test or benchmark: a failed start
// fails it, and kill waits at most 10 s.
type foProc struct{ testkit.Proc }

func (p *foProc) start(tb testing.TB) {
	tb.Helper()
	if err := p.Start(); err != nil {
		tb.Fatal(err)
	}
}

func (p *foProc) alive() bool { return p.Alive() }

// kill sends SIGKILL and reports whether the process was reaped within 10 s.
func (p *foProc) kill() bool { return p.Kill(10 * time.Second) }

// foMaster is one gin-master with its addresses and a client connection.
type foMaster struct {
	foProc
	id, client, http string
	conn             *grpc.ClientConn
}

// foAgent is one gin-agent with its metrics address.
type foAgent struct {
	foProc
	metrics string
}

// foCluster is the system under test.
type foCluster struct {
	tb      testing.TB
	n       int
	masters []*foMaster
	agents  []*foAgent
	web     *http.Client
}

// foWhole is the state of a whole cluster.
type foWhole struct {
	leader     int    // index into masters
	term       uint64 // the leader's term
	sent       uint64 // sum of the agents' gin_agent_inventories_sent_total
	reconnects uint64 // sum of the agents' gin_agent_master_reconnects_total
}

func benchFailover(b *testing.B, bin string, n int, raftFlags []string, useTLS bool) {
	c := startFailoverClusterTLS(b, bin, n, raftFlags, useTLS)
	w := c.waitWhole("the cluster to form with every agent attached")
	b.Logf("%d masters, %d agents; leader %s (term %d)", len(c.masters), n, c.masters[w.leader].id, w.term)

	var leaderMs, reattachMs []float64
	var resent, attempts uint64
	downMax := 0.0
	var termsMax uint64
	iter := 0
	for b.Loop() {
		iter++
		old := c.masters[w.leader]
		t0 := time.Now()
		if !old.kill() {
			b.Fatalf("%s did not die within 10 s of SIGKILL", old.id)
		}

		// (a) A survivor answers a consistent read.
		newLeader := -1
		leaderDur := c.poll("a new leader answering a consistent read", failoverWait, failoverPoll, t0, func() error {
			var errs []string
			for i, m := range c.masters {
				if m == old {
					continue
				}
				if err := c.consistentRead(m); err != nil {
					errs = append(errs, m.id+": "+err.Error())
					continue
				}
				newLeader = i
				return nil
			}
			return errors.New(strings.Join(errs, "; "))
		})

		// (b) The survivors together hold every agent's session (one
		// scrape costs a master ~1 ms of CPU).
		maxDown := 0.0
		reattachDur := c.poll(fmt.Sprintf("all %d agents attached to live masters", n), failoverWait, failoverPoll, t0, func() error {
			var errs []string
			agents := 0.0
			for _, m := range c.masters {
				if m == old {
					continue
				}
				got, err := c.scrape(m.http)
				if err != nil {
					return fmt.Errorf("%s: %w", m.id, err)
				}
				maxDown = max(maxDown, got.value("gin_master_nodes", `state="down"`))
				agents += got.value("gin_master_connected_agents", "")
				errs = append(errs, fmt.Sprintf("%s: %v agents", m.id, got.value("gin_master_connected_agents", "")))
			}
			if agents == float64(n) {
				return nil
			}
			return errors.New(strings.Join(errs, "; "))
		})

		// Restart the killed master on its data directory; wait until whole.
		old.start(b)
		restartAt := time.Now()
		prev := w
		w = c.waitWhole("the cluster whole again after restarting " + old.id)
		wholeDur := time.Since(restartAt)

		sent := w.sent - prev.sent
		tries := w.reconnects - prev.reconnects
		resent += sent
		attempts += tries
		downMax = max(downMax, maxDown)
		termsMax = max(termsMax, w.term-prev.term)
		leaderMs = append(leaderMs, foMs(leaderDur))
		reattachMs = append(reattachMs, foMs(reattachDur))
		b.Logf("failover %d: SIGKILL %s (leader, term %d); %s serving after %.0f ms; all %d agents attached to live masters after %.0f ms "+
			"(%d session attempts, at most %.0f nodes marked down); %s whole again %.1f s after restart (leader %s, term %d); inventories sent %d",
			iter, old.id, prev.term, c.masters[newLeader].id, foMs(leaderDur), n, foMs(reattachDur),
			tries, maxDown, old.id, wholeDur.Seconds(), c.masters[w.leader].id, w.term, sent)
	}
	b.ReportMetric(0, "ns/op") // an iteration includes the restart and rejoin: not a figure of interest
	b.ReportMetric(foMedian(leaderMs), "leader_ms")
	b.ReportMetric(slices.Max(leaderMs), "leader_max_ms")
	b.ReportMetric(foMedian(reattachMs), "reattach_ms")
	b.ReportMetric(slices.Max(reattachMs), "reattach_max_ms")
	b.ReportMetric(float64(resent), "resent_inventories")
	b.ReportMetric(float64(attempts)/float64(len(leaderMs)*n), "attempts/agent")
	b.ReportMetric(downMax, "nodes_down_max")
	b.ReportMetric(float64(termsMax), "terms_max")
}

// startFailoverCluster starts three masters (bootstrap-expect 3) and n
// agents, plaintext (--insecure).
func startFailoverCluster(b *testing.B, bin string, n int, raftFlags []string) *foCluster {
	return startFailoverClusterTLS(b, bin, n, raftFlags, false)
}

// startFailoverClusterTLS is startFailoverCluster with mTLS on every process
// and client when useTLS is set.
func startFailoverClusterTLS(b *testing.B, bin string, n int, raftFlags []string, useTLS bool) *foCluster {
	ports := foPorts(b, 9+n)
	dir := b.TempDir()
	c := &foCluster{tb: b, n: n, web: &http.Client{Timeout: failoverRPCLimit}}
	masterID := func(i int) string { return fmt.Sprintf("m%d", i+1) }
	agentName := func(i int) string { return fmt.Sprintf("fo%02d", i+1) }
	// tlsFlags are a process's --tls-* flags for its certificate, or
	// --insecure; creds are the benchmark clients'.
	tlsFlags := func(string) []string { return []string{"--insecure"} }
	creds := insecure.NewCredentials()
	if useTLS {
		certs := []testkit.Cert{{Role: "reader"}}
		for i := range 3 {
			certs = append(certs, testkit.Cert{Role: "master", Name: masterID(i)})
		}
		for i := range n {
			certs = append(certs, testkit.Cert{Role: "agent", Name: agentName(i)})
		}
		d := testkit.MakeCerts(b, filepath.Join(bin, "ginctl"), filepath.Join(dir, "tls"), certs...)
		tlsFlags = d.Flags
		var err error
		if creds, err = pki.ClientCredentials(d.Files("reader"), nil); err != nil {
			b.Fatal(err)
		}
	}
	var join []string
	for i := range 3 {
		join = append(join, "127.0.0.1:"+strconv.Itoa(ports[3*i]))
	}
	for i := range 3 {
		m := &foMaster{id: masterID(i), client: join[i], http: "127.0.0.1:" + strconv.Itoa(ports[3*i+2])}
		data := filepath.Join(dir, m.id)
		m.foProc = foProc{testkit.Proc{Name: m.id, Log: filepath.Join(dir, m.id+".log"),
			Argv: append([]string{filepath.Join(bin, "gin-master"), "--node-id", m.id, "--bind", m.client, "--raft-bind", "127.0.0.1:" + strconv.Itoa(ports[3*i+1]),
				"--http-bind", m.http, "--data-dir", data, "--bootstrap-expect", "3", "--join", strings.Join(join, ","),
				"--heartbeat-interval", failoverHeartbeat, "--log-level", "info"}, append(tlsFlags("master-"+m.id), raftFlags...)...)}}
		conn, err := grpc.NewClient(m.client, grpc.WithTransportCredentials(creds),
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 200 * time.Millisecond},
				MinConnectTimeout: failoverRPCLimit,
			}))
		if err != nil {
			b.Fatal(err)
		}
		m.conn = conn
		c.masters = append(c.masters, m)
		b.Cleanup(func() { m.kill(); _ = conn.Close() })
		m.start(b)
	}
	for i := range n {
		a := &foAgent{metrics: "127.0.0.1:" + strconv.Itoa(ports[9+i])}
		name := agentName(i)
		agentTLS := tlsFlags("agent-" + name)
		if !useTLS {
			agentTLS = nil // an agent has no --insecure: plaintext without certificates
		}
		a.foProc = foProc{testkit.Proc{Name: name, Log: filepath.Join(dir, name+".log"),
			Argv: append([]string{filepath.Join(bin, "gin-agent"), "--source", "sim:dgx-h100", "--node-name", name, "--master", strings.Join(join, ","),
				"--heartbeat-interval", failoverHeartbeat, "--metrics-bind", a.metrics, "--log-level", "info"}, agentTLS...)}}
		c.agents = append(c.agents, a)
		b.Cleanup(func() { a.kill() }) // cleanups run last-in first-out: agents before masters
		a.start(b)
	}
	return c
}

// foPorts returns k distinct free TCP ports on loopback.
func foPorts(tb testing.TB, k int) []int {
	tb.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for range k {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		ls = append(ls, l) // held open until all are chosen: no duplicates
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// poll calls cond every interval until it returns nil and returns the time
// since t0; after limit it fails the benchmark with cond's last error.
func (c *foCluster) poll(what string, limit, interval time.Duration, t0 time.Time, cond func() error) time.Duration {
	c.tb.Helper()
	var err error
	if !testkit.WaitUntilEvery(limit, interval, func() bool { err = cond(); return err == nil }) {
		c.fatalf("timed out after %s waiting for %s: %v", limit, what, err)
	}
	return time.Since(t0)
}

// fatalf fails with the tails of every master's log and the state of every process.
func (c *foCluster) fatalf(format string, args ...any) {
	c.tb.Helper()
	var sb strings.Builder
	fmt.Fprintf(&sb, format, args...)
	for _, m := range c.masters {
		fmt.Fprintf(&sb, "\n--- %s (running %v), last lines of %s:\n%s", m.id, m.alive(), m.Log, foTail(m.Log, 25))
	}
	for _, a := range c.agents {
		if !a.alive() {
			fmt.Fprintf(&sb, "\n--- agent %s exited, last lines:\n%s", a.Name, foTail(a.Log, 15))
		}
	}
	c.tb.Fatal(sb.String())
}

func foTail(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// consistentRead is a ListNodes that only a verified leader answers.
func (c *foCluster) consistentRead(m *foMaster) error {
	ctx, cancel := context.WithTimeout(context.Background(), failoverRPCLimit)
	defer cancel()
	_, err := ginv1.NewTopologyServiceClient(m.conn).ListNodes(ctx,
		&ginv1.ListNodesRequest{Consistency: ginv1.ReadConsistency_READ_CONSISTENCY_CONSISTENT})
	return err
}

// waitWhole waits until the cluster is whole and returns its state: every
// process runs; the three masters agree on one leader and list three
// members; every follower has applied the leader's commit index; the masters
// together hold a session with every agent; every agent reports one session
// with a master; every node is up on the leader.
func (c *foCluster) waitWhole(what string) foWhole {
	c.tb.Helper()
	var w foWhole
	c.poll(what, wholeWait, wholePoll, time.Now(), func() error {
		var err error
		w, err = c.whole()
		return err
	})
	return w
}

func (c *foCluster) whole() (foWhole, error) {
	for _, p := range c.agents {
		if !p.alive() {
			c.fatalf("agent %s exited", p.Name)
		}
	}
	infos := make([]*ginv1.GetClusterInfoResponse, len(c.masters))
	leader := -1
	for i, m := range c.masters {
		if !m.alive() {
			c.fatalf("master %s exited", m.id)
		}
		ctx, cancel := context.WithTimeout(context.Background(), failoverRPCLimit)
		info, err := ginv1.NewAdminServiceClient(m.conn).GetClusterInfo(ctx, &ginv1.GetClusterInfoRequest{})
		cancel()
		if err != nil {
			return foWhole{}, fmt.Errorf("%s: GetClusterInfo: %w", m.id, err)
		}
		infos[i] = info
		if info.GetRaftState() == "Leader" {
			leader = i
		}
	}
	if leader < 0 {
		return foWhole{}, errors.New("no master is the leader")
	}
	lead := infos[leader]
	for i, info := range infos {
		if info.GetLeaderId() != lead.GetServerId() || len(info.GetMembers()) != 3 {
			return foWhole{}, fmt.Errorf("%s names leader %q with %d members; %s is the leader",
				c.masters[i].id, info.GetLeaderId(), len(info.GetMembers()), lead.GetServerId())
		}
	}
	// The followers caught up with the leader's commit index (read in the
	// same pass; a commit in between only means one more poll).
	for i, info := range infos {
		if i != leader && info.GetAppliedIndex() < lead.GetCommitIndex() {
			return foWhole{}, fmt.Errorf("%s applied %d, the leader committed %d", c.masters[i].id, info.GetAppliedIndex(), lead.GetCommitIndex())
		}
	}
	sessions := 0.0
	for _, m := range c.masters {
		got, err := c.scrape(m.http)
		if err != nil {
			return foWhole{}, fmt.Errorf("%s: %w", m.id, err)
		}
		sessions += got.value("gin_master_connected_agents", "")
	}
	if sessions != float64(c.n) {
		return foWhole{}, fmt.Errorf("the masters hold %v agent sessions, want %d", sessions, c.n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), failoverRPCLimit)
	resp, err := ginv1.NewTopologyServiceClient(c.masters[leader].conn).ListNodes(ctx,
		&ginv1.ListNodesRequest{Consistency: ginv1.ReadConsistency_READ_CONSISTENCY_CONSISTENT})
	cancel()
	if err != nil {
		return foWhole{}, fmt.Errorf("%s: consistent ListNodes: %w", c.masters[leader].id, err)
	}
	up := 0
	for _, nd := range resp.GetNodes() {
		if nd.GetState() == ginv1.NodeState_NODE_STATE_UP {
			up++
		}
	}
	if len(resp.GetNodes()) != c.n || up != c.n {
		return foWhole{}, fmt.Errorf("%d nodes, %d up, want %d up", len(resp.GetNodes()), up, c.n)
	}
	w := foWhole{leader: leader, term: lead.GetTerm()}
	for _, a := range c.agents {
		got, err := c.scrape(a.metrics)
		if err != nil {
			return foWhole{}, fmt.Errorf("agent %s: %w", a.Name, err)
		}
		if got.value("gin_agent_master_connected", "") != 1 {
			return foWhole{}, fmt.Errorf("agent %s reports no session with a master", a.Name)
		}
		w.sent += uint64(got.value("gin_agent_inventories_sent_total", ""))
		w.reconnects += uint64(got.value("gin_agent_master_reconnects_total", ""))
	}
	return w, nil
}

// foMetrics is one scrape of a Prometheus text endpoint: metric name to
// its samples (label text, value).
type foMetrics map[string][]foSample

type foSample struct {
	labels string
	value  float64
}

// value is the sum of the samples of name whose labels contain label
// ("" matches all); 0 when there is none.
func (m foMetrics) value(name, label string) float64 {
	v := 0.0
	for _, s := range m[name] {
		if strings.Contains(s.labels, label) {
			v += s.value
		}
	}
	return v
}

var foSampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)`)

// scrape reads http://addr/metrics.
func (c *foCluster) scrape(addr string) (foMetrics, error) {
	resp, err := c.web.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	out := foMetrics{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "gin_") {
			continue
		}
		m := foSampleRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		out[m[1]] = append(out[m[1]], foSample{labels: m[2], value: v})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func foMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func foMedian(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
