//go:build linux

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The simulated agents of BenchmarkThreeMastersAgents, split over
// processes. One process holds one connection, so one descriptor, per
// agent, and the hard open-file limit here (20,000) cannot be raised: a
// load of 25,000 agents runs in GIN_LOAD_PROCS processes (by default as
// many as that limit needs), each a re-exec of this test binary
// (TestAgentLoadHelper) holding the agents of one range of indices: the
// same names, home masters and behaviour as in one process. The benchmark
// process drives them over a line protocol, one JSON akReq per line on the
// helper's stdin and one JSON akResp per line on its stdout, and computes
// every quantile over the samples of all of them. With one process the
// agents run in the benchmark process and the same requests are served by
// a direct call.

const (
	// akProcsEnv is the number of load processes (default: as many as the
	// open-file limit needs; 1 runs the agents in the benchmark process).
	akProcsEnv = "GIN_LOAD_PROCS"
	// akHelperEnv ("FIRST,COUNT") and akHelperMastersEnv (the masters'
	// addresses, comma-separated) are set for a helper process only.
	akHelperEnv        = "GIN_LOAD_HELPER"
	akHelperMastersEnv = "GIN_LOAD_HELPER_MASTERS"
	// akMaxProcs bounds GIN_LOAD_PROCS.
	akMaxProcs = 64
	// akHelperExitWait is how long a helper may take to close its
	// sessions and exit once its stdin is closed.
	akHelperExitWait = 30 * time.Second
)

// akReq is one request to a part of the agents.
type akReq struct {
	// Op is register (start attaching every agent, Concurrency handshakes
	// at a time), counts, reattach (On: sessions that end reattach
	// elsewhere), begin (a window: the changes asked for are recorded, and
	// with On every heartbeat ack too), change (ask Agent, an index over
	// the whole load, for its next generation), end (stop recording, wait
	// WaitMs at most for the changes in flight, return the samples),
	// reattach_times (the per-agent reattach times; Reset clears them) or
	// home (On: agents away from home probe it every ProbeMs, jittered,
	// and return when it serves).
	Op          string `json:"op"`
	Concurrency int    `json:"concurrency,omitempty"`
	On          bool   `json:"on,omitempty"`
	Agent       int    `json:"agent,omitempty"`
	WaitMs      int64  `json:"wait_ms,omitempty"`
	Reset       bool   `json:"reset,omitempty"`
	ProbeMs     int64  `json:"probe_ms,omitempty"`
}

// akResp is the answer to one akReq.
type akResp struct {
	Err    string    `json:"err,omitempty"`
	Sent   bool      `json:"sent,omitempty"` // change: false when the agent had a change in flight or no session
	Counts akCounts  `json:"counts"`         // counts, and the first line a helper writes
	Commit []float64 `json:"commit,omitempty"`
	HB     []float64 `json:"hb,omitempty"`
	HBSent int64     `json:"hb_sent,omitempty"`
	Times  []float64 `json:"times,omitempty"` // reattach_times, ms
}

// akCounts are a part's counters since it started.
type akCounts struct {
	First      int   `json:"first"`
	Agents     int   `json:"agents"`
	Registered int64 `json:"registered"` // attached by register
	// RegEnd is when registration ended (Unix ns; 0 while it runs or
	// before it started), RegErr its failure.
	RegEnd   int64  `json:"reg_end,omitempty"`
	RegErr   string `json:"reg_err,omitempty"`
	Detached int64  `json:"detached"` // sessions that ended and reattached (or are reattaching)
	Resent   int64  `json:"resent"`   // full inventories re-sent on reattaching
	Retries  int64  `json:"retries"`  // registration attempts tried again
	Failed   int64  `json:"failed"`   // sessions that ended unexpectedly
	// Returning home: agents back at home, returns home did not take,
	// the agents' probes and the health checks sent for them.
	Returned   int64    `json:"returned"`
	HomeFailed int64    `json:"home_failed"`
	HomeProbes int64    `json:"home_probes"`
	HomeChecks int64    `json:"home_checks"`
	Errs       []string `json:"errs,omitempty"`
}

// akShard serves akReqs on the agents of one akLoad (those of one process).
type akShard struct {
	l          *akLoad
	registered atomic.Int64

	mu       sync.Mutex
	regState int // 0 not started, 1 running, 2 ended
	regEnd   time.Time
	regErr   error
	win      *akWindow
	inflight *sync.WaitGroup
}

