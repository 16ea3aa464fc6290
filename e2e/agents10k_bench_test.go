//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/inventory"
	"github.com/gin-topology/gin/internal/masteraddr"
	"github.com/gin-topology/gin/internal/testkit"
)

// BenchmarkMasterTenThousandAgents measures the DESIGN target "one 2-core
// machine runs a leader holding 10,000 agents (one gRPC stream each, 5 s
// heartbeats); inventory-change commit p99 ≤ 50 ms under that load; leader
// RSS ≤ 2 GiB" on a real gin-master process (single master, one-voter Raft
// cluster on a fresh data directory, fsync on every commit).
//
// The load generator runs in this process: GIN_LOAD_AGENTS (default 10,000)
// simulated agents, each with its own gRPC connection and one
// AgentService.Session, like gin-agent: Hello, full inventory at generation
// 1 (a simulated DGX H100, collected once and re-identified per node: name,
// machine id, GPU UUIDs and serials, HCA and port GUIDs, LIDs, GIDs, MACs and
// addresses), then a heartbeat every interval the master names (5 s), the
// first one at a random offset, and inventory changes sent as an
// InventoryDelta against the acknowledged generation, as the agent's delta
// encoder does. Registration runs GIN_LOAD_REGISTER_CONCURRENCY (default 64)
// sessions' handshakes at a time.
//
// Phases, one master, one run:
//
//  1. registration: every agent attaches and its inventory is committed
//     (registration_s: first Hello to the last InventoryAck, with the
//     master's CPU seconds per node); then the master's
//     gin_master_connected_agents and gin_master_nodes{state="up"} must
//     reach N;
//  2. loaded: all N sessions heartbeating; for GIN_LOAD_WINDOW seconds
//     (default 120), GIN_LOAD_RATE (default 10) changes per second from
//     random agents (open loop: one every 1/rate; an agent with a change in
//     flight is skipped): GPU0's NVLink 0 down or up again as the next
//     generation, latency from Send to the InventoryAck. Over the same
//     window: the master's CPU seconds (utime+stime of /proc/<pid>/stat) per
//     second, heartbeat-ack latency (every heartbeat of every agent), this
//     process's own CPU (the load generator shares the two vCPUs) and the
//     rest of the machine's (from /proc/stat: other processes would show
//     there); the master's VmRSS is sampled every second, and on after the
//     window (heartbeats only) until the master has completed a garbage
//     collection since the window began, so that the maximum includes a heap
//     grown to its GC goal; VmHWM is the peak since the master started,
//     registration included;
//  3. baseline: all sessions are closed but GIN_LOAD_BASELINE_AGENTS
//     (default 100); once the master has marked the others DOWN (missed
//     heartbeats, one Raft entry each) and its snapshot activity is over,
//     the same change measurement from the remaining agents: same master,
//     same N nodes registered (the others DOWN).
//
// The master runs with --snapshot-interval 5s (default 2 m) so that the Raft
// snapshots which the registration and the DOWN marking trigger (threshold
// 8192 entries) are taken before a window starts rather than at a random
// time in it; snapshots are watched in the data directory and reported, and
// a window in which one starts fails. GIN_LOAD_MASTER_ENV=K=V,K=V adds to
// the master's environment only (GODEBUG=gctrace=1: its GC lines are
// printed after each window; GOMEMLIMIT=...).
//
// Run it with, for instance,
//
//	go test -run '^$' -bench BenchmarkMasterTenThousandAgents -benchtime=1x -timeout 40m ./e2e/
func BenchmarkMasterTenThousandAgents(b *testing.B) {
	cfg := akConfig{
		agents:      benchEnv(b, akAgentsEnv, 10000, 1, 1<<20),
		baseline:    benchEnv(b, akBaselineEnv, 100, 1, 1<<20),
		rate:        benchEnv(b, akRateEnv, 10, 1, 1000),
		window:      time.Duration(benchEnv(b, akWindowEnv, 120, 1, 3600)) * time.Second,
		concurrency: benchEnv(b, akConcurrencyEnv, 64, 1, 4096),
	}
	cfg.baseline = min(cfg.baseline, cfg.agents)
	raiseFileLimit(b, uint64(cfg.agents+akSpareFDs), fmt.Sprintf("%d agent connections need, in this process and in the master (lower %s)", cfg.agents, akAgentsEnv))
	bin := binaries(b)
	l := startAkLoad(b, bin, cfg)

	// Phase 1: registration.
	regDur, regCPU := l.register()
	l.waitMaster(fmt.Sprintf("%d agents attached and %d nodes up", cfg.agents, cfg.agents), akAttachWait, func(m foMetrics) error {
		agents, up := m.value("gin_master_connected_agents", ""), m.value("gin_master_nodes", `state="up"`)
		if agents != float64(cfg.agents) || up != float64(cfg.agents) {
			return fmt.Errorf("%v agents attached, %v nodes up", agents, up)
		}
		return nil
	})
	l.progress("all %d agents attached; registration took %.1f s (%.0f nodes/s)", cfg.agents, regDur.Seconds(), float64(cfg.agents)/regDur.Seconds())
	l.quiesce()

	// Phase 2: every stream open.
	var loaded *akWindow
	for b.Loop() {
		loaded = l.measure("loaded", l.agents, true)
	}

	// Phase 3: baseline, the same master with only cfg.baseline streams.
	for _, a := range l.agents[cfg.baseline:] {
		a.close()
	}
	down := cfg.agents - cfg.baseline
	l.waitMaster(fmt.Sprintf("%d sessions left and %d nodes marked down", cfg.baseline, down), akDownWait, func(m foMetrics) error {
		agents, d := m.value("gin_master_connected_agents", ""), m.value("gin_master_nodes", `state="down"`)
		if agents != float64(cfg.baseline) || d != float64(down) {
			return fmt.Errorf("%v agents attached, %v nodes down", agents, d)
		}
		return nil
	})
	l.quiesce()
	base := l.measure("baseline", l.agents[:cfg.baseline], false)

	b.ReportMetric(0, "ns/op") // one iteration is one measurement window
	b.ReportMetric(float64(cfg.agents), "agents")
	b.ReportMetric(regDur.Seconds(), "registration_s")
	b.ReportMetric(regCPU*1000/float64(cfg.agents), "reg_master_cpu_ms/node")
	b.ReportMetric(loaded.commit.q(0.50), "commit_p50_ms")
	b.ReportMetric(loaded.commit.q(0.99), "commit_p99_ms")
	b.ReportMetric(loaded.commit.max(), "commit_max_ms")
	b.ReportMetric(base.commit.q(0.50), "base_commit_p50_ms")
	b.ReportMetric(base.commit.q(0.99), "base_commit_p99_ms")
	b.ReportMetric(base.commit.max(), "base_commit_max_ms")
	b.ReportMetric(loaded.commit.q(0.99)/base.commit.q(0.99), "commit_p99_ratio")
	b.ReportMetric(loaded.hb.q(0.99), "hb_ack_p99_ms")
	b.ReportMetric(loaded.rssMax/(1<<20), "master_rss_MiB")
	b.ReportMetric(loaded.hwm/(1<<20), "master_hwm_MiB")
	b.ReportMetric(loaded.gcGoal/(1<<20), "master_gc_goal_MiB")
	b.ReportMetric(loaded.cpu, "master_cpu_s/s")
	b.ReportMetric(base.cpu, "base_master_cpu_s/s")
	b.ReportMetric(loaded.selfCPU, "loadgen_cpu_s/s")
	b.ReportMetric(loaded.otherCPU, "other_cpu_s/s")
	b.ReportMetric(loaded.load1, "loadavg1")
}

