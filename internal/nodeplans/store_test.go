package nodeplans

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/planread"
	"github.com/gin-topology/gin/internal/plansock"
	"github.com/gin-topology/gin/internal/plantable"
	"github.com/gin-topology/gin/internal/testkit"
)

// planFor is a small verified plan for job.
func planFor(job string, expires time.Time) *ginv1.Plan {
	p := &ginv1.Plan{FormatVersion: planread.FormatVersion, JobId: job, Nodes: []string{"n1", "n2"},
		Rules: []*ginv1.PlanRule{{Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, NRanks: 16, NNodes: 2,
			MaxLog2Bytes: planread.MaxLog2Bytes, Algorithm: ginv1.Algorithm_ALGORITHM_RING, Protocol: ginv1.Protocol_PROTOCOL_SIMPLE}}}
	if !expires.IsZero() {
		p.ExpiresAt = timestamppb.New(expires)
	}
	p.ContentHash = planread.Hash(p)
	return p
}

// fetcher answers as the masters would, counting requests; gate holds
// every fetch until closed.
type fetcher struct {
	calls atomic.Int32
	gate  chan struct{}
	fail  error
	exp   time.Time
}

func (f *fetcher) FetchPlan(ctx context.Context, r plansock.Request) (*ginv1.Plan, error) {
	f.calls.Add(1)
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.fail != nil {
		return nil, f.fail
	}
	return planFor(r.JobID, f.exp), nil
}

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestOneFetchPerJobWhateverTheRanks(t *testing.T) {
	f := &fetcher{gate: make(chan struct{})}
	s, err := Open(Options{Fetcher: f})
	if err != nil {
		t.Fatal(err)
	}
	const ranks = 64
	type got struct {
		hash string
		err  error
	}
	out := make(chan got, ranks)
	for range ranks {
		go func() {
			_, h, err := s.Plan(context.Background(), plansock.Request{JobID: "7", Nodes: "n[1-2]"})
			out <- got{h, err}
		}()
	}
	// Every rank is waiting on the one fetch before it is let through.
	waitFor(t, func() bool { return f.calls.Load() == 1 })
	close(f.gate)
	want := planFor("7", time.Time{}).GetContentHash()
	for range ranks {
		if g := <-out; g.err != nil || g.hash != want {
			t.Fatalf("rank got %q, %v", g.hash, g.err)
		}
	}
	if n := f.calls.Load(); n != 1 || s.Fetches() != 1 {
		t.Fatalf("%d fetches reached the masters for %d ranks, want 1", n, ranks)
	}
	// Later ranks are served from memory.
	if _, _, err := s.Plan(context.Background(), plansock.Request{JobID: "7"}); err != nil || f.calls.Load() != 1 {
		t.Fatalf("served again: %v, %d fetches", err, f.calls.Load())
	}
}

