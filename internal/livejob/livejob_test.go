package livejob

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// sim makes the windows of a 16-rank job on 8 nodes (2 ranks a node, a
// ring across nodes), one a second, with the faults a case sets.
type sim struct {
	ranks, perNode int
	t0             time.Time
	rng            *rand.Rand
	// per rank: network send time multiplier, extra compute, hung at window
	slow     map[int]float64
	straggle map[int]time.Duration
	hangAt   map[int]int // window index at which the rank stops
	silent   map[int]bool
	started  []uint64
}

func newSim(seed uint64) *sim {
	return &sim{ranks: 16, perNode: 2, t0: time.Unix(1_800_000_000, 0), rng: rand.New(rand.NewPCG(seed, 1)),
		slow: map[int]float64{}, straggle: map[int]time.Duration{}, hangAt: map[int]int{}, silent: map[int]bool{}, started: make([]uint64, 16)}
}

func (s *sim) node(r int) string { return fmt.Sprintf("node%03d", r/s.perNode+1) }

// window i of every rank: 300 collectives of 2 ms compute and 1 ms of
// transfer, 4 steps of 2 MiB each way.
func (s *sim) windows(i int) (map[int]*ginv1.RankWindow, time.Time) {
	start := s.t0.Add(time.Duration(i) * time.Second)
	end := start.Add(time.Second)
	out := map[int]*ginv1.RankWindow{}
	var maxStraggle time.Duration
	for _, d := range s.straggle {
		maxStraggle = max(maxStraggle, d)
	}
	hung := -1
	for r, at := range s.hangAt {
		if i >= at {
			hung = r
		}
	}
	for r := 0; r < s.ranks; r++ {
		next := (r + s.perNode) % s.ranks
		prev := (r - s.perNode + s.ranks) % s.ranks
		jit := func() float64 { return 1 + (s.rng.Float64()-0.5)*0.1 }
		w := &ginv1.RankWindow{
			Job: "4242", CommId: 0xabc, Nranks: uint32(s.ranks), Nnodes: uint32(s.ranks / s.perNode), Rank: uint32(r),
			GpuIndex: int32(r % s.perNode), Nic: fmt.Sprintf("mlx5_%d", r%s.perNode), Pid: uint32(1000 + r),
			StartUnixNano: start.UnixNano(), EndUnixNano: end.UnixNano(),
		}
		out[r] = w
		if hung >= 0 {
			// Everyone but the hung rank waits in the collective after
			// the hang began; the hung rank is behind (or silent).
			if r == hung {
				w.CollectivesStarted, w.CollectivesDone = s.started[r], s.started[r]
			} else {
				w.CollectivesStarted, w.CollectivesDone = s.started[r]+1, s.started[r]
				w.InFlightSinceUnixNano = s.t0.Add(time.Duration(s.hangAt[hung]) * time.Second).UnixNano()
			}
			continue
		}
		n := uint64(300)
		s.started[r] += n
		w.CollectivesStarted, w.CollectivesDone = s.started[r], s.started[r]
		coll := (time.Millisecond + maxStraggle - s.straggle[r]).Nanoseconds()
		w.Collectives = []*ginv1.CollectiveWindow{{Collective: "all_reduce", Log2Bytes: 23, Count: uint32(n), SumNs: uint64(float64(coll*int64(n)) * jit()), MaxNs: uint64(coll * 2)}}
		net := func(from int) uint64 {
			f := s.slow[from]
			if f == 0 {
				f = 1
			}
			return uint64(float64(250*time.Microsecond) * 4 * float64(n) * f * jit())
		}
		bytes := uint64(8<<20) * n
		w.Peers = []*ginv1.PeerWindow{
			{Peer: uint32(next), Send: true, Bytes: bytes, Steps: uint32(4 * n), WaitNs: []uint64{1000 * n, 2000 * n, net(r)}},
			{Peer: uint32(prev), Send: false, Bytes: bytes, Steps: uint32(4 * n), WaitNs: []uint64{net(prev), 1000 * n, 1000 * n}},
		}
		period := 2*time.Millisecond + maxStraggle + time.Millisecond
		for k := uint64(0); k < 8; k++ {
			seq := (s.started[r] - n) + k*4
			seq -= seq % 4
			t := start.Add(time.Duration(seq-(s.started[r]-n)) * period).Add(s.straggle[r])
			w.Arrivals = append(w.Arrivals, &ginv1.Arrival{Seq: seq, StartUnixNano: t.UnixNano()})
		}
	}
	return out, end
}