const (
	akAgentsEnv      = "GIN_LOAD_AGENTS"
	akBaselineEnv    = "GIN_LOAD_BASELINE_AGENTS"
	akRateEnv        = "GIN_LOAD_RATE"
	akWindowEnv      = "GIN_LOAD_WINDOW" // seconds
	akConcurrencyEnv = "GIN_LOAD_REGISTER_CONCURRENCY"
	// akMasterEnv adds K=V,K=V to the master's environment only (for
	// instance GODEBUG=gctrace=1 or GOMEMLIMIT=1800MiB).
	akMasterEnv = "GIN_LOAD_MASTER_ENV"
	// akMasterArgsEnv replaces the master's --insecure with other flags
	// (for instance "--insecure --memory-limit 900MiB").
	akMasterArgsEnv = "GIN_LOAD_MASTER_ARGS"

	akHeartbeat = 5 * time.Second
	// Bounds of the waits; generous: a failure to get there is a finding.
	akRegisterWait = 30 * time.Minute
	akAttachWait   = 5 * time.Minute
	akDownWait     = 10 * time.Minute
	akSnapshotWait = 5 * time.Minute
	akAckWait      = 60 * time.Second // outstanding changes after a window
	akGCWait       = 10 * time.Minute
	// akSnapshotInterval is the master's --snapshot-interval; akQuiet is how
	// long no snapshot may start before a window (the check runs every
	// interval to twice the interval).
	akSnapshotInterval = 5 * time.Second
	akQuiet            = 3 * akSnapshotInterval
	// akSettle lets every agent heartbeat at least once between phases.
	akSettle = akHeartbeat + time.Second
	// akSpareFDs is what a process needs beyond one descriptor per
	// connection (Raft, WAL segments, logs, the runtime).
	akSpareFDs = 1024
	akCluster  = "agents10k"
)

type akConfig struct {
	agents, baseline, rate, concurrency int
	window                              time.Duration
	// first is the index of the first agent (agents first ..
	// first+agents-1): a part of a load split over processes.
	first int
}

// akLoad is the master under test and the simulated agents.
type akLoad struct {
	b        testing.TB
	cfg      akConfig
	master   *foProc
	addr     string
	httpAddr string
	dataDir  string
	scraper  *foCluster // for scrape only
	tmpl     *ginv1.NodeInventory
	agents   []*akAgent
	start    time.Time

	// Heartbeat-ack and commit latencies are recorded while rec is set.
	recMu  sync.Mutex
	rec    *akWindow
	failed atomic.Int64 // sessions that ended unexpectedly
	errMu  sync.Mutex
	errs   []string

	snaps *akSnapshots

	// addrs are the masters' client addresses (one for this benchmark;
	// BenchmarkThreeMastersAgents has three); creds gives an agent's
	// transport credentials.
	addrs []string
	creds func(agent string) credentials.TransportCredentials
	// reattach lets sessions that end reattach to another master (set
	// while masters are killed); resent counts the full inventories
	// reattaching agents had to send, detached the sessions that ended.
	reattach   atomic.Bool
	regRetries atomic.Int64 // registration attempts tried again
	resent     atomic.Int64
	detached   atomic.Int64
	reattachT  akSamples // time from a session's end to its reattachment

	// Returning home (agenthome_test.go): home turns it on, homeProbe is
	// the probe interval (ns), homeChk the shared health view of each
	// master (made by setHome under homeMu); returned counts the agents
	// back at home, homeFailed the returns home did not take (the agent
	// stayed where it was),
	// homeProbes the agents' probes and homeChecks the health checks sent.
	home       atomic.Bool
	homeProbe  atomic.Int64
	homeMu     sync.Mutex
	homeChk    []*akHomeCheck
	returned   atomic.Int64
	homeFailed atomic.Int64
	homeProbes atomic.Int64
	homeChecks atomic.Int64
}

// reattached records one agent's reattachment after d.
func (l *akLoad) reattached(d time.Duration) { l.reattachT.add(d) }

func startAkLoad(b *testing.B, bin string, cfg akConfig) *akLoad {
	return startAkLoadWith(b, bin, cfg, akMasterArgs(b))
}

// startAkLoadWith is startAkLoad with the master's flags beyond the
// benchmark's own.
func startAkLoadWith(b *testing.B, bin string, cfg akConfig, args []string) *akLoad {
	return startAkLoadEnv(b, bin, cfg, args, os.Getenv(akMasterEnv))
}

// startAkLoadEnv is startAkLoadWith with env ("K=V,K=V") added to the
// master's environment instead of GIN_LOAD_MASTER_ENV.
func startAkLoadEnv(b *testing.B, bin string, cfg akConfig, args []string, env string) *akLoad {
	ports := foPorts(b, 3)
	dir := b.TempDir()
	addr, httpAddr, dataDir := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[2]), filepath.Join(dir, "m1")
	master := &foProc{testkit.Proc{Name: "m1", Log: filepath.Join(dir, "m1.log"),
		Argv: append([]string{filepath.Join(bin, "gin-master"), "--node-id", "m1", "--bind", addr, "--raft-bind", "127.0.0.1:" + strconv.Itoa(ports[1]),
			"--http-bind", httpAddr, "--data-dir", dataDir, "--heartbeat-interval", akHeartbeat.String(),
			"--snapshot-interval", akSnapshotInterval.String(), "--log-level", "info"}, args...)}}
	b.Cleanup(func() { master.kill() })
	akStartWithEnv(b, master, env)
	l := newAkLoad(b, cfg, master, addr, httpAddr)
	l.dataDir = dataDir
	l.snaps = watchAkSnapshots(b, filepath.Join(l.dataDir, "snapshots"), l.progress)
	l.waitMaster("the master to lead", akAttachWait, func(m foMetrics) error {
		if m.value("gin_master_raft_state", `state="Leader"`) != 1 {
			return errors.New("not the leader yet")
		}
		return nil
	})
	l.progress("gin-master pid %d on %s; %s", l.master.Pid(), l.addr, akProcLimit(l.master.Pid()))
	return l
}

// akMasterArgs are the master's flags beyond the benchmark's own:
// GIN_LOAD_MASTER_ARGS (space-separated), else --insecure.
func akMasterArgs(b *testing.B) []string {
	if v := os.Getenv(akMasterArgsEnv); v != "" {
		fmt.Fprintf(os.Stderr, "agents10k: master flags %s\n", v)
		return strings.Fields(v)
	}
	return []string{"--insecure"}
}

