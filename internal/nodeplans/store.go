package nodeplans

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/planread"
	"github.com/gin-topology/gin/internal/plansock"
	"github.com/gin-topology/gin/internal/plantable"
)

// Fetcher asks the masters for a job's plan (GetOrCreatePlan).
type Fetcher interface {
	FetchPlan(ctx context.Context, r plansock.Request) (*ginv1.Plan, error)
}

// Defaults.
const (
	// FailureTTL is how long a failed fetch is the answer for its job to
	// the user whose request it was.
	FailureTTL = 30 * time.Second
	// MaxPlans bounds the plans held (jobs on one node at once).
	MaxPlans = 4096
	// MaxJobsPerUID bounds the distinct jobs not held that one user other
	// than root may have the store ask the masters for within FailureTTL:
	// a rank asks for its own job, so 64 is far more than any user's
	// ranks need, and a local user cannot make the masters look up, or the
	// store remember, thousands of job ids. Past it the request is
	// refused (UNAVAILABLE) without a fetch; root is not bounded.
	MaxJobsPerUID = 64
	// MaxMisses bounds the failed fetches remembered, all users together;
	// past it a failure is answered but not remembered (a miss never takes
	// the place of a plan).
	MaxMisses = 16384
	// fetchTimeout bounds one fetch from the masters.
	fetchTimeout = 10 * time.Second
)

// entry is what the store holds for a job.
type entry struct {
	plan  []byte // encoded, verified (the body of planFrame)
	table []byte // its compiled decision table, plantable's C form (the body of tableFrame)
	hash  string
	// planFrame and tableFrame are the complete plansock answers (OK) with
	// plan and table, encoded once for every rank that asks.
	planFrame, tableFrame []byte
	expires               time.Time // zero: no expiry given
	added                 time.Time
	// claimed: pushed by the leader, fetched for root (the prolog) or kept
	// across a restart. A plan fetched for another user is unclaimed: it
	// is kept only while there is room and is the first to go when a
	// claimed plan needs room, so no user can push a job's plan out.
	claimed bool
}

// asker is who asked, for what: misses and fetches in flight are kept per
// user, so that what one user asks changes nothing another user (root's
// prolog, another job's ranks) gets.
type asker struct {
	uid uint32
	job string
}

// miss is a failed fetch, the answer to its user for FailureTTL.
type miss struct {
	err    error
	failed time.Time
}

// call is a fetch in flight; its waiters share the outcome.
type call struct {
	done chan struct{}
	e    entry
	err  error
}

// Store holds the node's plans.
type Store struct {
	dir   string
	fetch Fetcher
	log   *slog.Logger
	now   func() time.Time
	// syncFile is f.Sync (a test's hook holds it to prove no lock is held
	// across it).
	syncFile func(*os.File) error

	mu       sync.Mutex
	plans    map[string]entry // held plans only, never a failure
	misses   map[asker]miss
	inflight map[asker]*call
	// asked is, per user other than root, the jobs not held that the user
	// had the store fetch in the last FailureTTL (MaxJobsPerUID).
	asked   map[uint32]map[string]time.Time
	fetches int // requests that reached the masters
	refused uint64
	results map[string]uint64
}

// Fetch results (FetchResults): a verified plan kept, no plan for the job
// (the masters said so), or no plan had (masters unreachable or failing, a
// plan that failed verification, the store refused it).
const (
	FetchOK       = "ok"
	FetchNotFound = "not_found"
	FetchError    = "error"
)

// Options configure a Store.
type Options struct {
	// Dir keeps the plans across agent restarts; empty: memory only.
	Dir     string
	Fetcher Fetcher
	Log     *slog.Logger
	Now     func() time.Time // for tests; time.Now by default
}