func run(t *testing.T, s *sim, n int) (*Detector, time.Time) {
	t.Helper()
	d := New(Config{}, nil)
	var now time.Time
	for i := 0; i < n; i++ {
		ws, end := s.windows(i)
		now = end
		for r, w := range ws {
			if s.silent[r] && i >= s.hangAt[r] {
				continue
			}
			if err := d.Add(s.node(r), w, now); err != nil {
				t.Fatal(err)
			}
		}
		d.Evaluate(now)
	}
	return d, now
}

func TestVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*sim)
		want  string // kind node component, "" for none
	}{
		{"clean", func(*sim) {}, ""},
		{"slow sender", func(s *sim) { s.slow[5] = 1.5 }, "slow-link node003 mlx5_1"},
		{"straggler", func(s *sim) { s.straggle[9] = 3 * time.Millisecond }, "straggler node005 gpu1"},
		{"hung rank behind", func(s *sim) { s.hangAt[6] = 10 }, "hang node004 gpu0"},
		{"stopped rank silent", func(s *sim) { s.hangAt[11] = 10; s.silent[11] = true }, "hang node006 gpu1"},
	} {
		for seed := uint64(1); seed <= 5; seed++ {
			t.Run(fmt.Sprintf("%s/%d", tc.name, seed), func(t *testing.T) {
				s := newSim(seed)
				tc.setup(s)
				d, now := run(t, s, 20)
				live, ok := d.Job("4242", now)
				if !ok {
					t.Fatal("job unknown")
				}
				var got []string
				for _, sp := range live.GetSuspects() {
					got = append(got, sp.GetKind()+" "+sp.GetNode()+" "+sp.GetComponent())
					if !sp.GetConfirmed() {
						t.Errorf("%s not confirmed after 20 windows", sp.GetKind())
					}
					if len(sp.GetEvidence()) == 0 || sp.GetSlowdown() <= 1 {
						t.Errorf("suspect without evidence or slowdown: %+v", sp)
					}
				}
				want := []string{}
				if tc.want != "" {
					want = []string{tc.want}
				}
				if strings.Join(got, ";") != strings.Join(want, ";") {
					t.Fatalf("suspects %q, want %q\n%v", got, want, live.GetSuspects())
				}
				if len(live.GetRanks()) != 16 || live.GetMissingRanks() != 0 {
					t.Errorf("%d ranks, %d missing", len(live.GetRanks()), live.GetMissingRanks())
				}
			})
		}
	}
}

func TestSlowdownNumbers(t *testing.T) {
	s := newSim(7)
	s.slow[5] = 1.5
	d, now := run(t, s, 12)
	live, _ := d.Job("4242", now)
	sp := live.GetSuspects()[0]
	if sp.GetSlowdown() < 1.4 || sp.GetSlowdown() > 1.6 {
		t.Errorf("slowdown %.2f, want about 1.5", sp.GetSlowdown())
	}
	if !strings.Contains(strings.Join(sp.GetEvidence(), "\n"), "rank 7 (node004 gpu1 mlx5_1) receiving from it waits") {
		t.Errorf("evidence does not name the receiver:\n%s", strings.Join(sp.GetEvidence(), "\n"))
	}
	st := newSim(7)
	st.straggle[9] = 3 * time.Millisecond
	d, now = run(t, st, 12)
	live, _ = d.Job("4242", now)
	sp = live.GetSuspects()[0]
	// A step is 2 ms compute + 3 ms straggle + 1 ms transfer for the
	// others; without the wait 3 ms: 2x.
	if sp.GetSlowdown() < 1.8 || sp.GetSlowdown() > 2.2 {
		t.Errorf("straggler slowdown %.2f, want about 2\n%s", sp.GetSlowdown(), strings.Join(sp.GetEvidence(), "\n"))
	}
}