// newAkLoad is the simulated agents (and their template inventory) of a
// load on master (client address addr, metrics on httpAddr), plaintext.
func newAkLoad(b testing.TB, cfg akConfig, master *foProc, addr, httpAddr string) *akLoad {
	l := &akLoad{b: b, cfg: cfg, start: time.Now(), master: master, addr: addr, httpAddr: httpAddr,
		scraper: &foCluster{tb: b, web: &http.Client{Timeout: 30 * time.Second}},
		creds:   func(string) credentials.TransportCredentials { return insecure.NewCredentials() },
	}
	l.addrs = []string{l.addr}
	src, err := sim.NewSource("dgx-h100", sim.NodeOptions{NodeName: "template", Cluster: akCluster})
	if err != nil {
		b.Fatal(err)
	}
	if l.tmpl, err = src.Collect(context.Background()); err != nil {
		b.Fatal(err)
	}
	// The re-identified inventories must be valid and distinct.
	x, y := akInventory(l.tmpl, 0, 0), akInventory(l.tmpl, 1, 2)
	for _, inv := range []*ginv1.NodeInventory{x, y} {
		if err := inventory.Validate(inv); err != nil {
			b.Fatal(err)
		}
	}
	if x.Gpus[0].Uuid == y.Gpus[0].Uuid || x.Host.MachineId == y.Host.MachineId || proto.Equal(x.Gpus[0], y.Gpus[0]) {
		b.Fatal("re-identified inventories share identities")
	}
	for i := cfg.first; i < cfg.first+cfg.agents; i++ {
		l.agents = append(l.agents, &akAgent{l: l, idx: i, name: fmt.Sprintf("ak%05d", i)})
	}
	b.Cleanup(func() {
		for _, a := range l.agents {
			a.close()
		}
	})
	return l
}

// akStartWithEnv starts p with the variables of spec ("K=V,K=V") added to
// the environment it inherits; this process's own are restored at once (the
// Go runtime reads GOGC and GOMEMLIMIT only when it starts).
func akStartWithEnv(b *testing.B, p *foProc, spec string) {
	type saved struct {
		k, v string
		ok   bool
	}
	var restore []saved
	for kv := range strings.SplitSeq(spec, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			b.Fatalf("%s=%q: want K=V,K=V", akMasterEnv, spec)
		}
		old, had := os.LookupEnv(k)
		restore = append(restore, saved{k, old, had})
		if err := os.Setenv(k, v); err != nil {
			b.Fatal(err)
		}
	}
	p.start(b)
	for _, r := range slices.Backward(restore) {
		if r.ok {
			_ = os.Setenv(r.k, r.v)
		} else {
			_ = os.Unsetenv(r.k)
		}
	}
	if spec != "" {
		fmt.Fprintf(os.Stderr, "agents10k: master started with %s\n", spec)
	}
}

// progress prints at once (b.Logf prints when the benchmark ends).
func (l *akLoad) progress(format string, args ...any) { akProgress(l.start, format, args...) }

// akProgress prints a progress line of a load started at start.
func akProgress(start time.Time, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "agents10k %6.1fs: %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
}

func (l *akLoad) fatalf(format string, args ...any) {
	l.b.Helper()
	msg := fmt.Sprintf(format, args...)
	l.errMu.Lock()
	if len(l.errs) > 0 {
		msg += fmt.Sprintf("\n%d sessions failed, the first: %s", l.failed.Load(), strings.Join(l.errs, "; "))
	}
	l.errMu.Unlock()
	l.b.Fatalf("%s\n--- master (running %v), last lines of %s:\n%s", msg, l.master.alive(), l.master.Log, foTail(l.master.Log, 30))
}

func (l *akLoad) sessionFailed(a *akAgent, err error) {
	l.failed.Add(1)
	l.errMu.Lock()
	if len(l.errs) < 5 {
		l.errs = append(l.errs, a.name+": "+err.Error())
	}
	l.errMu.Unlock()
}

func (l *akLoad) checkHealthy() {
	l.b.Helper()
	if !l.master.alive() {
		l.fatalf("the master exited")
	}
	if n := l.failed.Load(); n > 0 {
		l.fatalf("%d agent sessions ended unexpectedly", n)
	}
}

// waitMaster scrapes the master every second until cond holds.
func (l *akLoad) waitMaster(what string, limit time.Duration, cond func(foMetrics) error) {
	l.b.Helper()
	t0 := time.Now()
	last := time.Now()
	for {
		l.checkHealthy()
		m, err := l.scraper.scrape(l.httpAddr)
		if err == nil {
			if err = cond(m); err == nil {
				l.progress("%s after %.1f s", what, time.Since(t0).Seconds())
				return
			}
		}
		if time.Since(t0) > limit {
			l.fatalf("timed out after %s waiting for %s: %v", limit, what, err)
		}
		if time.Since(last) >= 10*time.Second {
			l.progress("waiting for %s: %v", what, err)
			last = time.Now()
		}
		time.Sleep(time.Second)
	}
}

// register attaches every agent (cfg.concurrency handshakes at a time) and
// returns the time from the first Hello to the last InventoryAck and the
// master's CPU seconds meanwhile.
func (l *akLoad) register() (time.Duration, float64) {
	l.b.Helper()
	var done atomic.Int64
	pid := l.master.Pid()
	cpu0, self0, all0, t0 := akProcCPU(pid), akProcCPU(os.Getpid()), akMachineCPU(), time.Now()
	finished := akAttachAll(l.agents, l.cfg.concurrency, &done)
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	deadline := time.After(akRegisterWait)
	prev, prevAt := int64(0), t0
	for {
		select {
		case err := <-finished:
			d := time.Since(t0)
			if err != nil {
				l.fatalf("registration failed after %d nodes: %v", done.Load(), err)
			}
			master, self, all := akProcCPU(pid)-cpu0, akProcCPU(os.Getpid())-self0, akMachineCPU()-all0
			rss, hwm := akProcMem(pid)
			l.progress("registration: %.1f s; CPU seconds: master %.1f (%.2f ms per node), load generator %.1f, the rest of the machine %.1f; master RSS %.0f MiB, HWM %.0f MiB",
				d.Seconds(), master, master*1000/float64(len(l.agents)), self, all-master-self, rss/(1<<20), hwm/(1<<20))
			return d, master
		case <-deadline:
			l.fatalf("registration not done after %s: %d of %d nodes", akRegisterWait, done.Load(), len(l.agents))
		case now := <-tick.C:
			l.checkHealthy()
			n := done.Load()
			rss, _ := akProcMem(l.master.Pid())
			l.progress("registered %d/%d (%.0f/s in the last %.0f s); master RSS %.0f MiB; load %s",
				n, len(l.agents), float64(n-prev)/now.Sub(prevAt).Seconds(), now.Sub(prevAt).Seconds(), rss/(1<<20), akLoadavg())
			prev, prevAt = n, now
		}
	}
}

