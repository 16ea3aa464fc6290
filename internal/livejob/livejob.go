package livejob

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// Suspect kinds, as -o json and the metrics write them.
const (
	KindSlowLink  = "slow-link"
	KindStraggler = "straggler"
	KindHang      = "hang"
)

// Config holds the detector's thresholds; zero fields take the defaults.
type Config struct {
	// Recent is how many of a rank's newest windows a verdict reads.
	Recent int
	// Keep is how many windows a rank keeps (≥ Recent).
	Keep int
	// SlowRatio: a sender whose network time per byte is at least this
	// multiple of the median rank's is a slow-link candidate; PeerRatio:
	// its receivers must wait at least this multiple of the median receive.
	SlowRatio, PeerRatio float64
	// StragglerRatio: a rank whose mean collective is at most this fraction
	// of the median rank's, and StragglerFloor shorter in absolute terms,
	// is a straggler candidate.
	StragglerRatio float64
	StragglerFloor time.Duration
	// HangAfter: peers waiting in one collective for longer than the
	// larger of HangAfter and HangFactor mean collectives mark a hang.
	HangAfter  time.Duration
	HangFactor float64
	// SilentAfter: a rank not heard from for this long is silent.
	SilentAfter time.Duration
	// Horizon: a job none of whose ranks reported for this long is dropped.
	Horizon time.Duration
	// Confirm and Clear count evaluations (one a second on the leader).
	Confirm, Clear int
	// MaxJobs and MaxRanksPerJob bound the memory.
	MaxJobs, MaxRanksPerJob int
	// MinSteps, MinBytes and MinColls are the evidence a rank needs over
	// its recent windows to be compared at all.
	MinSteps  uint64
	MinBytes  uint64
	MinColls  uint64
	MinRanks  int
	MaxWindow int // windows accepted per ReportRanks call
}

// Defaults.
var defaults = Config{
	Recent: 5, Keep: 8, SlowRatio: 1.25, PeerRatio: 1.15, StragglerRatio: 0.7,
	StragglerFloor: 300 * time.Microsecond, HangAfter: 4 * time.Second, HangFactor: 20,
	SilentAfter: 3 * time.Second, Horizon: 2 * time.Minute, Confirm: 3, Clear: 3,
	MaxJobs: 4096, MaxRanksPerJob: 65536, MinSteps: 16, MinBytes: 1 << 20, MinColls: 8, MinRanks: 3,
	MaxWindow: 4096,
}

// Default returns the default configuration.
func Default() Config { return defaults }

func (c Config) withDefaults() Config {
	d := defaults
	set := func(dst *int, v int) {
		if v > 0 {
			*dst = v
		}
	}
	setF := func(dst *float64, v float64) {
		if v > 0 {
			*dst = v
		}
	}
	setD := func(dst *time.Duration, v time.Duration) {
		if v > 0 {
			*dst = v
		}
	}
	set(&d.Recent, c.Recent)
	set(&d.Keep, c.Keep)
	setF(&d.SlowRatio, c.SlowRatio)
	setF(&d.PeerRatio, c.PeerRatio)
	setF(&d.StragglerRatio, c.StragglerRatio)
	setD(&d.StragglerFloor, c.StragglerFloor)
	setD(&d.HangAfter, c.HangAfter)
	setF(&d.HangFactor, c.HangFactor)
	setD(&d.SilentAfter, c.SilentAfter)
	setD(&d.Horizon, c.Horizon)
	set(&d.Confirm, c.Confirm)
	set(&d.Clear, c.Clear)
	set(&d.MaxJobs, c.MaxJobs)
	set(&d.MaxRanksPerJob, c.MaxRanksPerJob)
	set(&d.MinRanks, c.MinRanks)
	set(&d.MaxWindow, c.MaxWindow)
	if c.MinSteps > 0 {
		d.MinSteps = c.MinSteps
	}
	if c.MinBytes > 0 {
		d.MinBytes = c.MinBytes
	}
	if c.MinColls > 0 {
		d.MinColls = c.MinColls
	}
	if d.Keep < d.Recent {
		d.Keep = d.Recent
	}
	return d
}

// Fabric names the switch a node's NIC is cabled to ("" unknown). The
// master implements it over its graph.
type Fabric interface {
	SwitchOf(node, nic string) string
}