func TestHangSinceIsOnset(t *testing.T) {
	s := newSim(3)
	s.hangAt[6] = 10
	d := New(Config{}, nil)
	onset := s.t0.Add(10 * time.Second)
	for i := 0; i < 30; i++ {
		ws, end := s.windows(i)
		for r, w := range ws {
			if err := d.Add(s.node(r), w, end); err != nil {
				t.Fatal(err)
			}
		}
		d.Evaluate(end)
		live, _ := d.Job("4242", end)
		if n := len(live.GetSuspects()); n > 0 {
			at := end.Sub(onset)
			if at > 10*time.Second || at < 4*time.Second {
				t.Fatalf("hang named %s after onset, want within 4..10 s", at)
			}
			if !live.GetSuspects()[0].GetSince().AsTime().Equal(onset) {
				t.Errorf("since %s, want the onset %s", live.GetSuspects()[0].GetSince().AsTime(), onset)
			}
			return
		}
	}
	t.Fatal("hang never named")
}

func TestTooFewRanksNoVerdict(t *testing.T) {
	d := New(Config{}, nil)
	s := newSim(1)
	s.slow[0] = 3
	ws, end := s.windows(0)
	for r := 0; r < 2; r++ {
		_ = d.Add(s.node(r), ws[r], end)
	}
	for range 5 {
		d.Evaluate(end)
	}
	live, _ := d.Job("4242", end)
	if len(live.GetSuspects()) != 0 {
		t.Fatalf("two ranks gave suspects %v", live.GetSuspects())
	}
	if live.GetMissingRanks() != 14 {
		t.Errorf("missing %d ranks, want 14", live.GetMissingRanks())
	}
}

func TestAddRefuses(t *testing.T) {
	d := New(Config{MaxJobs: 1}, nil)
	now := time.Unix(1_800_000_000, 0)
	ok := &ginv1.RankWindow{Job: "a", CommId: 1, Nranks: 4, Rank: 0}
	for _, tc := range []struct {
		name string
		w    *ginv1.RankWindow
		want error
	}{
		{"no job", &ginv1.RankWindow{Nranks: 1}, ErrNoJob},
		{"rank past nranks", &ginv1.RankWindow{Job: "a", Nranks: 2, Rank: 2}, ErrBadWindow},
		{"done past started", &ginv1.RankWindow{Job: "a", Nranks: 2, CollectivesDone: 1}, ErrBadWindow},
		{"peer past nranks", &ginv1.RankWindow{Job: "a", Nranks: 2, Peers: []*ginv1.PeerWindow{{Peer: 5, WaitNs: []uint64{0, 0, 0}}}}, ErrBadWindow},
		{"waits not three", &ginv1.RankWindow{Job: "a", Nranks: 2, Peers: []*ginv1.PeerWindow{{Peer: 1}}}, ErrBadWindow},
		{"second job past the bound", &ginv1.RankWindow{Job: "b", Nranks: 1}, ErrTooMany},
		{"comm size changes", &ginv1.RankWindow{Job: "a", CommId: 1, Nranks: 8}, ErrBadWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := d.Add("n1", ok, now); err != nil {
				t.Fatal(err)
			}
			if err := d.Add("n1", tc.w, now); err == nil || !errorsIs(err, tc.want) {
				t.Fatalf("Add: %v, want %v", err, tc.want)
			}
		})
	}
	// Past the horizon the job is forgotten and a new one fits.
	if err := d.Add("n1", &ginv1.RankWindow{Job: "b", Nranks: 1}, now.Add(3*time.Minute)); err != nil {
		t.Fatalf("after the horizon: %v", err)
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