// akAttachAll attaches agents in the background, concurrency handshakes
// at a time, counting each attached one in done. The channel yields nil
// once every agent is attached, or the first failure (the other workers
// then stop before their next agent).
func akAttachAll(agents []*akAgent, concurrency int, done *atomic.Int64) <-chan error {
	var next atomic.Int64
	var stop atomic.Bool
	var once sync.Once
	var wg sync.WaitGroup
	out := make(chan error, 1)
	for range max(concurrency, 1) {
		wg.Go(func() {
			for !stop.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(agents) {
					return
				}
				if err := agents[i].attach(); err != nil {
					once.Do(func() {
						stop.Store(true)
						out <- fmt.Errorf("%s: %w", agents[i].name, err)
					})
					return
				}
				done.Add(1)
			}
		})
	}
	go func() {
		wg.Wait()
		once.Do(func() { out <- nil })
	}()
	return out
}

// quiesce waits until no snapshot has started for akQuiet and every agent
// has heartbeated since.
func (l *akLoad) quiesce() {
	l.b.Helper()
	t0 := time.Now()
	for {
		l.checkHealthy()
		if l.snaps.quietFor() >= akQuiet {
			break
		}
		if time.Since(t0) > akSnapshotWait {
			l.fatalf("snapshots still being taken %s later", akSnapshotWait)
		}
		time.Sleep(time.Second)
	}
	time.Sleep(akSettle)
	l.checkHealthy()
}

// akWindow is one measurement window.
type akWindow struct {
	commit, hb akSamples
	hbSent     atomic.Int64
	rssMax     float64 // bytes
	hwm        float64 // bytes
	cpu        float64 // master CPU seconds per second
	selfCPU    float64 // this process's
	otherCPU   float64 // the rest of the machine's (kernel threads, other processes)
	gcGoal     float64 // the master's heap goal at the end, bytes
	load1      float64
}

// measure runs one window: changes at cfg.rate from random members of
// from, heartbeats from every open session. With untilGC, the master's RSS
// is sampled on after the window (heartbeats only) until it has completed
// a garbage collection since the window began, so that the maximum includes
// a heap grown to its GC goal (bounded by akGCWait).
func (l *akLoad) measure(name string, from []*akAgent, untilGC bool) *akWindow {
	l.b.Helper()
	pid := l.master.Pid()
	w := &akWindow{}
	before, err := l.scraper.scrape(l.httpAddr)
	if err != nil {
		l.fatalf("scrape: %v", err)
	}
	rt0 := akRuntimeMetrics(l.scraper.web, l.httpAddr)
	snapsBefore := l.snaps.started()
	cpu0, self0, all0, t0 := akProcCPU(pid), akProcCPU(os.Getpid()), akMachineCPU(), time.Now()
	l.recMu.Lock()
	l.rec = w
	l.recMu.Unlock()
	l.progress("%s window: %d changes/s for %s from %d agents; load %s", name, l.cfg.rate, l.cfg.window, len(from), akLoadavg())

	var inflight sync.WaitGroup
	var sent, skipped int
	tick := time.NewTicker(time.Second / time.Duration(l.cfg.rate))
	sample := time.NewTicker(time.Second)
	end := time.After(l.cfg.window)
loop:
	for {
		select {
		case <-tick.C:
			a := from[rand.IntN(len(from))]
			if !a.askChange(&inflight, w) {
				skipped++
				continue
			}
			sent++
		case <-sample.C:
			if rss, _ := akProcMem(pid); rss > w.rssMax {
				w.rssMax = rss
			}
		case <-end:
			break loop
		}
	}
	tick.Stop()
	sample.Stop()
	elapsed := time.Since(t0)
	cpu1, self1, all1 := akProcCPU(pid), akProcCPU(os.Getpid()), akMachineCPU()
	rss, hwm := akProcMem(pid)
	w.rssMax, w.hwm = max(w.rssMax, rss), hwm
	w.cpu, w.selfCPU = (cpu1-cpu0)/elapsed.Seconds(), (self1-self0)/elapsed.Seconds()
	w.otherCPU = (all1-all0)/elapsed.Seconds() - w.cpu - w.selfCPU
	w.load1, _ = strconv.ParseFloat(strings.Fields(akLoadavg())[0], 64)
	l.recMu.Lock()
	l.rec = nil // heartbeats after the window are not counted
	l.recMu.Unlock()

	acked := make(chan struct{})
	go func() { inflight.Wait(); close(acked) }()
	select {
	case <-acked:
	case <-time.After(akAckWait):
		l.fatalf("%s: changes still unacknowledged %s after the window", name, akAckWait)
	}
	l.checkHealthy()
	if s := l.snaps.started() - snapsBefore; s > 0 {
		l.fatalf("%s: %d snapshots started during the window", name, s)
	}
	after, err := l.scraper.scrape(l.httpAddr)
	if err != nil {
		l.fatalf("scrape: %v", err)
	}
	rt := akRuntimeMetrics(l.scraper.web, l.httpAddr)
	if untilGC {
		gc0 := rt0["go_gc_duration_seconds_count"]
		t1 := time.Now()
		for rt["go_gc_duration_seconds_count"] == gc0 && time.Since(t1) < akGCWait {
			time.Sleep(time.Second)
			if rss, _ := akProcMem(pid); rss > w.rssMax {
				w.rssMax = rss
			}
			rt = akRuntimeMetrics(l.scraper.web, l.httpAddr)
		}
		_, w.hwm = akProcMem(pid)
		l.checkHealthy()
		if rt["go_gc_duration_seconds_count"] == gc0 {
			l.progress("%s: no GC in the master within %s after the window", name, akGCWait)
		} else {
			l.progress("%s: RSS sampled for %.0f s more, until the master's first GC since the window began", name, time.Since(t1).Seconds())
		}
	}
	w.gcGoal = rt["go_memstats_next_gc_bytes"]
	applyP99 := akHistQuantile(before, after, "gin_master_apply_duration_seconds", 0.99) * 1000
	l.progress("%s: %d changes sent (%d ticks skipped: agent busy), %d acked: commit p50 %.1f ms, p99 %.1f ms, max %.1f ms "+
		"(master apply p99 ≤ %.1f ms); heartbeat acks %d of %d sent, p50 %.2f ms, p99 %.1f ms, max %.1f ms; "+
		"master RSS max %.0f MiB, HWM %.0f MiB, CPU %.3f s/s, heap in use %.0f MiB, heap allocated %.0f MiB, next GC at %.0f MiB, stacks %.0f MiB, "+
		"from the OS %.0f MiB, allocating %.1f MiB/s, %v goroutines, %v GCs in the window; "+
		"load generator CPU %.3f s/s, the rest of the machine %.3f s/s; sessions %v, nodes up %v down %v; load %s",
		name, sent, skipped, w.commit.n(), w.commit.q(0.5), w.commit.q(0.99), w.commit.max(), applyP99,
		w.hb.n(), w.hbSent.Load(), w.hb.q(0.5), w.hb.q(0.99), w.hb.max(),
		w.rssMax/(1<<20), w.hwm/(1<<20), w.cpu, rt["go_memstats_heap_inuse_bytes"]/(1<<20), rt["go_memstats_heap_alloc_bytes"]/(1<<20),
		rt["go_memstats_next_gc_bytes"]/(1<<20), rt["go_memstats_stack_inuse_bytes"]/(1<<20), rt["go_memstats_sys_bytes"]/(1<<20),
		(rt["go_memstats_alloc_bytes_total"]-rt0["go_memstats_alloc_bytes_total"])/(1<<20)/elapsed.Seconds(), rt["go_goroutines"],
		rt["go_gc_duration_seconds_count"]-rt0["go_gc_duration_seconds_count"],
		w.selfCPU, w.otherCPU, after.value("gin_master_connected_agents", ""), after.value("gin_master_nodes", `state="up"`),
		after.value("gin_master_nodes", `state="down"`), akLoadavg())
	if gc := akLastGCTrace(l.master.Log); gc != "" {
		l.progress("%s: the master's last GC (GODEBUG=gctrace=1): %s", name, gc)
	}
	l.b.Logf("%s: commit p50/p99/max %.1f/%.1f/%.1f ms over %d changes; heartbeat ack p99 %.1f ms over %d; master RSS %.0f MiB (HWM %.0f), CPU %.3f s/s; load generator %.3f s/s; rest of the machine %.3f s/s; load1 %.2f",
		name, w.commit.q(0.5), w.commit.q(0.99), w.commit.max(), w.commit.n(), w.hb.q(0.99), w.hb.n(),
		w.rssMax/(1<<20), w.hwm/(1<<20), w.cpu, w.selfCPU, w.otherCPU, w.load1)
	if w.commit.n() == 0 {
		l.fatalf("%s: no change was committed", name)
	}
	return w
}

