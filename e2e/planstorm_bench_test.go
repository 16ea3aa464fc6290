//go:build linux

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/masteraddr"
)

// BenchmarkPlanFetchStorm measures the DESIGN target "16,384 plan fetches at
// one job start served with p99 ≤ 1 s by three masters" on real processes:
// three gin-master processes (one Raft cluster on loopback, default Raft
// timeouts) and GIN_PLANSTORM_AGENTS (default 16) gin-agent processes with
// simulated DGX H100 nodes, started by startFailoverCluster. The job spans
// those nodes; the number of fetches is the variable.
//
// One iteration is one job start: a fresh job id, F fetchers released at
// once by a barrier, each like one NCCL rank at communicator init: its own
// new gRPC connection to masters[i%3] (so about two thirds of them reach a
// follower, which redirects them while the plan does not exist yet) and
// GetOrCreatePlan(job, nodes), following NOT_LEADER redirects the way
// internal/ncclplugin/fetch.go does (stormFetch reimplements its loop: the
// plugin is package main and cannot be imported). Every fetch's latency is
// taken from the barrier. Every fetcher must get the same content_hash and
// exactly one response may say created=true; the benchmark fails otherwise.
//
// Reported: p50_ms, p99_ms and max_ms over every fetch of every iteration;
// failures (no plan within stormFetchLimit); over_5s, the fetches slower
// than the plugin's default init timeout; and where the time goes:
// dial_p99_ms and connect_p99_ms (barrier to the first attempt's dial
// starting, i.e. the gRPC client set up, and to its TCP connection
// established), computed_ms (barrier to the plan's created_at: the first
// request reached the leader, which computed the plan), committed_ms (barrier
// to the leader's "plan pinned" log line: committed through Raft and
// applied), created_ms (barrier to the answer of the fetch that created it;
// the creator waits for the CPU like the other callers the commit
// releases), client_cpu_ms/fetch and master_cpu_ms/fetch (CPU time of this
// process and of the three masters together during the storm, per fetch),
// redirects/fetch, hinted/fetch (redirects that named the leader in the
// gin-leader-hint header or trailer; without a hint the next master in turn
// is tried, as the plugin does) and listen_drops (TcpExt ListenDrops of
// this network namespace: SYNs or connections the masters' accept queues
// dropped). Every iteration logs the same per job start.
//
// Sub-benchmarks, same cluster, same run:
//
//   - ranks=F (F = GIN_PLANSTORM_RANKS, default 16,384): every rank fetches;
//   - nodes=F/8: one fetch per 8-GPU node, as with the plugin's node cache
//     (one rank per node fetches, the others read the file it writes), the
//     same job size: the baseline.
//
// GIN_PLANSTORM_SHARED_CONNS=k (a diagnostic) makes every fetcher use one of
// k connections per master dialed in advance instead of its own.
//
// Run it with, for instance,
//
//	go test -run '^$' -bench BenchmarkPlanFetchStorm -benchtime=3x -timeout 30m ./e2e/
func BenchmarkPlanFetchStorm(b *testing.B) {
	ranks := benchEnv(b, stormRanksEnv, defaultStormRanks, 1, 1<<20)
	agents := benchEnv(b, stormAgentsEnv, defaultStormAgents, 1, 64)
	shared := benchEnv(b, stormSharedEnv, 0, 0, 1024)
	raiseFileLimit(b, uint64(ranks+stormSpareFDs), fmt.Sprintf("%d concurrent fetches need (lower %s)", ranks, stormRanksEnv))
	bin := binaries(b)
	c := startFailoverCluster(b, bin, agents, nil)
	w := c.waitWhole("the cluster to form with every agent attached")
	var names []string
	for _, a := range c.agents {
		names = append(names, a.Name)
	}
	nodes := hostlist.Compress(names)
	b.Logf("%d masters, %d agents (job nodes %s); leader %s (term %d)", len(c.masters), agents, nodes, c.masters[w.leader].id, w.term)
	pool := stormPool(b, c, shared)
	suffix := ""
	if shared > 0 {
		suffix = fmt.Sprintf(",shared-conns=%d", shared)
	}
	for _, s := range []struct {
		name     string
		fetchers int
	}{
		{fmt.Sprintf("ranks=%d", ranks), ranks},
		{fmt.Sprintf("nodes=%d", max(1, ranks/stormGPUsPerNode)), max(1, ranks/stormGPUsPerNode)},
	} {
		b.Run(s.name+suffix, func(b *testing.B) { benchPlanStorm(b, c, nodes, s.fetchers, pool) })
	}
}