// Detector is the live state; safe for concurrent use.
type Detector struct {
	cfg    Config
	fabric Fabric

	mu   sync.Mutex
	jobs map[string]*job
}

type job struct {
	id       string
	comms    map[uint64]*comm
	ranks    int
	last     time.Time
	suspects map[suspectKey]*suspectState
}

type comm struct {
	id     uint64
	nranks uint32
	ranks  map[uint32]*rank
}

type rank struct {
	node    string
	last    time.Time // when the master received its newest window
	windows []*ginv1.RankWindow
	// meanNs is the mean collective of the newest window that had any
	// (a hang's windows have none).
	meanNs float64
}

func (r *rank) latest() *ginv1.RankWindow { return r.windows[len(r.windows)-1] }

type suspectKey struct {
	kind string
	comm uint64
	rank uint32
}

type suspectState struct {
	s      *ginv1.Suspect
	since  time.Time
	hits   int
	misses int
}

// New returns an empty detector; fabric may be nil.
func New(cfg Config, fabric Fabric) *Detector {
	return &Detector{cfg: cfg.withDefaults(), fabric: fabric, jobs: map[string]*job{}}
}

// Errors of Add, each a refusal of one window.
var (
	ErrNoJob     = errors.New("livejob: window without a job id")
	ErrTooMany   = errors.New("livejob: live job bound reached")
	ErrBadWindow = errors.New("livejob: invalid window")
)

// Add takes one window of a rank running on node, received at now.
func (d *Detector) Add(node string, w *ginv1.RankWindow, now time.Time) error {
	if err := check(w); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	j, ok := d.jobs[w.GetJob()]
	if !ok {
		if len(d.jobs) >= d.cfg.MaxJobs {
			d.expireLocked(now)
			if len(d.jobs) >= d.cfg.MaxJobs {
				return fmt.Errorf("%w: %d jobs", ErrTooMany, d.cfg.MaxJobs)
			}
		}
		j = &job{id: w.GetJob(), comms: map[uint64]*comm{}, suspects: map[suspectKey]*suspectState{}}
		d.jobs[w.GetJob()] = j
	}
	c, ok := j.comms[w.GetCommId()]
	if !ok {
		c = &comm{id: w.GetCommId(), nranks: w.GetNranks(), ranks: map[uint32]*rank{}}
		j.comms[w.GetCommId()] = c
	}
	if c.nranks != w.GetNranks() {
		return fmt.Errorf("%w: communicator %#x has %d ranks, this window says %d", ErrBadWindow, c.id, c.nranks, w.GetNranks())
	}
	r, ok := c.ranks[w.GetRank()]
	if !ok {
		if j.ranks >= d.cfg.MaxRanksPerJob {
			return fmt.Errorf("%w: %d ranks in job %q", ErrTooMany, d.cfg.MaxRanksPerJob, j.id)
		}
		r = &rank{}
		c.ranks[w.GetRank()] = r
		j.ranks++
	}
	if r.node != node || (len(r.windows) > 0 && r.latest().GetPid() != w.GetPid()) {
		// Another process holds the rank now (a restarted job step):
		// the old windows are of something else.
		r.windows = r.windows[:0]
		r.node = node
	}
	if len(r.windows) == d.cfg.Keep {
		copy(r.windows, r.windows[1:])
		r.windows = r.windows[:len(r.windows)-1]
	}
	r.windows = append(r.windows, w)
	r.last = now
	var n, sum float64
	for _, c := range w.GetCollectives() {
		n += float64(c.GetCount())
		sum += float64(c.GetSumNs())
	}
	if n > 0 {
		r.meanNs = sum / n
	}
	j.last = now
	return nil
}

func check(w *ginv1.RankWindow) error {
	switch {
	case w.GetJob() == "":
		return ErrNoJob
	case w.GetNranks() == 0 || w.GetRank() >= w.GetNranks():
		return fmt.Errorf("%w: rank %d of %d", ErrBadWindow, w.GetRank(), w.GetNranks())
	case w.GetCollectivesDone() > w.GetCollectivesStarted():
		return fmt.Errorf("%w: %d collectives done of %d started", ErrBadWindow, w.GetCollectivesDone(), w.GetCollectivesStarted())
	}
	for _, p := range w.GetPeers() {
		if p.GetPeer() >= w.GetNranks() || len(p.GetWaitNs()) != 3 {
			return fmt.Errorf("%w: peer %d of %d ranks with %d waits", ErrBadWindow, p.GetPeer(), w.GetNranks(), len(p.GetWaitNs()))
		}
	}
	return nil
}

