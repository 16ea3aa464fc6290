package nodeplans

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/plansock"
)

// nobody is the uid of the unprivileged local user of these tests.
const nobody = 65534

// pinning answers as the masters do: a job's plan is pinned on the first
// request that carries its nodes, and a request without nodes only looks
// a pinned plan up (NOT_FOUND otherwise). It counts the requests.
type pinning struct {
	mu     sync.Mutex
	pinned map[string]*ginv1.Plan
	calls  int
}

func (m *pinning) FetchPlan(_ context.Context, r plansock.Request) (*ginv1.Plan, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if p, ok := m.pinned[r.JobID]; ok {
		return p, nil
	}
	if r.Nodes == "" {
		return nil, fmt.Errorf("job %s: %w", r.JobID, plansock.ErrNotFound)
	}
	p := planFor(r.JobID, time.Time{})
	m.pinned[r.JobID] = p
	return p, nil
}

func (m *pinning) requests() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// asNobody runs this test binary as uid nobody, asking the plan socket at
// path for every job id in jobs (TestNobodyHelper), and returns how many
// answers had each status.
func asNobody(t *testing.T, path string, jobs []string) map[string]int {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	dir, err := os.MkdirTemp("", "gnp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "nodeplans.test")
	if err := os.WriteFile(exe, self, 0o755); err != nil {
		t.Fatal(err)
	}
	list := filepath.Join(dir, "jobs")
	if err := os.WriteFile(list, []byte(strings.Join(jobs, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestNobodyHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GIN_NODEPLANS_SOCKET="+path, "GIN_NODEPLANS_JOBS="+list)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper as uid %d: %v", nobody, err)
	}
	got := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if st, n, ok := strings.Cut(sc.Text(), "="); ok && strings.HasPrefix(st, "STATUS ") {
			got[strings.TrimPrefix(st, "STATUS ")], _ = strconv.Atoi(n)
		}
	}
	return got
}

// TestNobodyHelper is the unprivileged user's process (asNobody only): it
// asks for each job of the list, with a node list as a prolog would (the
// socket drops it for a user other than root), and prints the statuses.
func TestNobodyHelper(t *testing.T) {
	path, list := os.Getenv("GIN_NODEPLANS_SOCKET"), os.Getenv("GIN_NODEPLANS_JOBS")
	if path == "" {
		t.Skip("started by asNobody only")
	}
	b, err := os.ReadFile(list)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, job := range strings.Split(string(b), "\n") {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := plansock.Fetch(ctx, path, plansock.Request{JobID: job, Nodes: "n[1-2]", GPUsPerNode: 8})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		counts[r.Status.String()]++
	}
	for st, n := range counts {
		fmt.Printf("STATUS %s=%d\n", st, n)
	}
}

// What a local user other than root asks on the plan socket changes
// nothing root or another job's ranks get (issue #21, point 3), tried as
// uid 65534 on a real socket in front of a real store with a plan dir:
// asking first for a job that has no plan yet does not make root's prolog
// for it fail, and asking for 4,300 distinct job ids neither evicts a held
// plan (nor its file) nor reaches the masters more than MaxJobsPerUID
// times.
func TestAnotherUserCannotPoisonOrEvict(t *testing.T) {
	d, err := os.MkdirTemp("", "gnu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(d, "agent.sock")
	m := &pinning{pinned: map[string]*ginv1.Plan{}}
	s, err := Open(Options{Dir: filepath.Join(d, "plans"), Fetcher: m})
	if err != nil {
		t.Fatal(err)
	}
	held := planFor("held", time.Time{})
	if err := s.Put(held); err != nil {
		t.Fatal(err)
	}
	srv, err := plansock.Listen(path, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	// Poisoning: the job's id is asked for before its prolog runs.
	got := asNobody(t, path, []string{"future"})
	if got["NOT_FOUND"] != 1 {
		t.Fatalf("uid %d asking for a job with no plan yet: %v, want NOT_FOUND", nobody, got)
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer pcancel()
	r, err := plansock.Fetch(pctx, path, plansock.Request{JobID: "future", Nodes: "n[1-2]", GPUsPerNode: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("root's prolog after uid %d asked first: %s", nobody, r.Status)
	if r.Status != plansock.StatusOK {
		t.Errorf("root's prolog for the job: %s %q, want OK (another user's miss became root's answer)", r.Status, r.Body)
	}

	// Eviction: 4,300 distinct job ids, more than the store holds.
	const distinct = 4300
	jobs := make([]string, distinct)
	for i := range jobs {
		jobs[i] = "x" + strconv.Itoa(i)
	}
	before := m.requests()
	start := time.Now()
	got = asNobody(t, path, jobs)
	took := time.Since(start)
	reached := m.requests() - before
	_, statErr := os.Stat(filepath.Join(d, "plans", fileName("held")))
	r, err = plansock.Fetch(pctx, path, plansock.Request{JobID: "held"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("uid %d asked for %d distinct jobs in %s: answers %v, %d reached the masters; held plan afterwards: %s, its file: %v",
		nobody, distinct, took.Round(time.Millisecond), got, reached, r.Status, statErr)
	if r.Status != plansock.StatusOK || r.Hash != held.GetContentHash() {
		t.Errorf("the held plan after uid %d asked for %d jobs: %s %q, want OK %s", nobody, distinct, r.Status, r.Body, held.GetContentHash())
	}
	if statErr != nil {
		t.Errorf("the held plan's file: %v", statErr)
	}
	// "future" was one of the user's MaxJobsPerUID in this window.
	if reached != MaxJobsPerUID-1 {
		t.Errorf("%d of uid %d's requests reached the masters, want %d", reached, nobody, MaxJobsPerUID-1)
	}
	if got["UNAVAILABLE"] != distinct-(MaxJobsPerUID-1) || got["NOT_FOUND"] != MaxJobsPerUID-1 {
		t.Errorf("uid %d's answers %v, want %d NOT_FOUND and the rest UNAVAILABLE", nobody, got, MaxJobsPerUID-1)
	}
	// Root and other users are not bounded by it.
	r, err = plansock.Fetch(pctx, path, plansock.Request{JobID: "next", Nodes: "n[1-2]", GPUsPerNode: 8})
	if err != nil || r.Status != plansock.StatusOK {
		t.Errorf("root's prolog for another job while uid %d is refused: %+v, %v", nobody, r, err)
	}
}