const (
	stormRanksEnv      = "GIN_PLANSTORM_RANKS"
	defaultStormRanks  = 16384
	stormAgentsEnv     = "GIN_PLANSTORM_AGENTS"
	defaultStormAgents = 16
	// stormSharedEnv, when set to k > 0, makes the fetchers share k
	// connections per master, dialed before the first job start, instead of
	// one new connection each: a diagnostic that takes connection setup out
	// of the measurement (not how ranks fetch).
	stormSharedEnv   = "GIN_PLANSTORM_SHARED_CONNS"
	stormGPUsPerNode = 8 // ranks per node: DGX H100
	// stormFetchLimit bounds one fetch, all its attempts together; a fetch
	// without a plan by then is a failure.
	stormFetchLimit = 60 * time.Second
	// stormInitTimeout is the plugin's default NCCL_GIN_INIT_TIMEOUT_MS.
	stormInitTimeout = 5 * time.Second
	// stormDrainWait bounds the wait, after an iteration, until the masters
	// and this process have closed the iteration's connections.
	stormDrainWait = 60 * time.Second
	// stormPause separates iterations: Linux reuses a loopback port in
	// TIME_WAIT (tcp_tw_reuse=2) once its last timestamp is 1 s old.
	stormPause = 2 * time.Second
	// stormSpareFDs is what a process needs beyond one descriptor per
	// connection (Raft, agents, logs, the runtime).
	stormSpareFDs = 512
)

// stormResult is one fetch: times are from the barrier.
type stormResult struct {
	lat      time.Duration // plan in hand (or given up)
	dial     time.Duration // first attempt's dial started (gRPC client set up)
	connect  time.Duration // first attempt's TCP connection established
	hops     int           // redirects followed (NOT_LEADER or Unavailable)
	hinted   int           // of which the answer named the leader (gin-leader-hint)
	servedBy string        // ReadInfo.served_by
	leader   bool          // ReadInfo.leader
	created  bool
	built    time.Duration // the plan's created_at: computed on the leader, about to go through Raft
	hash     string
	err      error
}

// stormFetch is one rank's fetch, internal/ncclplugin/fetch.go's loop kept to
// what the benchmark exercises: a new gRPC connection per attempt, the
// masters tried in turn (here starting at masters[first], where the plugin
// starts every rank at the first of its list), the leader named in the
// gin-leader-hint header or trailer tried next, moving on only on a
// redirect (NOT_LEADER) or Unavailable. Not modelled: the plugin's split of
// its init timeout between the masters and its moving on after a timeout
// (one deadline, stormFetchLimit, bounds all attempts here), and its
// verification of the plan (content hashes are compared instead).
func stormFetch(ctx context.Context, t0 time.Time, addrs []string, first int, req *ginv1.GetOrCreatePlanRequest, pool stormConns, rank int) (r stormResult) {
	queue := make([]string, 0, len(addrs))
	for k := range addrs {
		queue = append(queue, addrs[(first+k)%len(addrs)])
	}
	tried := map[string]bool{}
	var errs []string
	var dialing, connected atomic.Int64 // barrier to the first dial's start and its TCP connection, ns
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		dialing.CompareAndSwap(0, int64(time.Since(t0)))
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err == nil {
			connected.CompareAndSwap(0, int64(time.Since(t0)))
		}
		return conn, err
	}
	defer func() {
		r.lat = time.Since(t0)
		r.dial, r.connect = time.Duration(dialing.Load()), time.Duration(connected.Load())
	}()
	for len(queue) > 0 {
		addr := queue[0]
		queue = queue[1:]
		if tried[addr] {
			continue
		}
		tried[addr] = true
		resp, hint, err := stormCall(ctx, addr, req, dial, pool.pick(addr, rank))
		if err == nil {
			r.servedBy, r.leader = resp.GetRead().GetServedBy(), resp.GetRead().GetLeader()
			r.created, r.hash = resp.GetCreated(), resp.GetPlan().GetContentHash()
			r.built = resp.GetPlan().GetCreatedAt().AsTime().Sub(t0) // wall clocks of one machine
			if resp.GetPlan().GetJobId() != req.GetJobId() {
				r.err = fmt.Errorf("%s sent a plan for job %q", addr, resp.GetPlan().GetJobId())
			}
			return r
		}
		errs = append(errs, fmt.Sprintf("%s: %s: %s", addr, status.Code(err), status.Convert(err).Message()))
		if status.Code(err) != codes.Unavailable && !apierr.IsNotLeader(err) {
			break
		}
		r.hops++
		if hint != "" {
			if h, perr := masteraddr.Parse(hint); perr == nil && !tried[h[0]] {
				r.hinted++
				queue = append([]string{h[0]}, queue...)
			}
		}
	}
	r.err = errors.New(strings.Join(errs, "; "))
	return r
}