func (s *akShard) counts() akCounts {
	l := s.l
	c := akCounts{First: l.cfg.first, Agents: len(l.agents), Registered: s.registered.Load(),
		Detached: l.detached.Load(), Resent: l.resent.Load(), Retries: l.regRetries.Load(), Failed: l.failed.Load(),
		Returned: l.returned.Load(), HomeFailed: l.homeFailed.Load(), HomeProbes: l.homeProbes.Load(), HomeChecks: l.homeChecks.Load()}
	s.mu.Lock()
	if s.regState == 2 {
		c.RegEnd = s.regEnd.UnixNano()
		if s.regErr != nil {
			c.RegErr = s.regErr.Error()
		}
	}
	s.mu.Unlock()
	l.errMu.Lock()
	c.Errs = append(c.Errs, l.errs...)
	l.errMu.Unlock()
	return c
}

func (s *akShard) handle(r akReq) akResp {
	l := s.l
	switch r.Op {
	case "register":
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.regState != 0 {
			return akResp{Err: "registration already started"}
		}
		s.regState = 1
		done := akAttachAll(l.agents, r.Concurrency, &s.registered)
		go func() {
			err := <-done
			s.mu.Lock()
			s.regState, s.regEnd, s.regErr = 2, time.Now(), err
			s.mu.Unlock()
		}()
		return akResp{}
	case "counts":
		return akResp{Counts: s.counts()}
	case "reattach":
		l.reattach.Store(r.On)
		return akResp{}
	case "home":
		if err := l.setHome(r.On, time.Duration(r.ProbeMs)*time.Millisecond); err != nil {
			return akResp{Err: err.Error()}
		}
		return akResp{}
	case "begin":
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.win != nil {
			return akResp{Err: "a window is already open"}
		}
		s.win, s.inflight = &akWindow{}, &sync.WaitGroup{}
		if r.On {
			l.recMu.Lock()
			l.rec = s.win
			l.recMu.Unlock()
		}
		return akResp{}
	case "change":
		i := r.Agent - l.cfg.first
		if i < 0 || i >= len(l.agents) {
			return akResp{Err: fmt.Sprintf("agent %d is not in this part (%d..%d)", r.Agent, l.cfg.first, l.cfg.first+len(l.agents)-1)}
		}
		s.mu.Lock()
		w, wg := s.win, s.inflight
		s.mu.Unlock()
		if w == nil {
			return akResp{Err: "change outside a window"}
		}
		return akResp{Sent: l.agents[i].askChange(wg, w)}
	case "end":
		l.recMu.Lock()
		l.rec = nil // heartbeats after the window are not counted
		l.recMu.Unlock()
		s.mu.Lock()
		w, wg := s.win, s.inflight
		s.win, s.inflight = nil, nil
		s.mu.Unlock()
		if w == nil {
			return akResp{Err: "no window is open"}
		}
		acked := make(chan struct{})
		go func() { wg.Wait(); close(acked) }()
		select {
		case <-acked:
		case <-time.After(time.Duration(r.WaitMs) * time.Millisecond):
			return akResp{Err: fmt.Sprintf("changes still unacknowledged %s after the window", time.Duration(r.WaitMs)*time.Millisecond)}
		}
		return akResp{Commit: w.commit.values(), HB: w.hb.values(), HBSent: w.hbSent.Load()}
	case "reattach_times":
		t := l.reattachT.values()
		if r.Reset {
			l.reattachT.reset()
		}
		return akResp{Times: t}
	}
	return akResp{Err: fmt.Sprintf("unknown request %q", r.Op)}
}

// akPart is a part of the agents, in this process or in a helper.
type akPart interface {
	call(r akReq) (akResp, error)
}

// akLocal is a part in this process.
type akLocal struct{ s *akShard }

func (p akLocal) call(r akReq) (akResp, error) { return p.s.handle(r), nil }

// akRemote is a part in a helper process: one request and its answer at
// a time.
type akRemote struct {
	name string
	mu   sync.Mutex
	enc  *json.Encoder
	dec  *json.Decoder
	in   io.WriteCloser
	cmd  *exec.Cmd
	done chan struct{} // closed once the helper has been reaped
}

func (p *akRemote) call(r akReq) (akResp, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var resp akResp
	if err := p.enc.Encode(r); err != nil {
		return resp, fmt.Errorf("%s: send %s: %w", p.name, r.Op, err)
	}
	if err := p.dec.Decode(&resp); err != nil {
		return resp, fmt.Errorf("%s: answer to %s: %w (the helper's stderr is above)", p.name, r.Op, err)
	}
	return resp, nil
}

