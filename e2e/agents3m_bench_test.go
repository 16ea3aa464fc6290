//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/testkit"
)

// BenchmarkThreeMastersAgents measures issue #16's target on real
// processes: three gin-master processes (one Raft cluster on loopback,
// each --memory-limit GIN_LOAD_MEMORY_LIMIT, default 900MiB) and
// GIN_LOAD_AGENTS (default 25,000) simulated agents in this process, each
// with its own gRPC connection and session (the agents of
// BenchmarkMasterTenThousandAgents), each starting at the master its name
// hashes to and following leader hints (a master that does not hold agent
// sessions sends its agents to the leader). The agents run in
// GIN_LOAD_PROCS processes (see akFleet; by default as many as the
// open-file limit needs: 2 for 25,000 here), this one when it is 1.
// Phases:
//
//  1. registration from cold (GIN_LOAD_REGISTER_CONCURRENCY at a time);
//     then where the sessions are, per master;
//  2. loaded: GIN_LOAD_RATE inventory changes per second for
//     GIN_LOAD_WINDOW seconds (default 60) from random agents, heartbeats
//     from all: commit and heartbeat-ack latencies, each master's RSS
//     (VmRSS sampled every second, and VmHWM) and CPU;
//  3. SIGKILL the leader: every agent whose session ends reattaches to
//     another master, the dead one's agents spread over the others by the
//     hash of their names (jittered waits; masteraddr.MoveFrom, gin-agent's own rule; until
//     2026-12-01 they all went to the next master): the time until every
//     agent holds a session again, how many full inventories were re-sent
//     (a Hello the master was not in sync with), the most nodes the leader
//     reports DOWN (polled every 500 ms, and for 3 heartbeat intervals
//     after), and the slowest node list (ListNodes) answered meanwhile;
//     then the killed master is restarted on its data directory;
//  4. back home: the agents away from their home master (on since the
//     end of registration) probe it every GIN_LOAD_HOME_PROBE seconds
//     (default 10, jittered ½–1½×) and return once it reports
//     gin.v1.AgentService SERVING, as gin-agent does (agenthome_test.go):
//     the time until every master holds its hash share within 2 %, how
//     many returned, inventories re-sent, the most nodes DOWN, the probes
//     and health checks per second;
//  5. SIGKILL the follower holding the most sessions, the same figures as
//     in 3.
//
// Run it with, for instance,
//
//	go test -run '^$' -bench BenchmarkThreeMastersAgents -benchtime=1x -timeout 60m ./e2e/
func BenchmarkThreeMastersAgents(b *testing.B) {
	cfg := akConfig{
		agents:      benchEnv(b, akAgentsEnv, 25000, 1, 1<<20),
		rate:        benchEnv(b, akRateEnv, 10, 1, 1000),
		window:      time.Duration(benchEnv(b, akWindowEnv, 60, 1, 3600)) * time.Second,
		concurrency: benchEnv(b, akConcurrencyEnv, 64, 1, 4096),
	}
	memLimit := os.Getenv(mmMemoryLimitEnv)
	if memLimit == "" {
		memLimit = "900MiB"
	}
	homeProbe := time.Duration(benchEnv(b, akHomeProbeEnv, akHomeProbeDefault, 1, 3600)) * time.Second
	procs := akLoadProcs(b, cfg.agents)
	// The masters inherit this process's limit: the highest it can have.
	raiseFileLimitAsRoot(b, uint64((cfg.agents+procs-1)/procs+akSpareFDs))
	bin := binaries(b)
	c := startThreeMasters(b, bin, cfg, memLimit, procs)

	// A session that ends once registered (a leader change under load, a
	// follower that lost the leader, a killed master) reattaches
	// elsewhere, as gin-agent's does; every end and every re-sent
	// inventory is counted and reported.
	c.setReattach(true)
	regDur := c.register()
	cnt := c.counts()
	c.progress("registration: %d sessions ended and reattached, %d inventories re-sent", cnt.Detached, cnt.Resent)
	c.waitAttached("every agent attached and every node up", akAttachWait, time.Now())
	c.progress("registration of %d agents over 3 masters took %.1f s (%.0f nodes/s, %d attempts tried again); sessions per master %v; RSS per master %v MiB",
		cfg.agents, regDur.Seconds(), float64(cfg.agents)/regDur.Seconds(), cnt.Retries, c.sessions(), c.rssMiB())
	// From here on an agent away from its home master returns to it (a
	// leader hint may have sent it away during registration).
	c.setHome(true, homeProbe)
	c.quiesce()

	var w *mmWindow
	for b.Loop() {
		w = c.measure("loaded")
	}

	leaderKill := c.killAndReattach(c.leader(), "the leader")
	homeCnt := c.counts()
	caughtUp := c.restart(leaderKill.killed)
	home := c.waitHome(caughtUp, homeCnt, 0.02, akAttachWait)
	c.quiesce()
	followerKill := c.killAndReattach(c.busiestFollower(), "the follower holding the most sessions")

	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(cfg.agents), "agents")
	b.ReportMetric(float64(procs), "load_procs")
	b.ReportMetric(regDur.Seconds(), "registration_s")
	b.ReportMetric(w.commit.q(0.50), "commit_p50_ms")
	b.ReportMetric(w.commit.q(0.99), "commit_p99_ms")
	b.ReportMetric(w.commit.max(), "commit_max_ms")
	b.ReportMetric(w.hb.q(0.99), "hb_ack_p99_ms")
	b.ReportMetric(float64(w.ended), "window_sessions_ended")
	b.ReportMetric(float64(cnt.Retries), "registration_retries")
	for i, m := range c.masters {
		b.ReportMetric(w.rssMax[i]/(1<<20), fmt.Sprintf("m%d_rss_MiB", i+1))
		b.ReportMetric(w.hwm[i]/(1<<20), fmt.Sprintf("m%d_hwm_MiB", i+1))
		b.ReportMetric(w.cpu[i], fmt.Sprintf("m%d_cpu_s/s", i+1))
		_ = m
	}
	b.ReportMetric(home.took.Seconds(), "home_return_s")
	b.ReportMetric(float64(home.returned), "home_returned")
	b.ReportMetric(float64(home.failed), "home_failed")
	b.ReportMetric(float64(home.resent), "home_resent")
	b.ReportMetric(home.downMax, "home_nodes_down_max")
	b.ReportMetric(home.probeRate, "home_probes/s")
	b.ReportMetric(home.checkRate, "home_checks/s")
	for _, k := range []struct {
		name string
		r    mmKill
	}{{"leader", leaderKill}, {"follower", followerKill}} {
		b.ReportMetric(k.r.reattach.Seconds(), k.name+"_reattach_s")
		b.ReportMetric(k.r.perAgent.q(0.99)/1000, k.name+"_reattach_agent_p99_s")
		b.ReportMetric(float64(k.r.held), k.name+"_sessions_held")
		b.ReportMetric(float64(k.r.resent), k.name+"_resent")
		b.ReportMetric(k.r.downMax, k.name+"_nodes_down_max")
		b.ReportMetric(k.r.readMax, k.name+"_read_max_ms")
		b.ReportMetric(k.r.commit.q(0.99), k.name+"_commit_p99_ms")
	}
}