// stormCall is one attempt on one new connection, like the plugin's fetchOne.
// A shared connection (GIN_PLANSTORM_SHARED_CONNS) is used instead when given.
func stormCall(ctx context.Context, addr string, req *ginv1.GetOrCreatePlanRequest,
	dial func(context.Context, string) (net.Conn, error), conn *grpc.ClientConn) (*ginv1.GetOrCreatePlanResponse, string, error) {
	if conn == nil {
		var err error
		conn, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)), grpc.WithContextDialer(dial))
		if err != nil {
			return nil, "", status.Error(codes.InvalidArgument, err.Error())
		}
		defer conn.Close()
	}
	var hdr, trl metadata.MD
	resp, err := ginv1.NewPlanServiceClient(conn).GetOrCreatePlan(ctx, req, grpc.Header(&hdr), grpc.Trailer(&trl))
	hint := ""
	for _, md := range []metadata.MD{hdr, trl} {
		if v := md.Get("gin-leader-hint"); len(v) > 0 && v[0] != "" {
			hint = v[0]
		}
	}
	return resp, hint, err
}

// stormConns holds the shared connections per master address (empty: none).
type stormConns map[string][]*grpc.ClientConn

func (p stormConns) pick(addr string, rank int) *grpc.ClientConn {
	if cs := p[addr]; len(cs) > 0 {
		return cs[rank%len(cs)]
	}
	return nil
}

// stormPool dials k connections to each master and waits until they are
// ready; k = 0 returns no pool.
func stormPool(b *testing.B, c *foCluster, k int) stormConns {
	p := stormConns{}
	if k == 0 {
		return p
	}
	for _, m := range c.masters {
		for range k {
			conn, err := grpc.NewClient(m.client, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = conn.Close() })
			conn.Connect()
			p[m.client] = append(p[m.client], conn)
		}
	}
	for addr, cs := range p {
		for _, conn := range cs {
			c.poll("a shared connection to "+addr+" to be ready", 30*time.Second, 20*time.Millisecond, time.Now(), func() error {
				if st := conn.GetState(); st != connectivity.Ready {
					conn.Connect()
					return fmt.Errorf("state %s", st)
				}
				return nil
			})
		}
	}
	return p
}

