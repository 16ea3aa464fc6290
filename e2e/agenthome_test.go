//go:build linux

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/masteraddr"
)

// The simulated agents return home as gin-agent does (internal/agent,
// home.go): an agent whose session is with another master than the one
// its name hashes to (masteraddr.StartIndex) asks at a jittered interval
// (uniform in [P/2, 3P/2], P the load's home-probe interval) whether its home reports
// the gRPC health service gin.v1.AgentService SERVING; when it does and no
// change of the agent waits for its ack, it makes before it breaks: it
// says Hello at home with its acknowledged generation while its session
// goes on (asked for no change meanwhile), and only when home answers with
// a HelloAck in sync does it close its side of the old stream (the master
// sees it leave, not a loss; it is cancelled after akHomeLeaveWait if the
// master does not end it) and go on at home: nothing is re-sent and the
// node always has a session. A home that refuses, names another leader,
// does not answer within akHomeLeaveWait or holds another inventory is
// left (counted in homeFailed) and the agent stays until the next probe.
//
// Unlike gin-agent, which dials its home for each probe, the agents of one
// load process share one health connection per master, and one answer of
// a master serves every probe of that process for akHomeCheckFresh: the
// masters' answer is what matters, and 12,000 agents probing every 10 s
// would otherwise be 1,200 dials a second. Both the agents' probes and the
// health checks actually sent are counted.

const (
	// akHomeProbeEnv is the home-probe interval P of the benchmark, in
	// seconds (default akHomeProbeDefault).
	akHomeProbeEnv     = "GIN_LOAD_HOME_PROBE"
	akHomeProbeDefault = 10
	// akHomeCheckFresh is how long one master's health answer serves the
	// probes of a load process.
	akHomeCheckFresh = 500 * time.Millisecond
	// akHomeCheckTimeout bounds one health check.
	akHomeCheckTimeout = 2 * time.Second
	// akHomeLeaveWait is how long a leaving agent waits for the master to
	// end the stream it half-closed (gin-agent: its silence timeout).
	akHomeLeaveWait = 3 * akHeartbeat
)

// akHomeCheck is a load process's shared health view of one master.
type akHomeCheck struct {
	conn    *grpc.ClientConn
	mu      sync.Mutex
	at      time.Time // of the last answer (zero: none yet)
	serving bool
}

// setHome turns returning home on or off; probe is the interval P (at
// least a millisecond). The health connections are made the first time.
func (l *akLoad) setHome(on bool, probe time.Duration) error {
	if probe < time.Millisecond || probe > time.Hour {
		return fmt.Errorf("home-probe interval %s: want 1ms..1h", probe)
	}
	l.homeMu.Lock()
	defer l.homeMu.Unlock()
	if l.homeChk == nil && on {
		for _, addr := range l.addrs {
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(l.creds("home-probe")),
				// A restarted master is reached within a couple of seconds,
				// not after the default backoff of up to two minutes.
				grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: akHomeCheckTimeout,
					Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}}))
			if err != nil {
				for _, h := range l.homeChk {
					_ = h.conn.Close()
				}
				l.homeChk = nil
				return fmt.Errorf("health connection to %s: %w", addr, err)
			}
			l.homeChk = append(l.homeChk, &akHomeCheck{conn: conn})
		}
		chk := l.homeChk
		l.b.Cleanup(func() {
			for _, h := range chk {
				_ = h.conn.Close()
			}
		})
	}
	l.homeProbe.Store(int64(probe))
	l.home.Store(on) // after homeChk: a probe that sees it on finds them
	return nil
}

// nextHomeProbe is the wait before an agent's next probe: uniform in
// [P/2, 3P/2] (P: akHomeProbeDefault seconds before setHome).
func (l *akLoad) nextHomeProbe() time.Duration {
	p := time.Duration(l.homeProbe.Load())
	if p <= 0 {
		p = akHomeProbeDefault * time.Second
	}
	return p/2 + rand.N(p+1)
}

// homeServing reports whether master i reports gin.v1.AgentService
// SERVING (any failure to tell is "no"), asking it at most once per
// akHomeCheckFresh for all the agents of this process.
func (l *akLoad) homeServing(i int) bool {
	l.homeProbes.Add(1)
	h := l.homeChk[i]
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.at.IsZero() && time.Since(h.at) < akHomeCheckFresh {
		return h.serving
	}
	ctx, cancel := context.WithTimeout(context.Background(), akHomeCheckTimeout)
	defer cancel()
	l.homeChecks.Add(1)
	resp, err := healthpb.NewHealthClient(h.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: ginv1.AgentService_ServiceDesc.ServiceName})
	h.serving = err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	h.at = time.Now()
	return h.serving
}