// expireLocked drops jobs none of whose ranks reported within the horizon.
func (d *Detector) expireLocked(now time.Time) {
	for id, j := range d.jobs {
		if now.Sub(j.last) > d.cfg.Horizon {
			delete(d.jobs, id)
		}
	}
}

// Evaluate recomputes every job's suspects at now (the leader calls it once
// a second) and drops jobs past the horizon.
func (d *Detector) Evaluate(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expireLocked(now)
	for _, j := range d.jobs {
		found := map[suspectKey]*ginv1.Suspect{}
		for _, c := range j.comms {
			// Each rank's recent windows are summed once per evaluation.
			stats := make(map[uint32]rankStats, len(c.ranks))
			for id, r := range c.ranks {
				stats[id] = d.stats(r, false)
			}
			for _, s := range d.slowLinks(c, stats) {
				found[suspectKey{KindSlowLink, c.id, s.GetRank()}] = s
			}
			for _, s := range d.stragglers(c, stats) {
				found[suspectKey{KindStraggler, c.id, s.GetRank()}] = s
			}
			for _, s := range d.hangs(c, now) {
				found[suspectKey{KindHang, c.id, s.GetRank()}] = s
			}
		}
		for k, s := range found {
			st, ok := j.suspects[k]
			if !ok {
				st = &suspectState{since: now}
				if s.GetSince() != nil { // a hang knows its onset
					st.since = s.GetSince().AsTime()
				}
				j.suspects[k] = st
			}
			st.s, st.hits, st.misses = s, st.hits+1, 0
		}
		for k, st := range j.suspects {
			if _, ok := found[k]; ok {
				continue
			}
			st.misses++
			if st.misses >= d.cfg.Clear || st.hits < d.cfg.Confirm {
				delete(j.suspects, k)
			}
		}
	}
}

// Suspects are every job's suspects (confirmed or not), by job.
func (d *Detector) Suspects() map[string][]*ginv1.Suspect {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string][]*ginv1.Suspect, len(d.jobs))
	for id, j := range d.jobs {
		if s := d.suspectsLocked(j); len(s) > 0 {
			out[id] = s
		}
	}
	return out
}

func (d *Detector) suspectsLocked(j *job) []*ginv1.Suspect {
	out := make([]*ginv1.Suspect, 0, len(j.suspects))
	for _, st := range j.suspects {
		s := proto.CloneOf(st.s)
		s.Since = timestamppb.New(st.since)
		s.Confirmed = st.hits >= d.cfg.Confirm
		if d.fabric != nil && s.GetNic() != "" {
			s.SwitchPort = d.fabric.SwitchOf(s.GetNode(), s.GetNic())
		}
		out = append(out, s)
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].GetKind() != out[b].GetKind() {
			return out[a].GetKind() < out[b].GetKind()
		}
		if out[a].GetCommId() != out[b].GetCommId() {
			return out[a].GetCommId() < out[b].GetCommId()
		}
		return out[a].GetRank() < out[b].GetRank()
	})
	return out
}