// Open creates a store and loads the plans kept in o.Dir (created 0700 when
// missing; refused when another user owns it or others may write to it).
// Files that fail verification or have expired are removed and logged.
func Open(o Options) (*Store, error) {
	s := &Store{dir: o.Dir, fetch: o.Fetcher, log: o.Log, now: o.Now, syncFile: (*os.File).Sync,
		plans: map[string]entry{}, misses: map[asker]miss{}, inflight: map[asker]*call{},
		asked:   map[uint32]map[string]time.Time{},
		results: map[string]uint64{FetchOK: 0, FetchNotFound: 0, FetchError: 0}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.dir == "" {
		return s, nil
	}
	if err := checkDir(s.dir); err != nil {
		return nil, err
	}
	names, err := filepath.Glob(filepath.Join(s.dir, "*.pb"))
	if err != nil {
		return nil, fmt.Errorf("plan dir %s: %w", s.dir, err)
	}
	for _, name := range names {
		b, err := readFile(name)
		var p *ginv1.Plan
		if err == nil {
			p, err = planread.Decode(b)
		}
		if err == nil && fileName(p.GetJobId()) != filepath.Base(name) {
			err = fmt.Errorf("holds the plan of job %q", p.GetJobId())
		}
		if err == nil && expired(p, s.now()) {
			err = errors.New("expired")
		}
		if err != nil {
			s.log.Warn("plan dir: dropping a kept plan", "file", name, "err", err)
			_ = os.Remove(name)
			continue
		}
		e := entryOf(p, b)
		e.added, e.claimed = s.now(), true
		s.plans[p.GetJobId()] = e
	}
	s.log.Info("plan store opened", "dir", s.dir, "plans", len(s.plans))
	return s, nil
}

// checkDir makes dir (0700) or checks that it is this user's and that no
// one else may write to it.
func checkDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("plan dir %s: %w", dir, err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("plan dir %s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("plan dir %s: not a directory", dir)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("plan dir %s: owned by uid %d, not by this agent (uid %d)", dir, sys.Uid, os.Geteuid())
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("plan dir %s: writable by others (mode %v)", dir, st.Mode().Perm())
	}
	return nil
}

// readFile reads a regular file without following a link, bounded.
func readFile(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > planread.MaxBytes {
		return nil, fmt.Errorf("not a regular file of at most %d bytes", planread.MaxBytes)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, err
	}
	return b, nil
}

// fileName is the job's file: a hash of the job id, so that any id is a
// safe name.
func fileName(job string) string {
	sum := sha256.Sum256([]byte(job))
	return hex.EncodeToString(sum[:16]) + ".pb"
}

func expired(p *ginv1.Plan, now time.Time) bool {
	return p.GetExpiresAt() != nil && !now.Before(p.GetExpiresAt().AsTime())
}

func entryOf(p *ginv1.Plan, b []byte) entry {
	e := entry{plan: b, hash: p.GetContentHash()}
	if f, err := plansock.AppendResponse(nil, plansock.Response{Status: plansock.StatusOK, Hash: e.hash, Body: b}); err == nil {
		e.planFrame, e.plan = f, f[len(f)-len(b):]
	}
	// A plan too odd to encode as a table (planread already bounds job ids
	// and rules) is still served in its own form.
	e.table, _ = plantable.Encode(p.GetJobId(), p.GetContentHash(), plantable.Compile(p))
	if e.table != nil {
		if f, err := plansock.AppendResponse(nil, plansock.Response{Status: plansock.StatusOK, Hash: e.hash, Body: e.table}); err == nil {
			e.tableFrame, e.table = f, f[len(f)-len(e.table):]
		}
	}
	if p.GetExpiresAt() != nil {
		e.expires = p.GetExpiresAt().AsTime()
	}
	return e
}

// in is the entry in the form a request asks for.
func (e entry) in(f plansock.Form) ([]byte, string, error) {
	if f != plansock.FormTable {
		return e.plan, e.hash, nil
	}
	if e.table == nil {
		return nil, "", errors.New("the plan cannot be given as a table")
	}
	return e.table, e.hash, nil
}

// frame is the entry's prepared answer in form f, or nil.
func (e entry) frame(f plansock.Form) []byte {
	if f == plansock.FormTable {
		return e.tableFrame
	}
	return e.planFrame
}

// CachedFrame is the plansock server's fast path (plansock.FrameCache): the
// prepared answer for a job whose plan is held and not expired.
func (s *Store) CachedFrame(job []byte, f plansock.Form) ([]byte, string, bool) {
	s.mu.Lock()
	e, ok := s.plans[string(job)]
	s.mu.Unlock()
	if !ok || (!e.expires.IsZero() && !s.now().Before(e.expires)) {
		return nil, "", false
	}
	fr := e.frame(f)
	return fr, e.hash, fr != nil
}

// Put stores a plan (verified first) and keeps it on disk. A job's plan is
// pinned: a different plan for a job already held is refused.
func (s *Store) Put(p *ginv1.Plan) error {
	if err := planread.Verify(p); err != nil {
		return err
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	if err != nil {
		return fmt.Errorf("plan of job %s: %w", p.GetJobId(), err)
	}
	if len(b) > planread.MaxBytes {
		return fmt.Errorf("plan of job %s: %d bytes, more than %d", p.GetJobId(), len(b), planread.MaxBytes)
	}
	s.mu.Lock()
	e, added, err := s.putLocked(p, b, true)
	s.mu.Unlock()
	if err == nil && added {
		s.persist(p.GetJobId(), e.hash, b)
	}
	return err
}

// putLocked keeps a verified plan and returns its entry; added says it is
// newly held, and then the caller persists it (persist) once it has let
// go of the lock. A claimed plan makes room when the store is full
// (dropping an unclaimed plan first); an unclaimed one is kept only when
// there is room, and is otherwise only answered.
func (s *Store) putLocked(p *ginv1.Plan, b []byte, claimed bool) (e entry, added bool, err error) {
	job := p.GetJobId()
	if old, ok := s.plans[job]; ok {
		if old.hash != p.GetContentHash() {
			return entry{}, false, fmt.Errorf("job %s: holds plan %.12s, refusing a different one (%.12s)", job, old.hash, p.GetContentHash())
		}
		if claimed && !old.claimed {
			old.claimed = true
			s.plans[job] = old
		}
		return old, false, nil
	}
	if expired(p, s.now()) {
		return entry{}, false, fmt.Errorf("job %s: the plan expired at %s", job, p.GetExpiresAt().AsTime().Format(time.RFC3339))
	}
	s.sweepLocked()
	e = entryOf(p, b)
	e.added, e.claimed = s.now(), claimed
	if len(s.plans) >= MaxPlans {
		if !claimed {
			s.log.Info("plan store full, a plan fetched for a user other than root is answered but not kept", "job", job, "limit", MaxPlans)
			return e, false, nil
		}
		s.evictOldestLocked()
	}
	s.plans[job] = e
	return e, s.dir != "", nil
}

// persist writes a newly held plan's file. The write and its fsync run
// without the store's lock, so a slow disk delays only the caller that
// brought the plan, never a rank's answer; the rename into place takes
// the lock and happens only while the store still holds that plan, so a
// plan dropped or replaced meanwhile (expiry, eviction, delete) leaves no
// file behind, and the file of a held plan is always that plan's.
func (s *Store) persist(job, hash string, b []byte) {
	tmp, err := s.writeTemp(b)
	if err != nil {
		s.log.Warn("plan dir: plan kept in memory only", "job", job, "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.plans[job]; !ok || e.hash != hash {
		_ = os.Remove(tmp)
		return
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, fileName(job))); err != nil {
		_ = os.Remove(tmp)
		s.log.Warn("plan dir: plan kept in memory only", "job", job, "err", err)
	}
}

// writeTemp writes b to a new temporary file in the plan dir and syncs it.
func (s *Store) writeTemp(b []byte) (string, error) {
	f, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = s.syncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// evictOldestLocked drops the unclaimed plan held longest, or when every
// plan is claimed the plan held longest (a full store makes room for a
// starting job rather than refuse it; the oldest job has long started).
func (s *Store) evictOldestLocked() {
	oldest, first, firstClaimed := "", time.Time{}, true
	for job, e := range s.plans {
		better := e.added.Before(first)
		if e.claimed != firstClaimed {
			better = !e.claimed
		}
		if oldest == "" || better {
			oldest, first, firstClaimed = job, e.added, e.claimed
		}
	}
	if oldest == "" {
		return
	}
	delete(s.plans, oldest)
	if s.dir != "" {
		_ = os.Remove(filepath.Join(s.dir, fileName(oldest)))
	}
	s.log.Info("plan store full, dropped the plan held longest", "job", oldest, "limit", MaxPlans)
}

// sweepLocked drops expired plans, stale failures and the stale record of
// what each user asked.
func (s *Store) sweepLocked() {
	now := s.now()
	for a, m := range s.misses {
		if now.Sub(m.failed) >= FailureTTL {
			delete(s.misses, a)
		}
	}
	for uid := range s.asked {
		s.pruneAskedLocked(uid, now)
	}
	for job, e := range s.plans {
		switch {
		case !e.expires.IsZero() && !now.Before(e.expires):
			delete(s.plans, job)
			if s.dir != "" {
				_ = os.Remove(filepath.Join(s.dir, fileName(job)))
			}
			s.log.Info("plan expired and dropped", "job", job, "hash", e.hash)
		}
	}
}

// Sweep drops expired plans now (Run calls it every minute).
func (s *Store) Sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked()
}

// Run sweeps expired plans every interval until ctx ends.
func (s *Store) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Sweep()
		}
	}
}