// mmMemoryLimitEnv sets every master's --memory-limit (default 900MiB).
const mmMemoryLimitEnv = "GIN_LOAD_MEMORY_LIMIT"

// mmMaster is one of the three masters.
type mmMaster struct {
	foProc
	id, addr, http, dataDir string
	snaps                   *akSnapshots
}

// mmCluster is three masters and the simulated agents.
type mmCluster struct {
	b       testing.TB
	cfg     akConfig
	f       *akFleet // the agents
	masters []*mmMaster
	conns   []*grpc.ClientConn // to each master, for reads
	scraper *foCluster         // for scrape only
	start   time.Time
}

// startThreeMasters starts three masters and cfg.agents simulated agents
// (not yet registered) in procs processes.
func startThreeMasters(b testing.TB, bin string, cfg akConfig, memLimit string, procs int) *mmCluster {
	ports := foPorts(b, 9)
	dir := b.TempDir()
	var addrs []string
	for i := range 3 {
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(ports[3*i]))
	}
	c := &mmCluster{b: b, cfg: cfg, start: time.Now(), scraper: &foCluster{tb: b, web: &http.Client{Timeout: 30 * time.Second}}}
	for i := range 3 {
		m := &mmMaster{id: fmt.Sprintf("m%d", i+1), addr: addrs[i], http: "127.0.0.1:" + strconv.Itoa(ports[3*i+2])}
		m.dataDir = filepath.Join(dir, m.id)
		m.foProc = foProc{testkit.Proc{Name: m.id, Log: filepath.Join(dir, m.id+".log"),
			Argv: []string{filepath.Join(bin, "gin-master"), "--node-id", m.id, "--bind", m.addr, "--raft-bind", "127.0.0.1:" + strconv.Itoa(ports[3*i+1]),
				"--http-bind", m.http, "--data-dir", m.dataDir, "--bootstrap-expect", "3", "--join", strings.Join(addrs, ","),
				"--heartbeat-interval", akHeartbeat.String(), "--snapshot-interval", akSnapshotInterval.String(),
				"--memory-limit", memLimit, "--log-level", "info", "--insecure"}}}
		b.Cleanup(func() { m.kill() })
		m.start(b)
		conn, err := grpc.NewClient(m.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = conn.Close() })
		c.masters, c.conns = append(c.masters, m), append(c.conns, conn)
	}
	c.f = startAkFleet(b, cfg, addrs, procs)
	for _, m := range c.masters {
		m.snaps = watchAkSnapshots(b, filepath.Join(m.dataDir, "snapshots"), func(f string, args ...any) { c.progress(m.id+": "+f, args...) })
	}
	c.poll("a leader", akAttachWait, func() error {
		if c.leader() < 0 {
			return errors.New("no leader")
		}
		return nil
	})
	c.progress("3 masters, leader %s, --memory-limit %s; %s; %d agents in %d load processes", c.masters[c.leader()].id, memLimit, akProcLimit(c.masters[0].Pid()), cfg.agents, procs)
	return c
}