func benchPlanStorm(b *testing.B, c *foCluster, nodes string, fetchers int, pool stormConns) {
	var addrs []string
	for _, m := range c.masters {
		addrs = append(addrs, m.client)
	}
	baseFDs := stormFDs(c)
	var lat, connect, dialStart []float64
	var clientCPU, masterCPU float64
	var pinnedMs, builtMs, committedMs []float64
	var failures, slow, hops, hinted, drops int
	iter := 0
	for b.Loop() {
		iter++
		w := c.waitWhole("the cluster whole with every node up before the job starts")
		job := fmt.Sprintf("storm-%d-%d-%d", fetchers, time.Now().UnixNano(), iter)
		req := &ginv1.GetOrCreatePlanRequest{JobId: job, Nodes: nodes, GpusPerNode: stormGPUsPerNode}
		netBefore := stormNetstat()
		tw := stormTimeWait()

		res := make([]stormResult, fetchers)
		ctx, cancel := context.WithTimeout(context.Background(), stormFetchLimit)
		var ready, done sync.WaitGroup
		start := make(chan struct{})
		var t0 time.Time
		for i := range fetchers {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				ready.Done()
				<-start
				res[i] = stormFetch(ctx, t0, addrs, i%len(addrs), req, pool, i)
			}()
		}
		ready.Wait()
		cpuBefore := stormCPU(c)
		t0 = time.Now() // written before close(start): every fetcher sees it
		close(start)
		finished := make(chan struct{})
		go func() { done.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(stormFetchLimit + 30*time.Second):
			cancel()
			c.fatalf("job %s: fetches still running %s after the barrier", job, stormFetchLimit+30*time.Second)
		}
		wall := time.Since(t0)
		cancel()
		netAfter := stormNetstat()
		cpuAfter := stormCPU(c)
		cpu := map[string]float64{}
		for k, v := range cpuAfter {
			cpu[k] = (v - cpuBefore[k]).Seconds()
		}
		mastersCPU := 0.0
		for _, m := range c.masters {
			mastersCPU += cpu[m.id]
		}

		// Check and summarise.
		var it []float64
		var itConnect, itDial []float64
		created, failed, itSlow, itHops, itHinted, byLeader, byFollower := 0, 0, 0, 0, 0, 0, 0
		var hash, pinned string
		var firstErr error
		pinnedAt, builtAt := time.Duration(0), time.Duration(0)
		for _, r := range res {
			itHops += r.hops
			itHinted += r.hinted
			if r.err != nil {
				failed++
				if firstErr == nil {
					firstErr = r.err
				}
				continue
			}
			if hash == "" {
				hash = r.hash
			}
			if r.hash != hash || r.hash == "" {
				c.fatalf("job %s: content hashes differ: %q and %q", job, hash, r.hash)
			}
			if r.created {
				created++
				pinnedAt, builtAt, pinned = r.lat, r.built, r.servedBy
			}
			if r.leader {
				byLeader++
			} else {
				byFollower++
			}
			if r.lat > stormInitTimeout {
				itSlow++
			}
			it = append(it, foMs(r.lat))
			itConnect = append(itConnect, foMs(r.connect))
			itDial = append(itDial, foMs(r.dial))
		}
		if created > 1 || (created == 0 && failed == 0) {
			c.fatalf("job %s: %d responses say created=true, want exactly 1", job, created)
		}
		if failed > 0 {
			b.Logf("job %s: %d of %d fetches failed; first: %v", job, failed, fetchers, firstErr)
		}
		itDrops := int(netAfter["ListenDrops"] - netBefore["ListenDrops"])
		b.Logf("job start %d (%d fetches, leader %s, %d TIME_WAIT sockets before): p50 %.0f ms, p99 %.0f ms, max %.0f ms, all done after %.0f ms; "+
			"%d failed, %d over %s; created by %s (plan computed %.0f ms after the barrier, the creating fetch answered at %.0f ms); "+
			"first dial started p50 %.0f / p99 %.0f ms, TCP connected p50 %.0f / p99 %.0f ms; "+
			"CPU over the %.2f s: load generator %.2f s, masters %.2f s (leader %.2f s), agents %.2f s, of %.2f s available; "+
			"served by the leader %d, by followers %d; %d redirects (%d with a leader hint); listen-queue drops %d (overflows %d), SYN cookies %d",
			iter, fetchers, c.masters[w.leader].id, tw, stormPct(it, 0.50), stormPct(it, 0.99), stormPct(it, 1), foMs(wall),
			failed, itSlow, stormInitTimeout, pinned, foMs(builtAt), foMs(pinnedAt),
			stormPct(itDial, 0.50), stormPct(itDial, 0.99), stormPct(itConnect, 0.50), stormPct(itConnect, 0.99),
			wall.Seconds(), cpu["benchmark"], mastersCPU, cpu[c.masters[w.leader].id], cpu["agents"], wall.Seconds()*float64(runtime.NumCPU()),
			byLeader, byFollower, itHops, itHinted, itDrops, netAfter["ListenOverflows"]-netBefore["ListenOverflows"],
			netAfter["SyncookiesSent"]-netBefore["SyncookiesSent"])
		lat = append(lat, it...)
		connect = append(connect, itConnect...)
		dialStart = append(dialStart, itDial...)
		clientCPU += cpu["benchmark"]
		masterCPU += mastersCPU
		if created == 1 {
			pinnedMs = append(pinnedMs, foMs(pinnedAt))
			builtMs = append(builtMs, foMs(builtAt))
		}
		if at, ok := stormPinnedAt(c.masters[w.leader].Log, job); ok {
			committedMs = append(committedMs, foMs(at.Sub(t0)))
			b.Logf("job start %d: the leader logged the plan pinned (committed and applied) %.0f ms after the barrier", iter, foMs(at.Sub(t0)))
		}
		failures += failed
		slow += itSlow
		hops += itHops
		hinted += itHinted
		drops += itDrops

		// Let the iteration's connections close before the next one.
		c.poll("the iteration's connections to close", stormDrainWait, 200*time.Millisecond, time.Now(), func() error {
			now := stormFDs(c)
			for k, n := range now {
				if n > baseFDs[k]+64 {
					return fmt.Errorf("%s holds %d descriptors, %d before the first iteration", k, n, baseFDs[k])
				}
			}
			return nil
		})
		time.Sleep(stormPause)
	}
	b.ReportMetric(0, "ns/op") // an iteration includes the waits between job starts
	if len(lat) == 0 {
		b.Fatalf("no fetch succeeded")
	}
	b.ReportMetric(stormPct(lat, 0.50), "p50_ms")
	b.ReportMetric(stormPct(lat, 0.99), "p99_ms")
	b.ReportMetric(stormPct(lat, 1), "max_ms")
	b.ReportMetric(float64(failures), "failures")
	b.ReportMetric(float64(slow), "over_5s")
	b.ReportMetric(stormPct(dialStart, 0.99), "dial_p99_ms")
	b.ReportMetric(stormPct(connect, 0.99), "connect_p99_ms")
	if len(pinnedMs) > 0 {
		b.ReportMetric(foMedian(builtMs), "computed_ms")
		b.ReportMetric(foMedian(pinnedMs), "created_ms")
	}
	if len(committedMs) > 0 {
		b.ReportMetric(foMedian(committedMs), "committed_ms")
	}
	n := float64(len(lat) + failures)
	b.ReportMetric(clientCPU*1e3/n, "client_cpu_ms/fetch")
	b.ReportMetric(masterCPU*1e3/n, "master_cpu_ms/fetch")
	b.ReportMetric(float64(hops)/n, "redirects/fetch")
	b.ReportMetric(float64(hinted)/n, "hinted/fetch")
	b.ReportMetric(float64(drops), "listen_drops")
}