// Fetches is the number of requests that reached the masters.
func (s *Store) Fetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetches
}

// FetchResults is how many fetches from the masters ended with each
// result (FetchOK, FetchNotFound, FetchError) since the store opened, zeros
// included.
func (s *Store) FetchResults() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]uint64, len(s.results))
	for r, n := range s.results {
		out[r] = n
	}
	return out
}

// Refused is how many requests the store refused without asking the
// masters because their user had asked for MaxJobsPerUID other jobs not
// held within FailureTTL.
func (s *Store) Refused() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// ErrTooManyJobs says that a user other than root asked for more distinct
// jobs not held than MaxJobsPerUID within FailureTTL.
var ErrTooManyJobs = errors.New("too many distinct jobs asked for")

// pruneAskedLocked forgets what uid asked more than FailureTTL ago.
func (s *Store) pruneAskedLocked(uid uint32, now time.Time) {
	jobs := s.asked[uid]
	for job, at := range jobs {
		if now.Sub(at) >= FailureTTL {
			delete(jobs, job)
		}
	}
	if len(jobs) == 0 {
		delete(s.asked, uid)
	}
}

// Plan answers a plan request (plansock.Source): from memory, else by one
// fetch from the masters shared by every concurrent request of the job
// from the same user (r.UID). A failed fetch is that user's answer for
// the job for FailureTTL; no other user's request sees it or waits on it.
func (s *Store) Plan(ctx context.Context, r plansock.Request) ([]byte, string, error) {
	who := asker{uid: r.UID, job: r.JobID}
	s.mu.Lock()
	now := s.now()
	if e, ok := s.plans[r.JobID]; ok {
		if e.expires.IsZero() || now.Before(e.expires) {
			s.mu.Unlock()
			return e.in(r.Form)
		}
		s.sweepLocked()
	}
	if m, ok := s.misses[who]; ok {
		if now.Sub(m.failed) < FailureTTL {
			s.mu.Unlock()
			return nil, "", m.err
		}
		delete(s.misses, who)
	}
	c, ok := s.inflight[who]
	if !ok {
		if s.fetch == nil {
			s.mu.Unlock()
			return nil, "", fmt.Errorf("job %s: %w on this node (no masters configured)", r.JobID, plansock.ErrNotFound)
		}
		if err := s.admitLocked(who, now); err != nil {
			s.mu.Unlock()
			return nil, "", err
		}
		c = &call{done: make(chan struct{})}
		s.inflight[who] = c
		s.fetches++
		go s.fetchFor(r, c)
	}
	s.mu.Unlock()
	select {
	case <-c.done:
		if c.err != nil {
			return nil, "", c.err
		}
		return c.e.in(r.Form)
	case <-ctx.Done():
		return nil, "", fmt.Errorf("job %s: waiting for the masters: %w", r.JobID, ctx.Err())
	}
}