func (c *mmCluster) progress(format string, args ...any) { akProgress(c.start, format, args...) }

// counts sums the agents' counters over the load processes.
func (c *mmCluster) counts() akCounts {
	c.b.Helper()
	sum, _, err := c.f.counts()
	if err != nil {
		c.fatalf("agent counts: %v", err)
	}
	return sum
}

func (c *mmCluster) setReattach(on bool) {
	c.b.Helper()
	if err := c.f.setReattach(on); err != nil {
		c.fatalf("%v", err)
	}
}

// register attaches every agent (GIN_LOAD_REGISTER_CONCURRENCY handshakes
// at a time over all load processes) and returns the time from the first
// Hello to the last registration done.
func (c *mmCluster) register() time.Duration {
	c.b.Helper()
	t0 := time.Now()
	if err := c.f.register(c.cfg.concurrency); err != nil {
		c.fatalf("registration: %v", err)
	}
	prev, prevAt, lastLog := int64(0), t0, t0
	for {
		time.Sleep(250 * time.Millisecond)
		cnt := c.counts()
		if cnt.RegErr != "" {
			c.fatalf("registration failed after %d nodes: %s", cnt.Registered, cnt.RegErr)
		}
		if cnt.RegEnd != 0 {
			return time.Unix(0, cnt.RegEnd).Sub(t0)
		}
		if cnt.Failed > 0 {
			c.fatalf("registration: %d agent sessions ended unexpectedly", cnt.Failed)
		}
		if time.Since(t0) > akRegisterWait {
			c.fatalf("registration not done after %s: %d of %d nodes", akRegisterWait, cnt.Registered, c.cfg.agents)
		}
		if now := time.Now(); now.Sub(lastLog) >= 10*time.Second {
			c.progress("registered %d/%d (%.0f/s in the last %.0f s); %d sessions ended and reattached, %d inventories re-sent, %d attempts tried again; RSS per master %v MiB; load %s",
				cnt.Registered, c.cfg.agents, float64(cnt.Registered-prev)/now.Sub(prevAt).Seconds(), now.Sub(prevAt).Seconds(),
				cnt.Detached, cnt.Resent, cnt.Retries, c.rssMiB(), akLoadavg())
			prev, prevAt, lastLog = cnt.Registered, now, now
		}
	}
}