// close closes the helper's stdin (it closes its sessions and exits) and
// kills it if it has not exited within akHelperExitWait.
func (p *akRemote) close() {
	_ = p.in.Close()
	select {
	case <-p.done:
	case <-time.After(akHelperExitWait):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// akFleet is every simulated agent of a load, in parts by index.
type akFleet struct {
	agents int
	firsts []int // part k holds agents firsts[k] .. firsts[k+1]-1
	parts  []akPart
}

// akLoadProcs is the number of load processes for agents: GIN_LOAD_PROCS,
// by default as many as the hard open-file limit needs.
func akLoadProcs(tb testing.TB, agents int) int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Fatal(err)
	}
	def := 1
	if per := int64(lim.Max) - akSpareFDs; per > 0 && int64(agents) > per {
		def = int((int64(agents) + per - 1) / per)
	}
	return benchEnv(tb, akProcsEnv, def, 1, akMaxProcs)
}

// startAkFleet starts cfg.agents simulated agents of the masters addrs in
// procs processes: this one (procs 1) or procs helpers, each holding a
// contiguous range of indices.
func startAkFleet(tb testing.TB, cfg akConfig, addrs []string, procs int) *akFleet {
	tb.Helper()
	if procs < 1 || procs > cfg.agents {
		tb.Fatalf("%d load processes for %d agents", procs, cfg.agents)
	}
	f := &akFleet{agents: cfg.agents}
	if procs == 1 {
		l := newAkLoad(tb, cfg, nil, addrs[0], "")
		l.addrs = addrs
		f.firsts, f.parts = []int{0, cfg.agents}, []akPart{akLocal{&akShard{l: l}}}
		return f
	}
	for k := range procs {
		f.firsts = append(f.firsts, k*cfg.agents/procs)
	}
	f.firsts = append(f.firsts, cfg.agents)
	for k := range procs {
		f.parts = append(f.parts, startAkHelper(tb, k, f.firsts[k], f.firsts[k+1]-f.firsts[k], addrs))
	}
	return f
}

func startAkHelper(tb testing.TB, k, first, count int, addrs []string) *akRemote {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAgentLoadHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%d", akHelperEnv, first, count), akHelperMastersEnv+"="+strings.Join(addrs, ","))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start load helper %d: %v", k, err)
	}
	p := &akRemote{name: fmt.Sprintf("load helper %d (pid %d, agents %d..%d)", k, cmd.Process.Pid, first, first+count-1),
		enc: json.NewEncoder(in), dec: json.NewDecoder(out), in: in, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	tb.Cleanup(p.close)
	// The helper's first line says which agents it holds.
	var hello akResp
	if err := p.dec.Decode(&hello); err != nil {
		tb.Fatalf("%s did not start: %v", p.name, err)
	}
	if hello.Err != "" || hello.Counts.First != first || hello.Counts.Agents != count {
		tb.Fatalf("%s started with agents %d+%d (%s), want %d+%d", p.name, hello.Counts.First, hello.Counts.Agents, hello.Err, first, count)
	}
	return p
}

// TestAgentLoadHelper is one load process of akFleet (skipped unless a
// benchmark or test starts it): the agents GIN_LOAD_HELPER names, serving
// akReqs on stdin until it closes.
func TestAgentLoadHelper(t *testing.T) {
	spec := os.Getenv(akHelperEnv)
	if spec == "" {
		t.Skip("started by the agent-load benchmarks only")
	}
	a, b, ok := strings.Cut(spec, ",")
	first, err1 := strconv.Atoi(a)
	count, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || first < 0 || count < 1 || count > 1<<20 {
		t.Fatalf("%s=%q: want FIRST,COUNT", akHelperEnv, spec)
	}
	addrs := strings.Split(os.Getenv(akHelperMastersEnv), ",")
	if len(addrs) == 0 || addrs[0] == "" {
		t.Fatalf("%s is empty", akHelperMastersEnv)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if need := uint64(count + akSpareFDs); lim.Cur < need {
		t.Fatalf("open-file limit %d is below the %d that %d agents need: raise %s", lim.Cur, need, count, akProcsEnv)
	}
	l := newAkLoad(t, akConfig{agents: count, first: first}, nil, addrs[0], "")
	l.addrs = addrs
	s := &akShard{l: l}
	enc, dec := json.NewEncoder(os.Stdout), json.NewDecoder(os.Stdin)
	if err := enc.Encode(akResp{Counts: s.counts()}); err != nil {
		t.Fatal(err)
	}
	for {
		var r akReq
		if err := dec.Decode(&r); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("request: %v", err)
			}
			return
		}
		if err := enc.Encode(s.handle(r)); err != nil {
			t.Fatalf("answer: %v", err)
		}
	}
}