// admitLocked records that who's user has the store fetch who's job, or
// refuses it past MaxJobsPerUID (root is not bounded).
func (s *Store) admitLocked(who asker, now time.Time) error {
	if who.uid == 0 {
		return nil
	}
	s.pruneAskedLocked(who.uid, now)
	jobs := s.asked[who.uid]
	if _, again := jobs[who.job]; !again && len(jobs) >= MaxJobsPerUID {
		s.refused++
		if s.refused&(s.refused-1) == 0 { // 1, 2, 4, 8...: a flood is logged, not logged per request
			s.log.Warn("plan store: a user asked for too many jobs this node does not hold; refused without asking the masters",
				"uid", who.uid, "job", who.job, "limit", MaxJobsPerUID, "window", FailureTTL, "refused_total", s.refused)
		}
		return fmt.Errorf("job %s: %w: uid %d asked for %d jobs this node does not hold in %s (at most %d)",
			who.job, ErrTooManyJobs, who.uid, len(jobs), FailureTTL, MaxJobsPerUID)
	}
	if jobs == nil {
		jobs = map[string]time.Time{}
		s.asked[who.uid] = jobs
	}
	jobs[who.job] = now
	return nil
}

// fetchFor runs one fetch (not bound to any one requester's context, so a
// rank that gives up does not fail the others) and records its outcome.
func (s *Store) fetchFor(r plansock.Request, c *call) {
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	start := s.now()
	p, err := s.fetch.FetchPlan(ctx, r)
	var b []byte
	if err == nil && p.GetJobId() != r.JobID {
		err = fmt.Errorf("the masters sent the plan of job %q", p.GetJobId())
	}
	if err == nil {
		if err = planread.Verify(p); err == nil {
			b, err = proto.MarshalOptions{Deterministic: true}.Marshal(p)
		}
	}
	who := asker{uid: r.UID, job: r.JobID}
	s.mu.Lock()
	delete(s.inflight, who)
	var e entry
	var added bool
	if err == nil {
		e, added, err = s.putLocked(p, b, r.UID == 0)
	}

	switch {
	case err == nil:
		s.results[FetchOK]++
	case errors.Is(err, plansock.ErrNotFound):
		s.results[FetchNotFound]++
	default:
		s.results[FetchError]++
	}
	if err != nil {
		if !errors.Is(err, plansock.ErrNotFound) {
			err = fmt.Errorf("job %s: no plan from the masters: %w", r.JobID, err)
		}
		c.err = err
		s.sweepLocked()
		if len(s.misses) < MaxMisses {
			s.misses[who] = miss{err: err, failed: s.now()}
		}
		s.log.Warn("plan fetch failed", "job", r.JobID, "uid", r.UID, "err", err, "took", s.now().Sub(start).Round(time.Millisecond))
	} else {
		c.e = e
		s.log.Info("plan fetched", "job", r.JobID, "uid", r.UID, "hash", c.e.hash, "took", s.now().Sub(start).Round(time.Millisecond))
	}
	s.mu.Unlock()
	// The file is written without the lock (other jobs' ranks are answered
	// meanwhile) and before this job's waiters are: an answered plan is
	// one that survives an agent restart.
	if added {
		s.persist(r.JobID, e.hash, b)
	}
	close(c.done)
}

// Jobs lists the jobs whose plans are held (for logs and tests).
func (s *Store) Jobs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for job := range s.plans {
		out = append(out, job)
	}
	return out
}

var _ plansock.Source = (*Store)(nil)

var _ Fetcher = (*Masters)(nil)

// describe is for error messages.
func describe(addrs []string) string { return strings.Join(addrs, ",") }