// scrapeAll scrapes every live master (nil for a dead or silent one).
func (c *mmCluster) scrapeAll() []foMetrics {
	out := make([]foMetrics, len(c.masters))
	for i, m := range c.masters {
		if !m.alive() {
			continue
		}
		if got, err := c.scraper.scrape(m.http); err == nil {
			out[i] = got
		}
	}
	return out
}

// leader is the index of the live master that says it leads, -1 for none.
func (c *mmCluster) leader() int {
	for i, m := range c.scrapeAll() {
		if m != nil && m.value("gin_master_raft_state", `state="Leader"`) == 1 {
			return i
		}
	}
	return -1
}

// sessions is the number of agent sessions each master holds.
func (c *mmCluster) sessions() []int {
	out := make([]int, len(c.masters))
	for i, m := range c.scrapeAll() {
		if m != nil {
			out[i] = int(m.value("gin_master_connected_agents", ""))
		}
	}
	return out
}

func (c *mmCluster) rssMiB() []int {
	out := make([]int, len(c.masters))
	for i, m := range c.masters {
		if m.alive() {
			rss, _ := akProcMem(m.Pid())
			out[i] = int(rss / (1 << 20))
		}
	}
	return out
}

// busiestFollower is the live follower holding the most sessions.
func (c *mmCluster) busiestFollower() int {
	lead, best, most := c.leader(), -1, -1
	for i, n := range c.sessions() {
		if i != lead && c.masters[i].alive() && n > most {
			best, most = i, n
		}
	}
	return best
}