func (l *akLoad) recording() *akWindow {
	l.recMu.Lock()
	defer l.recMu.Unlock()
	return l.rec
}

// akAgent is one simulated gin-agent: one connection and one session at a
// time. It starts at the master its name hashes to (as gin-agent spreads
// itself over the master list), follows leader hints, and, once the load
// allows it (akLoad.reattach), reattaches to the next master when its
// session ends, as gin-agent does: a Hello with its acknowledged
// generation and hash, and a full inventory only if the master is not in
// sync (counted as a re-send).
type akAgent struct {
	l    *akLoad
	idx  int
	name string

	hb     time.Duration
	reqs   chan akChange // to the sender goroutine
	closed atomic.Bool

	mu      sync.Mutex
	sess    *akSession // the current session (nil before attach)
	master  int        // index into l.addrs of the session's master
	gen     uint64     // acknowledged generation
	pending uint64     // generation in flight (0: none)
	// holds is the generation of the inventory the agent holds when a
	// session ended with a change in flight (0: none): the master may
	// have committed it without the ack arriving, so the next Hello
	// names that inventory's hash, as gin-agent's names its current one.
	holds  uint64
	change akChange // the pending change
	sentAt time.Time
	hbSeq  uint64
	hbAt   map[uint64]akSent
}

// akSession is one connection and its agent session.
type akSession struct {
	conn   *grpc.ClientConn
	stream ginv1.AgentService_SessionClient
	ctx    context.Context
	cancel context.CancelFunc
	ended  atomic.Bool
	// joining: a session with the agent's home master is being opened;
	// leaving: the agent took that one and closed its side of this one
	// (set under the agent's mu: agenthome_test.go).
	joining atomic.Bool
	leaving atomic.Bool
}

func (s *akSession) close() {
	s.cancel()
	_ = s.conn.Close()
}

// akChange is one change asked for: done is called when it is
// acknowledged; its latency goes to w (nil: not recorded).
type akChange struct {
	done func()
	w    *akWindow
}

// akSent is an outstanding heartbeat.
type akSent struct {
	at time.Time
	w  *akWindow // the window it was sent in, nil outside one
}

// akInventory is the template re-identified as node idx, in the variant of
// generation gen: even generations from 2 on report GPU0's NVLink 0 down
// (and its ends), odd ones all links up, so consecutive generations differ.
func akInventory(tmpl *ginv1.NodeInventory, idx int, gen uint64) *ginv1.NodeInventory {
	inv := proto.CloneOf(tmpl)
	name := fmt.Sprintf("ak%05d", idx)
	id := func(parts ...uint64) uint64 {
		h := uint64(idx)*0x9e3779b97f4a7c15 + 0x632be59bd9b4e019
		for _, p := range parts {
			h ^= p + 0x9e3779b97f4a7c15 + h<<6 + h>>2
			h = (h ^ h>>30) * 0xbf58476d1ce4e5b9
			h = (h ^ h>>27) * 0x94d049bb133111eb
			h ^= h >> 31
		}
		return h
	}
	inv.NodeName = name
	inv.Generation = gen
	inv.CollectedAt = timestamppb.Now()
	inv.Host.Hostname = name
	inv.Host.MachineId = fmt.Sprintf("%016x%016x", id(1), id(2))
	for _, g := range inv.Gpus {
		x := id(3, uint64(g.Index))
		g.Uuid = fmt.Sprintf("GPU-%08x-%04x-%04x-%04x-%012x", uint32(idx), g.Index, x>>48, x>>32&0xffff, x&0xffffffffffff)
		if g.Serial != "" {
			g.Serial = fmt.Sprintf("%013d", id(4, uint64(g.Index))%1e13)
		}
		if g.Index == 0 && gen >= 2 && gen%2 == 0 {
			for _, nl := range g.Nvlinks {
				if nl.Index == 0 {
					nl.State = ginv1.LinkState_LINK_STATE_DOWN
				}
			}
		}
	}
	for k, h := range inv.Hcas {
		h.NodeGuid = fmt.Sprintf("0x%016x", id(5, uint64(k)))
		h.SysImageGuid = h.NodeGuid
		for _, p := range h.Ports {
			pg := id(6, uint64(k), uint64(p.Port))
			p.PortGuid = fmt.Sprintf("0x%016x", pg)
			if p.Lid != 0 {
				p.Lid = uint32(id(7, uint64(k), uint64(p.Port))%0xBFFF + 1)
			}
			var v4 string
			if nd := p.Netdev; nd != nil {
				m := id(8, uint64(k), uint64(p.Port))
				nd.Mac = fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", byte(m)&0xfe|0x02, byte(m>>8), byte(m>>16), byte(m>>24), byte(m>>32), byte(m>>40))
				for i := range nd.Ipv4Addresses {
					v4 = fmt.Sprintf("10.%d.%d.%d", byte(m>>48), byte(m>>56), byte(idx)%253+1)
					nd.Ipv4Addresses[i] = v4 + "/16"
				}
				for i := range nd.Ipv6Addresses {
					nd.Ipv6Addresses[i] = fmt.Sprintf("fd00:%x:%x:%x::%x/64", uint16(m), uint16(m>>16), uint16(idx), k+1)
				}
			}
			for i, gid := range p.Gids {
				switch {
				case strings.HasPrefix(gid, "fe80:"):
					p.Gids[i] = fmt.Sprintf("fe80:0000:0000:0000:%04x:%04x:%04x:%04x", pg>>48, pg>>32&0xffff, pg>>16&0xffff, pg&0xffff)
				case v4 != "":
					var a [4]byte
					fmt.Sscanf(v4, "%d.%d.%d.%d", &a[0], &a[1], &a[2], &a[3])
					p.Gids[i] = fmt.Sprintf("0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", a[0], a[1], a[2], a[3])
				}
			}
		}
	}
	return inv
}