// each sends r to every part and returns their answers; a part that
// cannot be reached or answers an error is an error.
func (f *akFleet) each(r akReq) ([]akResp, error) {
	out := make([]akResp, len(f.parts))
	for k, p := range f.parts {
		resp, err := p.call(r)
		if err == nil && resp.Err != "" {
			err = fmt.Errorf("part %d (agents %d..%d): %s: %s", k, f.firsts[k], f.firsts[k+1]-1, r.Op, resp.Err)
		}
		if err != nil {
			return nil, err
		}
		out[k] = resp
	}
	return out, nil
}

// counts sums the parts' counts (RegEnd: the latest, 0 while any part is
// still registering; RegErr and Errs: the first ones).
func (f *akFleet) counts() (akCounts, []akCounts, error) {
	resps, err := f.each(akReq{Op: "counts"})
	if err != nil {
		return akCounts{}, nil, err
	}
	var sum akCounts
	allEnded, lastEnd := true, int64(0)
	per := make([]akCounts, len(resps))
	for k, r := range resps {
		c := r.Counts
		per[k] = c
		sum.Agents += c.Agents
		sum.Registered += c.Registered
		sum.Detached += c.Detached
		sum.Resent += c.Resent
		sum.Retries += c.Retries
		sum.Failed += c.Failed
		sum.Returned += c.Returned
		sum.HomeFailed += c.HomeFailed
		sum.HomeProbes += c.HomeProbes
		sum.HomeChecks += c.HomeChecks
		if sum.RegErr == "" {
			sum.RegErr = c.RegErr
		}
		if len(sum.Errs) < 5 {
			sum.Errs = append(sum.Errs, c.Errs...)
		}
		if c.RegEnd == 0 {
			allEnded = false
		}
		lastEnd = max(lastEnd, c.RegEnd)
	}
	if allEnded {
		sum.RegEnd = lastEnd
	}
	return sum, per, nil
}

// register starts every part's registration, GIN_LOAD_REGISTER_CONCURRENCY
// handshakes at a time in all (shared by the parts by their sizes).
func (f *akFleet) register(concurrency int) error {
	for k, p := range f.parts {
		n := f.firsts[k+1] - f.firsts[k]
		resp, err := p.call(akReq{Op: "register", Concurrency: max(1, concurrency*n/f.agents)})
		if err == nil && resp.Err != "" {
			err = errors.New(resp.Err)
		}
		if err != nil {
			return fmt.Errorf("part %d: register: %w", k, err)
		}
	}
	return nil
}

func (f *akFleet) setReattach(on bool) error {
	_, err := f.each(akReq{Op: "reattach", On: on})
	return err
}

// setHome turns returning home on or off in every part, probing every
// probe (jittered).
func (f *akFleet) setHome(on bool, probe time.Duration) error {
	_, err := f.each(akReq{Op: "home", On: on, ProbeMs: probe.Milliseconds()})
	return err
}

// begin opens a window on every part: the changes asked for are recorded,
// and with hb every heartbeat ack too.
func (f *akFleet) begin(hb bool) error {
	_, err := f.each(akReq{Op: "begin", On: hb})
	return err
}

// change asks agent i for its next generation; false when it has one in
// flight or no session.
func (f *akFleet) change(i int) (bool, error) {
	k := 0
	for k+1 < len(f.parts) && i >= f.firsts[k+1] {
		k++
	}
	resp, err := f.parts[k].call(akReq{Op: "change", Agent: i})
	if err == nil && resp.Err != "" {
		err = errors.New(resp.Err)
	}
	return resp.Sent, err
}

// end closes the window on every part, waiting at most wait for the
// changes in flight there, and returns the samples of all.
func (f *akFleet) end(wait time.Duration) (*akWindow, error) {
	resps, err := f.each(akReq{Op: "end", WaitMs: wait.Milliseconds()})
	if err != nil {
		return nil, err
	}
	w := &akWindow{}
	for _, r := range resps {
		w.commit.addMs(r.Commit...)
		w.hb.addMs(r.HB...)
		w.hbSent.Add(r.HBSent)
	}
	return w, nil
}