// stormPct is the nearest-rank percentile p (0..1] of xs.
func stormPct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	k := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(k, 0), len(s)-1)]
}

// stormFDs counts the open descriptors of each master and of this process.
func stormFDs(c *foCluster) map[string]int {
	count := func(pid string) int {
		ents, err := os.ReadDir("/proc/" + pid + "/fd")
		if err != nil {
			c.fatalf("count descriptors of pid %s: %v", pid, err)
		}
		return len(ents)
	}
	out := map[string]int{"benchmark": count("self")}
	for _, m := range c.masters {
		if !m.alive() {
			c.fatalf("master %s exited", m.id)
		}
		out[m.id] = count(strconv.Itoa(m.Pid()))
	}
	return out
}

// stormPinnedAt is the time of the leader's "plan pinned" log line for job
// (written once Raft has committed and applied the plan, before any caller
// is answered); slog's text handler writes it with milliseconds.
func stormPinnedAt(logPath, job string) (time.Time, bool) {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return time.Time{}, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "time=") || !strings.Contains(line, `msg="plan pinned" `) || !strings.Contains(line, " job="+job+" ") {
			continue
		}
		ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		t, err := time.Parse(time.RFC3339Nano, ts)
		return t, err == nil
	}
	return time.Time{}, false
}

// stormCPU is the CPU time (user and system) used so far by this process,
// each master and the agents together, from /proc/<pid>/stat (clock ticks).
func stormCPU(c *foCluster) map[string]time.Duration {
	out := map[string]time.Duration{"benchmark": stormProcCPU("self")}
	for _, m := range c.masters {
		out[m.id] = stormProcCPU(strconv.Itoa(m.Pid()))
	}
	for _, a := range c.agents {
		out["agents"] += stormProcCPU(strconv.Itoa(a.Pid()))
	}
	return out
}

// stormClockTick is USER_HZ, 100 on every Linux architecture Go supports.
const stormClockTick = 10 * time.Millisecond

func stormProcCPU(pid string) time.Duration {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count from after ')'.
	rest := string(data)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest) // f[0] is field 3 (state): utime is field 14, stime 15
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * stormClockTick
}

// stormNetstat reads the TcpExt counters of /proc/net/netstat (this network
// namespace; zero when unreadable).
func stormNetstat() map[string]int64 {
	out := map[string]int64{}
	f, err := os.Open("/proc/net/netstat")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var names []string
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "TcpExt:" {
			continue
		}
		if names == nil {
			names = fields[1:]
			continue
		}
		for i, v := range fields[1:] {
			if i < len(names) {
				out[names[i]], _ = strconv.ParseInt(v, 10, 64)
			}
		}
		break
	}
	return out
}

// stormTimeWait is the number of TCP sockets in TIME_WAIT (/proc/net/sockstat).
func stormTimeWait() int {
	data, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "TCP:") {
			continue
		}
		f := strings.Fields(line)
		for i := 1; i+1 < len(f); i++ {
			if f[i] == "tw" {
				n, _ := strconv.Atoi(f[i+1])
				return n
			}
		}
	}
	return -1
}