// homeProber is the home probing of one session: armed only while the
// session is away from home.
type homeProber struct {
	home   int
	timer  *time.Timer
	res    chan bool   // the answer of the probe in flight
	joined chan akJoin // the session opened at home (joinHome)
}

// newHomeProber arms the first probe of session s with master i (nil
// when i is the agent's home or there is one master).
func (a *akAgent) newHomeProber(i int) *homeProber {
	home := masteraddr.StartIndex(a.name, len(a.l.addrs))
	if len(a.l.addrs) < 2 || i == home {
		return nil
	}
	return &homeProber{home: home, timer: time.NewTimer(a.l.nextHomeProbe()), res: make(chan bool, 1), joined: make(chan akJoin)}
}

func (p *homeProber) due() <-chan time.Time {
	if p == nil {
		return nil
	}
	return p.timer.C
}

func (p *homeProber) answer() <-chan bool {
	if p == nil {
		return nil
	}
	return p.res
}

func (p *homeProber) joins() <-chan akJoin {
	if p == nil {
		return nil
	}
	return p.joined
}

func (p *homeProber) stop() {
	if p != nil {
		p.timer.Stop()
	}
}

// probe asks in the background whether the home is serving (the session
// goes on meanwhile); with returning home off it waits for the next probe.
func (p *homeProber) probe(l *akLoad) {
	if !l.home.Load() {
		p.timer.Reset(l.nextHomeProbe())
		return
	}
	go func() { p.res <- l.homeServing(p.home) }()
}

// akJoin is a session opened with the agent's home master while its
// session elsewhere went on (make before break): the session and its
// HelloAck, or why there is none.
type akJoin struct {
	s   *akSession
	ack *ginv1.HelloAck
	err error
}

// joinHome says Hello at the agent's home master, in the background,
// once home serves and no change waits for its ack (the session s goes on
// meanwhile and is asked for no change: s.joining); otherwise it schedules
// the next probe.
func (a *akAgent) joinHome(s *akSession, p *homeProber, serving bool) {
	a.mu.Lock()
	busy := a.pending != 0
	if serving && !busy {
		s.joining.Store(true) // askChange asks this session for nothing more
	}
	gen := a.gen
	a.mu.Unlock()
	if !serving || busy {
		p.timer.Reset(a.l.nextHomeProbe())
		return
	}
	go func() {
		hs, ack, hint, err := a.helloAt(p.home, gen, akHomeLeaveWait)
		if err == nil && ack == nil {
			err = fmt.Errorf("home answered the hello with leader hint %q", hint)
		}
		j := akJoin{s: hs, ack: ack, err: err}
		select {
		case p.joined <- j:
		case <-s.ctx.Done(): // the session ended meanwhile: it reattaches
			j.leave()
		}
	}()
}

// leave ends a joined session that is not used, from the agent's side.
func (j akJoin) leave() {
	if j.s == nil {
		return
	}
	if j.s.stream.CloseSend() != nil {
		j.s.close()
		return
	}
	time.AfterFunc(akHomeLeaveWait, j.s.close)
}

// joined takes the home session j in place of s when home answered in sync
// with the acknowledged generation: s is left (the agent closes its side;
// the master sees it leave) and j adopted; it returns true (the caller, the
// sending goroutine of s, stops). Otherwise j is left, s stays, and the
// next probe is scheduled.
func (a *akAgent) joined(s *akSession, p *homeProber, j akJoin) bool {
	l := a.l
	a.mu.Lock()
	gen := a.gen
	ok := j.err == nil && j.ack.GetInSync() && j.ack.GetHeldGeneration() == gen && !s.ended.Load()
	if ok {
		s.leaving.Store(true) // under a.mu: fail sees it or ended first
	}
	a.mu.Unlock()
	if !ok {
		j.leave()
		l.homeFailed.Add(1)
		s.joining.Store(false)
		p.timer.Reset(l.nextHomeProbe())
		return s.ended.Load()
	}
	if err := s.stream.CloseSend(); err != nil {
		s.close()
	} else {
		// A master that does not end its half is left anyway.
		time.AfterFunc(akHomeLeaveWait, s.cancel)
	}
	if a.adopt(j.s, p.home, gen) {
		l.returned.Add(1)
	}
	return true
}

// setHome turns the agents' return home on or off in every load process.
func (c *mmCluster) setHome(on bool, probe time.Duration) {
	c.b.Helper()
	if err := c.f.setHome(on, probe); err != nil {
		c.fatalf("%v", err)
	}
}