func TestAFailureIsEveryRanksAnswerForAWhile(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	f := &fetcher{fail: errors.New("connection refused")}
	s, err := Open(Options{Fetcher: f, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, _, err := s.Plan(context.Background(), plansock.Request{JobID: "8"}); err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	f.fail = nil // the masters are back, but this job start already failed here
	c.add(FailureTTL - time.Second)
	if _, _, err := s.Plan(context.Background(), plansock.Request{JobID: "8"}); err == nil {
		t.Fatal("a rank got a plan inside the failure window")
	}
	if f.calls.Load() != 1 {
		t.Fatalf("%d fetches, want 1", f.calls.Load())
	}
	// One failed fetch, however many ranks got its answer.
	wantResults(t, s, map[string]uint64{FetchError: 1})
	c.add(2 * time.Second)
	if _, _, err := s.Plan(context.Background(), plansock.Request{JobID: "8"}); err != nil {
		t.Fatalf("after the window: %v", err)
	}
	wantResults(t, s, map[string]uint64{FetchError: 1, FetchOK: 1})
	// NOT_FOUND stays NOT_FOUND for the socket's status.
	f.fail = fmt.Errorf("m1: no plan: %w", plansock.ErrNotFound)
	if _, _, err := s.Plan(context.Background(), plansock.Request{JobID: "9"}); !errors.Is(err, plansock.ErrNotFound) {
		t.Fatalf("not found: %v", err)
	}
	wantResults(t, s, map[string]uint64{FetchError: 1, FetchOK: 1, FetchNotFound: 1})
}

// wantResults checks the store's fetch results, every result reported.
func wantResults(t *testing.T, s *Store, want map[string]uint64) {
	t.Helper()
	got := s.FetchResults()
	for _, r := range []string{FetchOK, FetchNotFound, FetchError} {
		if n, ok := got[r]; !ok || n != want[r] {
			t.Errorf("fetch results %s = %d (reported %v), want %d", r, n, ok, want[r])
		}
	}
	if len(got) != 3 {
		t.Errorf("fetch results %v, want exactly ok, not_found, error", got)
	}
}

func TestAPlanThatFailsVerificationIsAFetchError(t *testing.T) {
	s, err := Open(Options{Fetcher: badFetcher{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Plan(context.Background(), plansock.Request{JobID: "5"}); err == nil {
		t.Fatal("a plan for another job was served")
	}
	wantResults(t, s, map[string]uint64{FetchError: 1})
}

// badFetcher answers with the plan of another job.
type badFetcher struct{}

func (badFetcher) FetchPlan(context.Context, plansock.Request) (*ginv1.Plan, error) {
	return planFor("other", time.Time{}), nil
}

func TestKeptAcrossRestartsAndExpired(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	dir := filepath.Join(t.TempDir(), "plans")
	f := &fetcher{exp: c.now().Add(time.Hour)}
	s, err := Open(Options{Dir: dir, Fetcher: f, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Plan(context.Background(), plansock.Request{JobID: "10"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(planFor("11", time.Time{})); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v, %v", st.Mode(), err)
	}
	// Restart with the masters gone: both plans come from the directory.
	s2, err := Open(Options{Dir: dir, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range []string{"10", "11"} {
		if _, h, err := s2.Plan(context.Background(), plansock.Request{JobID: job}); err != nil || h == "" {
			t.Fatalf("job %s after restart: %v", job, err)
		}
	}
	// Job 10 expires: it is dropped from memory and disk.
	c.add(time.Hour)
	s2.Sweep()
	if _, _, err := s2.Plan(context.Background(), plansock.Request{JobID: "10"}); !errors.Is(err, plansock.ErrNotFound) {
		t.Fatalf("expired plan: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, fileName("10"))); !os.IsNotExist(err) {
		t.Fatalf("expired plan's file: %v", err)
	}
	// A pinned plan is never replaced by a different one.
	other := planFor("11", time.Time{})
	other.Rules[0].Channels = 4
	other.ContentHash = planread.Hash(other)
	if err := s2.Put(other); err == nil || !strings.Contains(err.Error(), "refusing a different one") {
		t.Fatalf("Put of a different plan: %v", err)
	}
}

func TestBadFilesInTheDirAreDropped(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plans")
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(planFor("12", time.Time{})); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, fileName("12"))
	b, _ := os.ReadFile(good)
	tests := []struct {
		name  string
		setup func(path string) error
	}{
		{"truncated", func(p string) error { return os.WriteFile(p, b[:len(b)-2], 0o600) }},
		{"another job's plan", func(p string) error { return os.WriteFile(p, b, 0o600) }},
		{"symlink", func(p string) error { return os.Symlink(good, p) }},
		{"fifo", func(p string) error { return mkfifo(p) }},
	}
	for i, tc := range tests {
		path := filepath.Join(dir, fileName(fmt.Sprint("bad", i)))
		if err := tc.setup(path); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
	s2, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if jobs := s2.Jobs(); len(jobs) != 1 || jobs[0] != "12" {
		t.Fatalf("jobs %v, want only 12", jobs)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*.pb"))
	if len(left) != 1 {
		t.Fatalf("files left: %v", left)
	}
}

func TestDirOthersMayWriteIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plans")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Fatalf("Open = %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, "the condition", cond)
}

func TestAFullStoreDropsThePlanHeldLongest(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	s, err := Open(Options{Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	for i := range MaxPlans + 1 {
		c.add(time.Millisecond)
		if err := s.Put(planFor(fmt.Sprint(i), time.Time{})); err != nil {
			t.Fatalf("plan %d: %v", i, err)
		}
	}
	if n := len(s.Jobs()); n != MaxPlans {
		t.Fatalf("%d plans held, want %d", n, MaxPlans)
	}
	if _, _, err := s.Plan(context.Background(), plansock.Request{JobID: "0"}); !errors.Is(err, plansock.ErrNotFound) {
		t.Fatalf("the oldest plan is still held: %v", err)
	}
	if _, _, err := s.Plan(context.Background(), plansock.Request{JobID: fmt.Sprint(MaxPlans)}); err != nil {
		t.Fatalf("the newest plan: %v", err)
	}
}

// A request for the table form gets the plan's compiled table, which
// decodes to the job, its hash and the cells Compile gives.
func TestTableForm(t *testing.T) {
	s, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := planFor("13", time.Time{})
	if err := s.Put(p); err != nil {
		t.Fatal(err)
	}
	b, hash, err := s.Plan(context.Background(), plansock.Request{JobID: "13", Form: plansock.FormTable})
	if err != nil {
		t.Fatal(err)
	}
	e, err := plantable.Decode(b)
	if err != nil || e.JobID != "13" || e.Hash != hash || hash != p.GetContentHash() {
		t.Fatalf("table %+v, %v", e, err)
	}
	if want := plantable.Compile(p); len(e.Table.Shapes) != 1 || e.Table.Shapes[0] != want.Shapes[0] {
		t.Fatal("the served table is not the plan's")
	}
}

// TestPreparedAnswers: the store's prepared answers (plansock.FrameCache)
// are exactly what Plan gives, encoded as the socket sends them, for both
// forms; a job without a plan, an expired plan or a failure has none, so
// the server asks Plan.
func TestPreparedAnswers(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	s, err := Open(Options{Now: clk.now, Fetcher: &fetcher{fail: errors.New("masters down")}})
	if err != nil {
		t.Fatal(err)
	}
	p := planFor("21", clk.now().Add(time.Hour))
	if err := s.Put(p); err != nil {
		t.Fatal(err)
	}
	for _, form := range []plansock.Form{plansock.FormPlan, plansock.FormTable} {
		frame, hash, ok := s.CachedFrame([]byte("21"), form)
		if !ok || hash != p.GetContentHash() {
			t.Fatalf("form %d: no prepared answer (%v) or hash %q", form, ok, hash)
		}
		body, h, err := s.Plan(context.Background(), plansock.Request{JobID: "21", Form: form})
		if err != nil {
			t.Fatal(err)
		}
		r, err := plansock.ReadResponse(bytes.NewReader(frame))
		if err != nil || r.Status != plansock.StatusOK || r.Hash != h || !bytes.Equal(r.Body, body) {
			t.Fatalf("form %d: prepared answer %v %q %d bytes, %v; Plan gives %q %d bytes", form, r.Status, r.Hash, len(r.Body), err, h, len(body))
		}
	}
	if _, _, err := s.Plan(context.Background(), plansock.Request{JobID: "22"}); err == nil {
		t.Fatal("job 22: a plan from failing masters")
	}
	for _, job := range []string{"22", "23"} { // failed, never asked
		if _, _, ok := s.CachedFrame([]byte(job), plansock.FormTable); ok {
			t.Fatalf("job %s: a prepared answer without a plan", job)
		}
	}
	clk.add(time.Hour)
	if _, _, ok := s.CachedFrame([]byte("21"), plansock.FormTable); ok {
		t.Fatal("an expired plan's answer served")
	}
}

// TestRanksOnTheSocketWhileTheAgentFetches: ranks that ask the agent's
// socket while the one fetch is in flight, and ranks that ask after it, all
// get the same table, through the socket server's waiting path and its
// prepared-answer path.
func TestRanksOnTheSocketWhileTheAgentFetches(t *testing.T) {
	f := &fetcher{gate: make(chan struct{})}
	s, err := Open(Options{Fetcher: f})
	if err != nil {
		t.Fatal(err)
	}
	d, err := os.MkdirTemp("", "gnp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	srv, err := plansock.Listen(filepath.Join(d, "a.sock"), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	want := planFor("9", time.Time{})
	wantTable, err := plantable.Encode("9", want.GetContentHash(), plantable.Compile(want))
	if err != nil {
		t.Fatal(err)
	}
	const ranks = 16
	errs := make(chan error, 2*ranks)
	ask := func() {
		r, err := plansock.Fetch(ctx, srv.Addr(), plansock.Request{JobID: "9", Nodes: "n[1-2]", GPUsPerNode: 8, Form: plansock.FormTable})
		if err == nil && (r.Status != plansock.StatusOK || r.Hash != want.GetContentHash() || !bytes.Equal(r.Body, wantTable)) {
			err = fmt.Errorf("got %v %.12s, %d bytes", r.Status, r.Hash, len(r.Body))
		}
		errs <- err
	}
	for range ranks {
		go ask()
	}
	waitFor(t, func() bool { return f.calls.Load() == 1 })
	close(f.gate)
	for range ranks {
		go ask()
	}
	for range 2 * ranks {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("%d fetches for %d ranks, want 1", n, 2*ranks)
	}
}