func (c *mmCluster) poll(what string, limit time.Duration, cond func() error) {
	c.b.Helper()
	t0 := time.Now()
	var err error
	for time.Since(t0) < limit {
		if n := c.counts().Failed; n > 0 {
			c.fatalf("%d agent sessions ended unexpectedly", n)
		}
		if err = cond(); err == nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	c.fatalf("timed out after %s waiting for %s: %v", limit, what, err)
}

func (c *mmCluster) fatalf(format string, args ...any) {
	c.b.Helper()
	var sb strings.Builder
	fmt.Fprintf(&sb, format, args...)
	// Not c.counts: that fails through here when a load process is gone.
	if cnt, _, err := c.f.counts(); err != nil {
		fmt.Fprintf(&sb, "\nagent counts: %v", err)
	} else if len(cnt.Errs) > 0 {
		fmt.Fprintf(&sb, "\n%d sessions failed, the first: %s", cnt.Failed, strings.Join(cnt.Errs, "; "))
	}
	for _, m := range c.masters {
		fmt.Fprintf(&sb, "\n--- %s (running %v), last lines of %s:\n%s", m.id, m.alive(), m.Log, foTail(m.Log, 20))
	}
	c.b.Fatal(sb.String())
}

// waitAttached waits until the live masters hold one session per agent
// and the leader has every node up.
func (c *mmCluster) waitAttached(what string, limit time.Duration, t0 time.Time) time.Duration {
	n := float64(c.cfg.agents)
	c.poll(what, limit, func() error {
		ms := c.scrapeAll()
		total, up := 0.0, -1.0
		for _, m := range ms {
			if m == nil {
				continue
			}
			total += m.value("gin_master_connected_agents", "")
			if m.value("gin_master_raft_state", `state="Leader"`) == 1 {
				up = m.value("gin_master_nodes", `state="up"`)
			}
		}
		if total != n || up != n {
			return fmt.Errorf("%v sessions, %v nodes up on the leader", total, up)
		}
		return nil
	})
	d := time.Since(t0)
	c.progress("%s after %.1f s; sessions per master %v", what, d.Seconds(), c.sessions())
	return d
}

// quiesce waits until no master has started a snapshot for akQuiet and
// every agent has heartbeated since.
func (c *mmCluster) quiesce() {
	c.poll("snapshots to finish", akSnapshotWait, func() error {
		for _, m := range c.masters {
			if m.alive() && m.snaps.quietFor() < akQuiet {
				return fmt.Errorf("%s took a snapshot %.0f s ago", m.id, m.snaps.quietFor().Seconds())
			}
		}
		return nil
	})
	time.Sleep(akSettle)
}

// mmWindow is the loaded window's figures, per master where they differ.
type mmWindow struct {
	*akWindow
	rssMax, hwm, cpu []float64
	sent, skipped    int   // changes asked for, ticks skipped (agent busy)
	ended, resent    int64 // sessions that ended in the window, inventories re-sent
}

// measure runs the loaded window: changes at cfg.rate from random agents,
// heartbeats from all; every master's RSS sampled every second.
func (c *mmCluster) measure(name string) *mmWindow {
	c.b.Helper()
	n := len(c.masters)
	w := &mmWindow{rssMax: make([]float64, n), hwm: make([]float64, n), cpu: make([]float64, n)}
	cnt0 := c.counts()
	cpu0 := make([]float64, n)
	for i, m := range c.masters {
		cpu0[i] = akProcCPU(m.Pid())
	}
	t0 := time.Now()
	if err := c.f.begin(true); err != nil {
		c.fatalf("%s: %v", name, err)
	}
	c.progress("%s window: %d changes/s for %s from %d agents; load %s", name, c.cfg.rate, c.cfg.window, c.cfg.agents, akLoadavg())
	tick := time.NewTicker(time.Second / time.Duration(c.cfg.rate))
	sample := time.NewTicker(time.Second)
	end := time.After(c.cfg.window)
loop:
	for {
		select {
		case <-tick.C:
			ok, err := c.f.change(rand.IntN(c.cfg.agents))
			if err != nil {
				c.fatalf("%s: %v", name, err)
			}
			if ok {
				w.sent++
			} else {
				w.skipped++
			}
		case <-sample.C:
			for i, m := range c.masters {
				rss, _ := akProcMem(m.Pid())
				w.rssMax[i] = max(w.rssMax[i], rss)
			}
		case <-end:
			break loop
		}
	}
	tick.Stop()
	sample.Stop()
	elapsed := time.Since(t0)
	for i, m := range c.masters {
		rss, hwm := akProcMem(m.Pid())
		w.rssMax[i], w.hwm[i] = max(w.rssMax[i], rss), hwm
		w.cpu[i] = (akProcCPU(m.Pid()) - cpu0[i]) / elapsed.Seconds()
	}
	var err error
	if w.akWindow, err = c.f.end(akAckWait); err != nil {
		c.fatalf("%s: %v", name, err)
	}
	cnt := c.counts()
	w.ended, w.resent = cnt.Detached-cnt0.Detached, cnt.Resent-cnt0.Resent
	if cnt.Failed > 0 {
		c.fatalf("%s: %d agent sessions ended unexpectedly", name, cnt.Failed)
	}
	var rt []string
	for _, m := range c.masters {
		r := akRuntimeMetrics(c.scraper.web, m.http)
		rt = append(rt, fmt.Sprintf("%s: heap in use %.0f MiB, stacks %.0f MiB, %v goroutines, next GC %.0f MiB",
			m.id, r["go_memstats_heap_inuse_bytes"]/(1<<20), r["go_memstats_stack_inuse_bytes"]/(1<<20), r["go_goroutines"], r["go_memstats_next_gc_bytes"]/(1<<20)))
	}
	c.progress("%s: %d sessions ended and reattached in the window (a change in flight on one is not counted), %d inventories re-sent", name, w.ended, w.resent)
	c.progress("%s: %d changes sent (%d skipped), %d acked: commit p50 %.1f ms, p99 %.1f ms, max %.1f ms; heartbeat acks %d of %d, p99 %.1f ms, max %.1f ms; "+
		"RSS max per master %.0f / %.0f / %.0f MiB (HWM %.0f / %.0f / %.0f), CPU %.3f / %.3f / %.3f s/s; sessions %v; %s; load %s",
		name, w.sent, w.skipped, w.commit.n(), w.commit.q(0.5), w.commit.q(0.99), w.commit.max(), w.hb.n(), w.hbSent.Load(), w.hb.q(0.99), w.hb.max(),
		w.rssMax[0]/(1<<20), w.rssMax[1]/(1<<20), w.rssMax[2]/(1<<20), w.hwm[0]/(1<<20), w.hwm[1]/(1<<20), w.hwm[2]/(1<<20),
		w.cpu[0], w.cpu[1], w.cpu[2], c.sessions(), strings.Join(rt, "; "), akLoadavg())
	if w.commit.n() == 0 {
		c.fatalf("%s: no change was committed", name)
	}
	return w
}

// mmKill is what one master's death did.
type mmKill struct {
	killed    int
	held      int           // sessions it held
	before    []int         // sessions per master before the kill
	after     []int         // and once every agent had reattached
	reattach  time.Duration // until every agent held a session again
	detached  int64         // sessions that ended meanwhile
	resent    int64         // full inventories re-sent
	downMax   float64       // most nodes the leader reported DOWN
	readMax   float64       // slowest ListNodes answered meanwhile, ms
	commit    *akSamples    // changes committed meanwhile (GIN_LOAD_RATE/s from random agents)
	perAgent  *akSamples    // each reattached agent's time from its session's end, ms
	sent      int           // changes asked for meanwhile
	changeErr error         // the first failure to ask for one
}

// killAndReattach SIGKILLs master i and waits until every agent holds a
// session with a live master again, then watches for 3 heartbeat
// intervals more for nodes marked down.
func (c *mmCluster) killAndReattach(i int, what string) mmKill {
	c.b.Helper()
	m := c.masters[i]
	before := c.sessions()
	held := before[i]
	r := mmKill{killed: i, held: held, before: before}
	cnt0 := c.counts()
	if _, err := c.f.reattachTimes(true); err != nil {
		c.fatalf("%v", err)
	}
	c.progress("SIGKILL %s (%s, %d sessions)", m.id, what, held)
	// Changes go on at GIN_LOAD_RATE from random agents while the agents
	// reattach (an agent without a session skips its turn; a change on a
	// session that ends is dropped, not counted).
	if err := c.f.begin(false); err != nil {
		c.fatalf("%v", err)
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Second / time.Duration(c.cfg.rate))
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				ok, err := c.f.change(rand.IntN(c.cfg.agents))
				if err != nil {
					r.changeErr = err
					return
				}
				if ok {
					r.sent++
				}
			}
		}
	}()
	t0 := time.Now()
	if !m.kill() {
		c.fatalf("%s did not die within 10 s of SIGKILL", m.id)
	}
	watch := func() error {
		ms := c.scrapeAll()
		total := 0.0
		for _, x := range ms {
			if x == nil {
				continue
			}
			total += x.value("gin_master_connected_agents", "")
			if x.value("gin_master_raft_state", `state="Leader"`) == 1 {
				r.downMax = max(r.downMax, x.value("gin_master_nodes", `state="down"`))
			}
		}
		if d := c.readNodes(i); d > r.readMax {
			r.readMax = d
		}
		if total != float64(c.cfg.agents) {
			return fmt.Errorf("%v sessions on the live masters", total)
		}
		return nil
	}
	c.poll(fmt.Sprintf("every agent reattached after killing %s", m.id), akAttachWait, watch)
	r.reattach = time.Since(t0)
	r.after = c.sessions()
	after := time.Now()
	for time.Since(after) < 3*akHeartbeat {
		_ = watch()
		time.Sleep(500 * time.Millisecond)
	}
	close(stop)
	<-stopped
	if r.changeErr != nil {
		c.fatalf("changes while the agents reattached: %v", r.changeErr)
	}
	w, err := c.f.end(akAckWait)
	if err != nil {
		c.fatalf("after the reattach: %v", err)
	}
	r.commit = &w.commit
	if r.perAgent, err = c.f.reattachTimes(false); err != nil {
		c.fatalf("%v", err)
	}
	cnt := c.counts()
	r.detached, r.resent = cnt.Detached-cnt0.Detached, cnt.Resent-cnt0.Resent
	c.progress("killed %s (%s): %d sessions reattached in %.1f s (per agent p50 %.1f s, p99 %.1f s, max %.1f s); %d inventories re-sent; "+
		"at most %.0f nodes DOWN on the leader; slowest node list %.0f ms; %d changes committed meanwhile, p50 %.1f ms, p99 %.1f ms, max %.1f ms; sessions now %v; RSS %v MiB",
		m.id, what, r.perAgent.n(), r.reattach.Seconds(), r.perAgent.q(0.5)/1000, r.perAgent.q(0.99)/1000, r.perAgent.max()/1000,
		r.resent, r.downMax, r.readMax, w.commit.n(), w.commit.q(0.5), w.commit.q(0.99), w.commit.max(), c.sessions(), c.rssMiB())
	return r
}