// Job returns what the detector holds of one job; ok is false when none
// of its ranks reported within the horizon.
func (d *Detector) Job(id string, now time.Time) (*ginv1.GetJobLiveResponse, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	j, ok := d.jobs[id]
	if !ok || now.Sub(j.last) > d.cfg.Horizon {
		return nil, false
	}
	resp := &ginv1.GetJobLiveResponse{JobId: id, LastReport: timestamppb.New(j.last), Suspects: d.suspectsLocked(j)}
	comms := make([]*comm, 0, len(j.comms))
	for _, c := range j.comms {
		comms = append(comms, c)
	}
	sort.Slice(comms, func(a, b int) bool { return comms[a].id < comms[b].id })
	for _, c := range comms {
		resp.MissingRanks += c.nranks - uint32(len(c.ranks))
		ids := make([]uint32, 0, len(c.ranks))
		for id := range c.ranks {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
		for _, id := range ids {
			r := c.ranks[id]
			w := r.latest()
			st := d.stats(r, false)
			lr := &ginv1.LiveRank{
				CommId: c.id, Rank: id, Node: r.node, GpuIndex: w.GetGpuIndex(), Nic: w.GetNic(),
				LastReport: timestamppb.New(r.last), CollectivesDone: w.GetCollectivesDone(),
			}
			if st.colls > 0 {
				lr.MeanCollectiveUs = st.collNs / float64(st.colls) / 1e3
			}
			if st.sendBytes > 0 {
				lr.SendUsPerMib = st.sendNetNs / float64(st.sendBytes) * (1 << 20) / 1e3
			}
			resp.Ranks = append(resp.Ranks, lr)
		}
	}
	return resp, true
}

// rankStats sums a rank's recent windows.
type rankStats struct {
	colls      uint64
	collNs     float64
	sendBytes  uint64
	sendSteps  uint64
	sendNetNs  float64
	recv       map[uint32]flow // by sending peer
	arrivals   map[uint64]int64
	firstStart int64
	lastEnd    int64
}

type flow struct {
	bytes, steps uint64
	netNs        float64
}

// stats sums r's recent windows; arrivals (only a straggler's evidence
// needs them) when asked.
func (d *Detector) stats(r *rank, arrivals bool) rankStats {
	st := rankStats{recv: map[uint32]flow{}}
	if arrivals {
		st.arrivals = map[uint64]int64{}
	}
	ws := r.windows
	if len(ws) > d.cfg.Recent {
		ws = ws[len(ws)-d.cfg.Recent:]
	}
	for i, w := range ws {
		if i == 0 {
			st.firstStart = w.GetStartUnixNano()
		}
		st.lastEnd = w.GetEndUnixNano()
		for _, c := range w.GetCollectives() {
			st.colls += uint64(c.GetCount())
			st.collNs += float64(c.GetSumNs())
		}
		for _, p := range w.GetPeers() {
			if p.GetSend() {
				st.sendBytes += p.GetBytes()
				st.sendSteps += uint64(p.GetSteps())
				st.sendNetNs += float64(p.GetWaitNs()[2])
				continue
			}
			f := st.recv[p.GetPeer()]
			f.bytes += p.GetBytes()
			f.steps += uint64(p.GetSteps())
			f.netNs += float64(p.GetWaitNs()[0])
			st.recv[p.GetPeer()] = f
		}
		if arrivals {
			for _, a := range w.GetArrivals() {
				st.arrivals[a.GetSeq()] = a.GetStartUnixNano()
			}
		}
	}
	return st
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

func where(id uint32, r *rank) string {
	w := r.latest()
	s := fmt.Sprintf("rank %d (%s", id, r.node)
	if w.GetGpuIndex() >= 0 {
		s += fmt.Sprintf(" gpu%d", w.GetGpuIndex())
	}
	if w.GetNic() != "" {
		s += " " + w.GetNic()
	}
	return s + ")"
}

func base(kind string, c *comm, id uint32, r *rank) *ginv1.Suspect {
	w := r.latest()
	s := &ginv1.Suspect{Kind: kind, Node: r.node, Rank: id, GpuIndex: w.GetGpuIndex(), Nic: w.GetNic(), CommId: c.id}
	s.Component = "gpu?"
	if w.GetGpuIndex() >= 0 {
		s.Component = fmt.Sprintf("gpu%d", w.GetGpuIndex())
	}
	return s
}

// slowLinks: senders slow per byte against the median sender, confirmed by
// what the ranks receiving from them saw.
func (d *Detector) slowLinks(c *comm, stats map[uint32]rankStats) []*ginv1.Suspect {
	type sender struct {
		id   uint32
		r    *rank
		rate float64
		st   rankStats
	}
	var senders []sender
	var rates, recvRates []float64
	for id, r := range c.ranks {
		st := stats[id]
		if st.sendSteps >= d.cfg.MinSteps && st.sendBytes >= d.cfg.MinBytes {
			rate := st.sendNetNs / float64(st.sendBytes)
			senders = append(senders, sender{id, r, rate, st})
			rates = append(rates, rate)
		}
		for _, f := range st.recv {
			if f.steps >= d.cfg.MinSteps && f.bytes >= d.cfg.MinBytes {
				recvRates = append(recvRates, f.netNs/float64(f.bytes))
			}
		}
	}
	if len(senders) < d.cfg.MinRanks {
		return nil
	}
	m, mr := median(rates), median(recvRates)
	if m <= 0 {
		return nil
	}
	var out []*ginv1.Suspect
	for _, s := range senders {
		ratio := s.rate / m
		if ratio < d.cfg.SlowRatio {
			continue
		}
		var seen, agree []string
		for qid, q := range stats {
			f, ok := q.recv[s.id]
			if !ok || f.steps < d.cfg.MinSteps || f.bytes < d.cfg.MinBytes || mr <= 0 {
				continue
			}
			rr := f.netNs / float64(f.bytes) / mr
			line := fmt.Sprintf("%s receiving from it waits %.2fx the median receive", where(qid, c.ranks[qid]), rr)
			seen = append(seen, line)
			if rr >= d.cfg.PeerRatio {
				agree = append(agree, line)
			}
		}
		if len(seen) > 0 && len(agree) == 0 {
			continue // its receivers see nothing: the sender's own clock or host, not the link
		}
		sp := base(KindSlowLink, c, s.id, s.r)
		sp.Component = s.r.latest().GetNic()
		if sp.Component == "" {
			sp.Component = sp.GetComponent() + "'s NIC"
		}
		sp.Slowdown = ratio
		sp.Evidence = append(sp.Evidence, fmt.Sprintf("%s sends at %.2fx the network time per byte of the job's median rank (%.1f vs %.1f µs/MiB, %d MiB in %d steps over the last %d windows)",
			where(s.id, s.r), ratio, s.rate*(1<<20)/1e3, m*(1<<20)/1e3, s.st.sendBytes>>20, s.st.sendSteps, min(len(s.r.windows), d.cfg.Recent)))
		sort.Strings(agree)
		sp.Evidence = append(sp.Evidence, agree...)
		if len(seen) == 0 {
			sp.Evidence = append(sp.Evidence, "no rank receiving from it reported (its receivers' nodes run no profiler)")
		}
		out = append(out, sp)
	}
	return out
}

// stragglers: ranks whose collectives are short because every peer waits
// for them.
func (d *Detector) stragglers(c *comm, stats map[uint32]rankStats) []*ginv1.Suspect {
	type cand struct {
		id   uint32
		r    *rank
		mean float64
		st   rankStats
	}
	var all []cand
	var means []float64
	for id, r := range c.ranks {
		st := stats[id]
		if st.colls < d.cfg.MinColls {
			continue
		}
		mean := st.collNs / float64(st.colls)
		all = append(all, cand{id, r, mean, st})
		means = append(means, mean)
	}
	if len(all) < d.cfg.MinRanks {
		return nil
	}
	m := median(means)
	var hits []cand
	for _, a := range all {
		if a.mean <= d.cfg.StragglerRatio*m && m-a.mean >= float64(d.cfg.StragglerFloor) {
			hits = append(hits, a)
		}
	}
	// Every peer waits for a straggler; when a quarter of the ranks look
	// like one, the job has two speeds, not a straggler.
	if len(hits) == 0 || len(hits)*4 > len(all) {
		return nil
	}
	// Arrival: how late each rank starts the sampled collectives, against
	// the median start of each; and the period between samples (read only
	// now that there is a straggler to explain).
	for i := range all {
		all[i].st = d.stats(all[i].r, true)
	}
	for i := range hits {
		hits[i].st = d.stats(hits[i].r, true)
	}
	starts := map[uint64][]float64{}
	for _, a := range all {
		for seq, t := range a.st.arrivals {
			starts[seq] = append(starts[seq], float64(t))
		}
	}
	med := map[uint64]float64{}
	for seq, v := range starts {
		if len(v)*2 >= len(all) {
			med[seq] = median(v)
		}
	}
	period := iterationPeriod(med)
	var out []*ginv1.Suspect
	for _, h := range hits {
		var late float64
		var n int
		for seq, t := range h.st.arrivals {
			if mt, ok := med[seq]; ok {
				late += float64(t) - mt
				n++
			}
		}
		wait := m - h.mean
		s := base(KindStraggler, c, h.id, h.r)
		s.Slowdown = m / h.mean
		if period > wait {
			s.Slowdown = period / (period - wait)
		}
		s.Evidence = append(s.Evidence, fmt.Sprintf("%s: its collectives take %.0f µs, the job's median rank's %.0f µs: the others wait %.0f µs for it in each (over %d collectives)",
			where(h.id, h.r), h.mean/1e3, m/1e3, wait/1e3, h.st.colls))
		if n > 0 {
			s.Evidence = append(s.Evidence, fmt.Sprintf("it starts sampled collectives %.0f µs after the median rank (%d samples)", late/float64(n)/1e3, n))
		}
		if period > 0 {
			s.Evidence = append(s.Evidence, fmt.Sprintf("one step of the job takes %.0f µs; without the wait %.0f µs", period/1e3, (period-wait)/1e3))
		}
		out = append(out, s)
	}
	return out
}

// iterationPeriod is the median time between consecutive sampled
// collectives, per collective (0 when unknown).
func iterationPeriod(med map[uint64]float64) float64 {
	seqs := make([]uint64, 0, len(med))
	for s := range med {
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(a, b int) bool { return seqs[a] < seqs[b] })
	var per []float64
	for i := 1; i < len(seqs); i++ {
		if dt := med[seqs[i]] - med[seqs[i-1]]; dt > 0 {
			per = append(per, dt/float64(seqs[i]-seqs[i-1]))
		}
	}
	return median(per)
}

// hangs: ranks whose progress stopped while their peers wait in a
// collective for longer than the hang bound.
func (d *Detector) hangs(c *comm, now time.Time) []*ginv1.Suspect {
	var waiting []uint32
	var oldest int64
	var maxStarted uint64
	var means []float64
	for id, r := range c.ranks {
		if r.meanNs > 0 {
			means = append(means, r.meanNs)
		}
		w := r.latest()
		if now.Sub(r.last) > d.cfg.SilentAfter || w.GetInFlightSinceUnixNano() == 0 {
			continue
		}
		waiting = append(waiting, id)
		if t := w.GetInFlightSinceUnixNano(); oldest == 0 || t < oldest {
			oldest = t
		}
		maxStarted = max(maxStarted, w.GetCollectivesStarted())
	}
	if len(waiting) == 0 {
		return nil
	}
	bound := d.cfg.HangAfter
	mean := median(means)
	if b := time.Duration(d.cfg.HangFactor * mean); b > bound {
		bound = b
	}
	// The peers have waited since the newest of their in-flight starts.
	var newest int64
	for _, id := range waiting {
		newest = max(newest, c.ranks[id].latest().GetInFlightSinceUnixNano())
	}
	stalled := now.Sub(time.Unix(0, newest))
	if stalled < bound {
		return nil
	}
	var out []*ginv1.Suspect
	for id, r := range c.ranks {
		w := r.latest()
		silent := now.Sub(r.last) > d.cfg.SilentAfter
		behind := !silent && w.GetInFlightSinceUnixNano() == 0 && w.GetCollectivesStarted() < maxStarted
		if !silent && !behind {
			continue
		}
		s := base(KindHang, c, id, r)
		s.Since = timestamppb.New(time.Unix(0, newest))
		if mean > 0 {
			s.Slowdown = float64(stalled) / mean
		}
		if silent {
			s.Evidence = append(s.Evidence, fmt.Sprintf("%s has not reported for %s (its process or node stopped)", where(id, r), now.Sub(r.last).Round(time.Second)))
		} else {
			s.Evidence = append(s.Evidence, fmt.Sprintf("%s started %d collectives and has none in flight; its peers started %d", where(id, r), w.GetCollectivesStarted(), maxStarted))
		}
		s.Evidence = append(s.Evidence, fmt.Sprintf("%d ranks have waited in collective %d for %s (the job's collectives take %.0f µs)",
			len(waiting), maxStarted, stalled.Round(100*time.Millisecond), mean/1e3))
		out = append(out, s)
	}
	if len(out) > len(c.ranks)/2 {
		return nil // most ranks stopped: the job ended or the fabric did, not a rank
	}
	return out
}

// Reset drops every job.
func (d *Detector) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.jobs = map[string]*job{}
}