// reattachTimes are the per-agent reattach times of every part since the
// last reset (reset: clear them).
func (f *akFleet) reattachTimes(reset bool) (*akSamples, error) {
	resps, err := f.each(akReq{Op: "reattach_times", Reset: reset})
	if err != nil {
		return nil, err
	}
	s := &akSamples{}
	for _, r := range resps {
		s.addMs(r.Times...)
	}
	return s, nil
}

// TestThreeMastersAgentsSplit runs the split load for real, so that it
// cannot rot: 300 agents in 2 load processes on three real masters;
// registration, a short window of changes, the leader killed. It asserts
// by counts: each process registered its own agents, every agent holds a
// session, every change asked for was acknowledged, and after the kill
// every agent that lost its session reattached, with no inventory re-sent
// and no node marked DOWN; the leader's agents spread over both other
// masters (by their names, as gin-agent's do). Then the killed master is
// restarted, and every agent returns home (probing every 2 s): each
// master holds exactly its hash share, every agent whose home it is came
// back, nothing re-sent, no node DOWN.
func TestThreeMastersAgentsSplit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three masters and two load processes (about a minute)")
	}
	const agents, procs = 300, 2
	cfg := akConfig{agents: agents, rate: 10, window: 3 * time.Second, concurrency: 16}
	c := startThreeMasters(t, binaries(t), cfg, "900MiB", procs)
	c.setReattach(true)
	c.register()
	c.waitAttached("every agent attached and every node up", akAttachWait, time.Now())
	c.setHome(true, 2*time.Second)
	sum, per, err := c.f.counts()
	if err != nil {
		t.Fatal(err)
	}
	if len(per) != procs || sum.Registered != agents || sum.Resent != 0 {
		t.Fatalf("after registration: %d parts, %d agents registered, %d inventories re-sent; want %d, %d, 0", len(per), sum.Registered, sum.Resent, procs, agents)
	}
	for k, p := range per {
		if want := agents / procs; p.Agents != want || p.Registered != int64(want) || p.First != k*want {
			t.Fatalf("load process %d holds agents %d+%d and registered %d; want %d+%d, all registered", k, p.First, p.Agents, p.Registered, k*want, want)
		}
	}
	for i, n := range c.sessions() {
		if n == 0 {
			t.Fatalf("master %s holds no session (sessions %v): the agents did not spread by their names", c.masters[i].id, c.sessions())
		}
	}

	w := c.measure("split")
	if w.ended == 0 && w.commit.n() != w.sent {
		t.Fatalf("%d changes asked for, %d acknowledged", w.sent, w.commit.n())
	}
	if w.hb.n() == 0 {
		t.Fatal("no heartbeat ack recorded in the window")
	}

	k := c.killAndReattach(c.leader(), "the leader")
	if k.resent != 0 || k.downMax != 0 {
		t.Fatalf("after killing the leader: %d inventories re-sent, at most %v nodes DOWN; want 0, 0", k.resent, k.downMax)
	}
	if k.detached < int64(k.held) || int64(k.perAgent.n()) != k.detached {
		t.Fatalf("after killing the leader (%d sessions): %d sessions ended, %d reattached", k.held, k.detached, k.perAgent.n())
	}
	for j := range c.masters {
		if j != k.killed && k.after[j] <= k.before[j] {
			t.Fatalf("sessions per master %v before killing %s, %v after: %s took none of its agents", k.before, c.masters[k.killed].id, k.after, c.masters[j].id)
		}
	}
	if got := c.counts(); got.Failed != 0 {
		t.Fatalf("%d sessions ended unexpectedly", got.Failed)
	}

	cnt0 := c.counts()
	h := c.waitHome(c.restart(k.killed), cnt0, 0, akAttachWait)
	for i, n := range h.after {
		if n != h.shares[i] {
			t.Fatalf("sessions per master %v, home shares %v", h.after, h.shares)
		}
	}
	// Every agent whose home is the restarted master was away from it.
	// Make before break: no session ended on the way.
	if want := int64(h.shares[k.killed]); h.returned < want || h.resent != 0 || h.downMax != 0 || h.detached != 0 {
		t.Fatalf("back home: %d agents returned (want at least %d, the restarted master's share), %d inventories re-sent, at most %v nodes DOWN, %d sessions ended and reattached; want 0, 0, 0",
			h.returned, want, h.resent, h.downMax, h.detached)
	}
	if h.probes == 0 || h.checks == 0 || h.checks > h.probes {
		t.Fatalf("%d home probes answered by %d health checks", h.probes, h.checks)
	}
	if got := c.counts(); got.Failed != 0 {
		t.Fatalf("%d sessions ended unexpectedly", got.Failed)
	}
}