// homeShares is how many agents hash to each master (their home).
func (c *mmCluster) homeShares() []int {
	out := make([]int, len(c.masters))
	for i := range c.cfg.agents {
		out[masteraddr.StartIndex(fmt.Sprintf("ak%05d", i), len(c.masters))]++
	}
	return out
}

// mmHome is what the agents' return home did.
type mmHome struct {
	took       time.Duration // until every master held its share (within the bound)
	shares     []int         // agents per home master
	before     []int         // sessions per master when the wait began
	after      []int         // and when it ended
	returned   int64         // agents back at home meanwhile
	failed     int64         // returns home did not take (the agent stayed)
	resent     int64         // full inventories re-sent meanwhile
	detached   int64         // sessions that ended and reattached meanwhile
	downMax    float64       // most nodes the leader reported DOWN
	probes     int64         // the agents' probes
	checks     int64         // health checks sent for them
	probeRate  float64       // probes per second over the wait
	checkRate  float64       // health checks per second over the wait
	tolerance  float64       // the bound: each master within this fraction of its share
	watchAfter time.Duration // DOWN watched this long after
}

// waitHome waits until every master holds its hash share of the sessions
// within tol (a fraction: 0 is exactly), every agent holds a session and
// the leader has every node up, then watches 3 heartbeat intervals more
// for nodes marked DOWN. The time is counted from t0 (when the restarted
// master had caught up), the counts from cnt0 (taken before its restart:
// agents may start back as soon as it serves).
func (c *mmCluster) waitHome(t0 time.Time, cnt0 akCounts, tol float64, limit time.Duration) mmHome {
	c.b.Helper()
	r := mmHome{shares: c.homeShares(), before: c.sessions(), tolerance: tol, watchAfter: 3 * akHeartbeat}
	watch := func() error {
		ms := c.scrapeAll()
		total, up := 0.0, -1.0
		var off []string
		for i, m := range ms {
			if m == nil {
				return fmt.Errorf("%s does not answer", c.masters[i].id)
			}
			n := m.value("gin_master_connected_agents", "")
			total += n
			if d := n - float64(r.shares[i]); d > tol*float64(r.shares[i]) || -d > tol*float64(r.shares[i]) {
				off = append(off, fmt.Sprintf("%s holds %v of its %d", c.masters[i].id, n, r.shares[i]))
			}
			if m.value("gin_master_raft_state", `state="Leader"`) == 1 {
				up = m.value("gin_master_nodes", `state="up"`)
				r.downMax = max(r.downMax, m.value("gin_master_nodes", `state="down"`))
			}
		}
		if len(off) > 0 {
			return fmt.Errorf("sessions not at home: %v", off)
		}
		if total != float64(c.cfg.agents) || up != float64(c.cfg.agents) {
			return fmt.Errorf("%v sessions, %v nodes up on the leader", total, up)
		}
		return nil
	}
	c.poll(fmt.Sprintf("the sessions back at their home masters (shares %v, within %.1f%%)", r.shares, 100*tol), limit, watch)
	r.took = time.Since(t0)
	r.after = c.sessions()
	for t1 := time.Now(); time.Since(t1) < r.watchAfter; {
		_ = watch()
		time.Sleep(500 * time.Millisecond)
	}
	cnt := c.counts()
	el := time.Since(t0).Seconds()
	r.returned, r.failed = cnt.Returned-cnt0.Returned, cnt.HomeFailed-cnt0.HomeFailed
	r.resent, r.detached = cnt.Resent-cnt0.Resent, cnt.Detached-cnt0.Detached
	r.probes, r.checks = cnt.HomeProbes-cnt0.HomeProbes, cnt.HomeChecks-cnt0.HomeChecks
	r.probeRate, r.checkRate = float64(r.probes)/el, float64(r.checks)/el
	c.progress("the agents back home %.1f s after the restarted master caught up: sessions %v -> %v (shares %v); %d returned, %d returns home did not take, %d inventories re-sent, "+
		"%d sessions ended and reattached; at most %.0f nodes DOWN on the leader (watched %.0f s more); %d probes (%.0f/s), %d health checks (%.1f/s); RSS %v MiB; load %s",
		r.took.Seconds(), r.before, r.after, r.shares, r.returned, r.failed, r.resent, r.detached, r.downMax, r.watchAfter.Seconds(),
		r.probes, r.probeRate, r.checks, r.checkRate, c.rssMiB(), akLoadavg())
	return r
}