func (a *akAgent) inventory(gen uint64) *ginv1.NodeInventory {
	return akInventory(a.l.tmpl, a.idx, gen)
}

// open dials master i and says hello for generation gen (0: none held),
// following a leader hint (a master that does not take agent sessions
// answers with one instead of a HelloAck). It returns the session, the
// master's index and the HelloAck.
func (a *akAgent) open(i int, gen uint64, limit time.Duration) (*akSession, int, *ginv1.HelloAck, error) {
	for hops := 0; ; hops++ {
		s, ack, hint, err := a.helloAt(i, gen, limit)
		if err != nil {
			return nil, i, nil, err
		}
		if ack != nil {
			return s, i, ack, nil
		}
		j := slices.Index(a.l.addrs, hint)
		if j < 0 || hops >= len(a.l.addrs) {
			return nil, i, nil, fmt.Errorf("%s answered the hello with leader hint %q and no HelloAck", a.l.addrs[i], hint)
		}
		i = j
	}
}

// helloAt dials master i and says hello for generation gen (0: none held).
// It returns the session and the HelloAck, or the leader hint of a master
// that answered without one (the session closed).
func (a *akAgent) helloAt(i int, gen uint64, limit time.Duration) (*akSession, *ginv1.HelloAck, string, error) {
	// The Hello names the inventory the agent holds (generation 1 before
	// anything is acknowledged) and the generation acknowledged.
	a.mu.Lock()
	inv := a.inventory(max(gen, a.holds, 1))
	a.mu.Unlock()
	hash, err := inventory.ContentHash(inv)
	if err != nil {
		return nil, nil, "", err
	}
	s := &akSession{}
	s.conn, err = grpc.NewClient(a.l.addrs[i], grpc.WithTransportCredentials(a.l.creds(a.name)),
		// gin-agent's keepalive (internal/agent.New).
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}))
	if err != nil {
		return nil, nil, "", err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	ack, hint, err := a.hello(s, inv, hash, gen, limit)
	if err == nil && ack != nil {
		return s, ack, "", nil
	}
	s.close()
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s: %w", a.l.addrs[i], err)
	}
	return nil, nil, hint, nil
}

// hello opens the session on s and says hello; it returns the HelloAck, or
// the leader hint of a master that answered without one.
func (a *akAgent) hello(s *akSession, inv *ginv1.NodeInventory, hash string, gen uint64, limit time.Duration) (*ginv1.HelloAck, string, error) {
	var err error
	if s.stream, err = ginv1.NewAgentServiceClient(s.conn).Session(s.ctx); err != nil {
		return nil, "", err
	}
	hctx, hcancel := context.WithTimeout(s.ctx, limit)
	defer hcancel()
	stop := context.AfterFunc(hctx, func() {
		if !errors.Is(hctx.Err(), context.Canceled) {
			s.cancel()
		}
	})
	defer stop()
	if err := s.stream.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Hello{Hello: &ginv1.Hello{
		NodeName: a.name, MachineId: inv.GetHost().GetMachineId(), AgentVersion: "agents10k-bench", InventoryHash: hash, LastAckedGeneration: gen,
	}}}); err != nil {
		return nil, "", fmt.Errorf("send hello: %w", err)
	}
	resp, err := s.stream.Recv()
	if err != nil {
		return nil, "", fmt.Errorf("hello ack: %w", err)
	}
	if ack := resp.GetHelloAck(); ack != nil {
		if d := resp.GetHeartbeatInterval(); d != nil && d.AsDuration() != akHeartbeat {
			return nil, "", fmt.Errorf("master names heartbeat interval %s, the benchmark runs it at %s", d.AsDuration(), akHeartbeat)
		}
		return ack, "", nil
	}
	if resp.GetLeaderHint() == "" {
		return nil, "", fmt.Errorf("answer to hello is %T, want a HelloAck", resp.GetMsg())
	}
	return nil, resp.GetLeaderHint(), nil
}

// sendInventory sends the full inventory of generation gen on s and waits
// for its acknowledgement.
func (a *akAgent) sendInventory(s *akSession, gen uint64) error {
	if err := s.stream.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Inventory{Inventory: a.inventory(gen)}}); err != nil {
		return fmt.Errorf("send inventory: %w", err)
	}
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			return fmt.Errorf("inventory ack: %w", err)
		}
		if ack := resp.GetInventoryAck(); ack != nil {
			if ack.GetAcceptedGeneration() != gen {
				return fmt.Errorf("master accepted generation %d, sent %d", ack.GetAcceptedGeneration(), gen)
			}
			return nil
		}
	}
}

// attach opens the first session at the agent's home master, registers
// the node at generation 1 and starts heartbeating.
func (a *akAgent) attach() error {
	a.hb = akHeartbeat
	home, t0 := masteraddr.StartIndex(a.name, len(a.l.addrs)), time.Now()
	// With several masters, an attempt that fails (a master that knows no
	// leader yet, a leader change while the inventory is relayed) is tried
	// again at the next master shortly, as gin-agent does; the Hello then
	// names the inventory the agent holds, so a master that committed it
	// says so instead of taking it again.
	for try := 0; ; try++ {
		s, i, err := a.register((home+try)%len(a.l.addrs), try > 0)
		if err == nil {
			a.mu.Lock()
			a.gen, a.sess, a.master = 1, s, i
			a.hbAt = map[uint64]akSent{}
			a.mu.Unlock()
			a.reqs = make(chan akChange, 1)
			go a.send(s)
			go a.recv(s)
			return nil
		}
		if len(a.l.addrs) == 1 || time.Since(t0) > akAttachWait {
			return err
		}
		a.l.regRetries.Add(1)
		time.Sleep(time.Duration(rand.Int64N(int64(300 * time.Millisecond))))
	}
}

// register opens a session at master i and has generation 1 committed
// (already held, after an earlier attempt, only when retry is set).
func (a *akAgent) register(i int, retry bool) (*akSession, int, error) {
	s, i, ack, err := a.open(i, 0, akRegisterWait)
	if err != nil {
		return nil, i, err
	}
	switch {
	case retry && ack.GetHeldGeneration() == 1 && ack.GetInSync():
		return s, i, nil
	case ack.GetInSync() || ack.GetHeldGeneration() != 0:
		s.close()
		return nil, i, fmt.Errorf("a fresh master holds generation %d (in sync %v)", ack.GetHeldGeneration(), ack.GetInSync())
	}
	if err := a.sendInventory(s, 1); err != nil {
		s.close()
		return nil, i, err
	}
	return s, i, nil
}