// readNodes lists the nodes on a live master other than dead (stale reads
// allowed) and returns how long it took in ms (NaN when it failed).
func (c *mmCluster) readNodes(dead int) float64 {
	for i, conn := range c.conns {
		if i == dead || !c.masters[i].alive() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t0 := time.Now()
		_, err := ginv1.NewTopologyServiceClient(conn).ListNodes(ctx, &ginv1.ListNodesRequest{Nodes: "ak00000"})
		cancel()
		if err != nil {
			return math.NaN()
		}
		return float64(time.Since(t0)) / float64(time.Millisecond)
	}
	return math.NaN()
}

// restart starts master i again on its data directory and waits until it
// has caught up with the leader; it returns when that was (the caller
// waits for the snapshots, c.quiesce, when it needs them over).
func (c *mmCluster) restart(i int) time.Time {
	m := c.masters[i]
	m.start(c.b)
	t0 := time.Now()
	c.poll(m.id+" caught up after its restart", akAttachWait, func() error {
		ms := c.scrapeAll()
		lead := -1
		for j, x := range ms {
			if x != nil && x.value("gin_master_raft_state", `state="Leader"`) == 1 {
				lead = j
			}
		}
		if lead < 0 || ms[i] == nil {
			return errors.New("no leader, or the restarted master does not answer yet")
		}
		commit, applied := ms[lead].value("gin_master_raft_commit_index", ""), ms[i].value("gin_master_raft_applied_index", "")
		if applied+10 < commit {
			return fmt.Errorf("%s applied %v of the leader's %v", m.id, applied, commit)
		}
		return nil
	})
	c.progress("%s restarted and caught up in %.1f s; RSS %v MiB", m.id, time.Since(t0).Seconds(), c.rssMiB())
	return time.Now()
}

// raiseFileLimitAsRoot raises this process's open-file limit to need:
// the soft limit to the hard one, and the hard one too where the process
// may (root with CAP_SYS_RESOURCE); the masters, started from this
// process, inherit it.
func raiseFileLimitAsRoot(b *testing.B, need uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	if lim.Max < need {
		want := syscall.Rlimit{Cur: need, Max: need}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err == nil {
			return
		}
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	if lim.Cur < need {
		b.Fatalf("open-file limit %d (hard, not raisable here: no CAP_SYS_RESOURCE) is below the %d this benchmark needs: "+
			"lower %s to %d or less", lim.Cur, need, akAgentsEnv, lim.Cur-akSpareFDs)
	}
}