// reattach replaces a session that ended: the masters in turn from the
// one after masteraddr.MoveFrom (gin-agent's own rule), after a jittered wait, until one
// says hello back; a master not in sync gets the full inventory (a
// re-send, counted). It runs in its own goroutine.
func (a *akAgent) reattach(from int) {
	l := a.l
	t0 := time.Now()
	a.mu.Lock()
	gen, cur := a.gen, max(a.gen, a.holds)
	a.mu.Unlock()
	start := masteraddr.MoveFrom(a.name, from, len(l.addrs))
	for try := 1; !a.closed.Load(); try++ {
		time.Sleep(time.Duration(rand.Int64N(int64(min(try, 8)) * int64(250*time.Millisecond))))
		i := (start + try) % len(l.addrs)
		s, i, ack, err := a.open(i, gen, 10*time.Second)
		if err != nil {
			// A master that paces its handshakes says when to come back
			// (RESOURCE_EXHAUSTED with a RetryInfo): wait it out plus up
			// to as much jitter, as gin-agent does.
			if h := apierr.RetryHint(err); h > 0 {
				time.Sleep(h + rand.N(h))
			}
			continue
		}
		if !ack.GetInSync() || ack.GetHeldGeneration() != cur {
			l.resent.Add(1)
			if err := a.sendInventory(s, cur); err != nil {
				s.close()
				continue
			}
		}
		if a.adopt(s, i, cur) {
			l.reattached(time.Since(t0))
		}
		return
	}
}

// adopt makes s, with master i, the agent's session at acknowledged
// generation gen and starts its goroutines; false (s closed) when the
// agent is closing.
func (a *akAgent) adopt(s *akSession, i int, gen uint64) bool {
	a.mu.Lock()
	if a.closed.Load() {
		a.mu.Unlock()
		s.close()
		return false
	}
	a.sess, a.master = s, i
	a.gen, a.holds = gen, 0
	a.hbAt = map[uint64]akSent{}
	a.mu.Unlock()
	go a.send(s)
	go a.recv(s)
	return true
}

// askChange asks the agent to send its next generation; false when a change
// is already in flight. done is called when the change is acknowledged.
func (a *akAgent) askChange(wg *sync.WaitGroup, w *akWindow) bool {
	a.mu.Lock()
	busy := a.pending != 0 || a.sess == nil || a.sess.ended.Load() || a.sess.joining.Load() || a.sess.leaving.Load()
	a.mu.Unlock()
	if busy || a.closed.Load() {
		return false
	}
	wg.Add(1)
	select {
	case a.reqs <- akChange{done: wg.Done, w: w}:
		return true
	default:
		wg.Done()
		return false
	}
}

// send heartbeats on s every a.hb (the first one at a random offset) and
// sends the changes asked for; it is the only goroutine that sends on s.
// Away from home it probes the home master and leaves for it
// (agenthome_test.go).
func (a *akAgent) send(s *akSession) {
	t := time.NewTimer(rand.N(a.hb))
	defer t.Stop()
	a.mu.Lock()
	hp := a.newHomeProber(a.master)
	a.mu.Unlock()
	defer hp.stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-hp.due():
			hp.probe(a.l)
		case serving := <-hp.answer():
			a.joinHome(s, hp, serving)
		case j := <-hp.joins():
			if a.joined(s, hp, j) {
				return
			}
		case <-t.C:
			t.Reset(a.hb)
			a.mu.Lock()
			a.hbSeq++
			seq, gen := a.hbSeq, a.gen
			w := a.l.recording()
			a.hbAt[seq] = akSent{at: time.Now(), w: w}
			a.mu.Unlock()
			if w != nil {
				w.hbSent.Add(1)
			}
			if err := s.stream.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Heartbeat{Heartbeat: &ginv1.Heartbeat{Sequence: seq, Generation: gen}}}); err != nil {
				a.fail(s, fmt.Errorf("send heartbeat: %w", err))
				return
			}
		case c := <-a.reqs:
			a.mu.Lock()
			base, next := a.gen, a.gen+1
			a.mu.Unlock()
			// Like the agent's delta encoder: the changes against the
			// acknowledged generation.
			delta := inventory.Diff(a.inventory(base), a.inventory(next))
			a.mu.Lock()
			a.pending, a.change, a.sentAt = next, c, time.Now()
			a.mu.Unlock()
			if err := s.stream.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Delta{Delta: delta}}); err != nil {
				a.fail(s, fmt.Errorf("send delta: %w", err))
				return
			}
		}
	}
}

// recv reads the master's responses on s: heartbeat acks and inventory acks.
func (a *akAgent) recv(s *akSession) {
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			a.fail(s, fmt.Errorf("receive: %w", err))
			return
		}
		now := time.Now()
		if d := resp.GetHeartbeatInterval(); d != nil && d.AsDuration() > 0 && d.AsDuration() != a.hb {
			a.fail(s, fmt.Errorf("master changed the heartbeat interval to %s", d.AsDuration()))
			return
		}
		switch m := resp.GetMsg().(type) {
		case *ginv1.SessionResponse_HeartbeatAck:
			a.mu.Lock()
			sent, ok := a.hbAt[m.HeartbeatAck.GetSequence()]
			delete(a.hbAt, m.HeartbeatAck.GetSequence())
			a.mu.Unlock()
			if !ok {
				a.fail(s, fmt.Errorf("heartbeat ack for sequence %d, never sent", m.HeartbeatAck.GetSequence()))
				return
			}
			if sent.w != nil {
				sent.w.hb.add(now.Sub(sent.at))
			}
		case *ginv1.SessionResponse_InventoryAck:
			a.mu.Lock()
			pending, sentAt, c := a.pending, a.sentAt, a.change
			if got := m.InventoryAck.GetAcceptedGeneration(); got != pending {
				a.mu.Unlock()
				a.fail(s, fmt.Errorf("master acknowledged generation %d, in flight %d", got, pending))
				return
			}
			a.gen, a.pending, a.change = pending, 0, akChange{}
			a.mu.Unlock()
			if c.w != nil {
				c.w.commit.add(now.Sub(sentAt))
			}
			if c.done != nil {
				c.done()
			}
		default:
			// No other message is expected once attached; the fabric
			// scanner role (one agent) needs a real fabric source, which
			// simulated agents do not have.
			if resp.GetMsg() != nil {
				a.fail(s, fmt.Errorf("unexpected %T", resp.GetMsg()))
				return
			}
		}
	}
}

// fail ends session s: a failure of the benchmark, unless the agent is
// closing or the load lets agents reattach (a master was killed).
func (a *akAgent) fail(s *akSession, err error) {
	if s.ended.Swap(true) {
		return // its other goroutine reported it
	}
	ours := status.Code(err) == codes.Canceled && s.ctx.Err() != nil // closed by this process
	s.close()
	if a.closed.Load() {
		return
	}
	a.mu.Lock()
	left := s.leaving.Load()
	a.mu.Unlock()
	if left { // the agent went on with its home master's session
		return
	}
	if ours {
		return
	}
	if !a.l.reattach.Load() {
		a.l.sessionFailed(a, err)
		return
	}
	a.mu.Lock()
	from := a.master
	// A change in flight is lost with the session: not counted. It may
	// have been committed: the agent holds its inventory now.
	c := a.change
	a.holds = max(a.holds, a.pending)
	a.pending, a.change = 0, akChange{}
	a.mu.Unlock()
	if c.done != nil {
		c.done()
	}
	a.l.detached.Add(1)
	go a.reattach(from)
}

func (a *akAgent) close() {
	if a.closed.Swap(true) {
		return
	}
	a.mu.Lock()
	s, c := a.sess, a.change
	a.change = akChange{}
	a.mu.Unlock()
	if s != nil {
		s.close()
	}
	if c.done != nil {
		c.done()
	}
}

// akSamples is a concurrency-safe list of latencies in milliseconds.
type akSamples struct {
	mu sync.Mutex
	ms []float64
}

func (s *akSamples) add(d time.Duration) {
	s.mu.Lock()
	s.ms = append(s.ms, float64(d)/float64(time.Millisecond))
	s.mu.Unlock()
}

// addMs adds samples already in milliseconds (from another process).
func (s *akSamples) addMs(ms ...float64) {
	s.mu.Lock()
	s.ms = append(s.ms, ms...)
	s.mu.Unlock()
}

// values is a copy of the samples, in milliseconds.
func (s *akSamples) values() []float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ms)
}

func (s *akSamples) reset() {
	s.mu.Lock()
	s.ms = nil
	s.mu.Unlock()
}

func (s *akSamples) n() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ms)
}

// q is the nearest-rank quantile (NaN without samples).
func (s *akSamples) q(p float64) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ms) == 0 {
		return math.NaN()
	}
	x := slices.Clone(s.ms)
	slices.Sort(x)
	return x[max(0, int(math.Ceil(p*float64(len(x))))-1)]
}

func (s *akSamples) max() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ms) == 0 {
		return math.NaN()
	}
	return slices.Max(s.ms)
}

// akHistQuantile is the upper bound of the bucket holding quantile p of the
// observations a Prometheus histogram gained between two scrapes.
func akHistQuantile(before, after foMetrics, name string, p float64) float64 {
	type bucket struct{ le, n float64 }
	var bs []bucket
	for _, s := range after[name+"_bucket"] {
		i := strings.Index(s.labels, `le="`)
		if i < 0 {
			continue
		}
		leText := s.labels[i+4:]
		leText = leText[:strings.IndexByte(leText, '"')]
		le, err := strconv.ParseFloat(leText, 64)
		if err != nil {
			continue
		}
		bs = append(bs, bucket{le, s.value - before.value(name+"_bucket", `le="`+leText+`"`)})
	}
	slices.SortFunc(bs, func(x, y bucket) int {
		switch {
		case x.le < y.le:
			return -1
		case x.le > y.le:
			return 1
		}
		return 0
	})
	if len(bs) == 0 || bs[len(bs)-1].n == 0 {
		return math.NaN()
	}
	total := bs[len(bs)-1].n
	for _, x := range bs {
		if x.n >= p*total {
			return x.le
		}
	}
	return math.Inf(1)
}

// akRuntimeMetrics reads the master's unlabelled go_* gauges and counters
// (the shared scrape keeps gin_* samples only); empty on error.
func akRuntimeMetrics(web *http.Client, addr string) map[string]float64 {
	out := map[string]float64{}
	resp, err := web.Get("http://" + addr + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(body), "\n") {
		if m := foSampleRE.FindStringSubmatch(line); m != nil && strings.HasPrefix(m[1], "go_") && m[2] == "" {
			if v, err := strconv.ParseFloat(m[3], 64); err == nil {
				out[m[1]] = v
			}
		}
	}
	return out
}

// akLastGCTrace is the last gctrace line in a log ("" without one).
func akLastGCTrace(path string) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(string(data), "\n")
	for _, line := range slices.Backward(lines) {
		if strings.HasPrefix(line, "gc ") {
			return line
		}
	}
	return ""
}

// akProcMem is VmRSS and VmHWM of pid, in bytes.
func akProcMem(pid int) (rss, hwm float64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb * 1024
		case "VmHWM:":
			hwm = kb * 1024
		}
	}
	return rss, hwm
}

// akProcCPU is utime+stime of pid in seconds (clock ticks of 1/100 s, the
// Linux USER_HZ).
func akProcCPU(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	// After the command: state(0) ... utime(11) stime(12).
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

// akMachineCPU is the CPU time all CPUs spent busy (not idle or waiting
// for I/O), from /proc/stat, in seconds.
func akMachineCPU() float64 {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	busy := 0.0
	for i, x := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		v, _ := strconv.ParseFloat(x, 64)
		busy += v
	}
	return busy / 100
}

func akProcLimit(pid int) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "Max open files") {
			return strings.Join(strings.Fields(line), " ")
		}
	}
	return "open-file limit unknown"
}

func akLoadavg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// akSnapshots watches a hashicorp/raft file snapshot store: a snapshot
// being written is a "<id>.tmp" directory, renamed to "<id>" when complete.
type akSnapshots struct {
	mu       sync.Mutex
	n        int // snapshots seen starting
	lastSeen time.Time
	inFlight bool
}

func watchAkSnapshots(b testing.TB, dir string, progress func(string, ...any)) *akSnapshots {
	s := &akSnapshots{lastSeen: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	go func() {
		seen := map[string]time.Time{}
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			ents, _ := os.ReadDir(dir)
			tmp := false
			for _, e := range ents {
				name := e.Name()
				if id, ok := strings.CutSuffix(name, ".tmp"); ok {
					tmp = true
					if _, ok := seen[id]; !ok {
						seen[id] = time.Now()
						s.mu.Lock()
						s.n++
						s.mu.Unlock()
						progress("snapshot %s started", id)
					}
					continue
				}
				at, ok := seen[name]
				if !ok { // started and completed between two looks
					s.mu.Lock()
					s.n++
					s.lastSeen = time.Now()
					s.mu.Unlock()
					at = time.Now()
				}
				if !at.IsZero() {
					fi, _ := os.Stat(filepath.Join(dir, name, "state.bin"))
					size := int64(0)
					if fi != nil {
						size = fi.Size()
					}
					progress("snapshot %s complete: %.1f s, %.0f MiB", name, time.Since(at).Seconds(), float64(size)/(1<<20))
					seen[name] = time.Time{}
				}
			}
			s.mu.Lock()
			s.inFlight = tmp
			if tmp {
				s.lastSeen = time.Now()
			}
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *akSnapshots) started() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// quietFor is how long no snapshot has been in progress.
func (s *akSnapshots) quietFor() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFlight {
		return 0
	}
	return time.Since(s.lastSeen)
}
