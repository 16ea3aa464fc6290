package nodeplans

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/plansock"
)

// A miss is its user's answer only, and a user's fetch in flight is not
// another user's: root's request for the job goes to the masters itself.
func TestMissesAndFetchesArePerUser(t *testing.T) {
	tests := []struct {
		name        string
		first, then uint32 // uids
		wantThen    error  // nil: a plan
	}{
		{"another user's miss is not root's", nobody, 0, nil},
		{"another user's miss is not a rank's", nobody, 1000, nil},
		{"root's miss is not another user's", 0, nobody, nil},
		{"a user's miss is its own answer for a while", nobody, nobody, plansock.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &pinning{pinned: map[string]*ginv1.Plan{}}
			s, err := Open(Options{Fetcher: m})
			if err != nil {
				t.Fatal(err)
			}
			// The first asks without nodes: a miss (no plan pinned yet).
			if _, _, err := s.Plan(context.Background(), plansock.Request{JobID: "j", UID: tt.first}); !errors.Is(err, plansock.ErrNotFound) {
				t.Fatalf("first request: %v, want not found", err)
			}
			// The prolog has the plan pinned (nodes given) on another node.
			m.mu.Lock()
			m.pinned["j"] = planFor("j", time.Time{})
			m.mu.Unlock()
			_, _, err = s.Plan(context.Background(), plansock.Request{JobID: "j", UID: tt.then})
			if (tt.wantThen == nil) != (err == nil) || (tt.wantThen != nil && !errors.Is(err, tt.wantThen)) {
				t.Fatalf("then uid %d: %v, want %v", tt.then, err, tt.wantThen)
			}
		})
	}
}

func TestAFetchInFlightIsNotSharedAcrossUsers(t *testing.T) {
	f := &fetcher{gate: make(chan struct{})}
	s, err := Open(Options{Fetcher: f})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() {
		_, _, err := s.Plan(context.Background(), plansock.Request{JobID: "7", UID: nobody})
		done <- err
	}()
	waitFor(t, func() bool { return f.calls.Load() == 1 })
	go func() {
		_, _, err := s.Plan(context.Background(), plansock.Request{JobID: "7", Nodes: "n[1-2]"})
		done <- err
	}()
	waitFor(t, func() bool { return f.calls.Load() == 2 })
	close(f.gate)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestDistinctJobsPerUserAreBounded(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	m := &pinning{pinned: map[string]*ginv1.Plan{}}
	s, err := Open(Options{Fetcher: m, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(uid uint32, job string) error {
		_, _, err := s.Plan(context.Background(), plansock.Request{JobID: job, UID: uid})
		return err
	}
	for i := range MaxJobsPerUID {
		if err := ask(nobody, fmt.Sprint(i)); !errors.Is(err, plansock.ErrNotFound) {
			t.Fatalf("job %d: %v", i, err)
		}
	}
	err = ask(nobody, "one more")
	if !errors.Is(err, ErrTooManyJobs) || errors.Is(err, plansock.ErrNotFound) {
		t.Fatalf("past the bound: %v, want ErrTooManyJobs (not a miss)", err)
	}
	if m.requests() != MaxJobsPerUID || s.Refused() != 1 {
		t.Fatalf("%d requests reached the masters, %d refused; want %d, 1", m.requests(), s.Refused(), MaxJobsPerUID)
	}
	// A job already asked is not a new one; other users are not bounded by it.
	if err := ask(nobody, "0"); !errors.Is(err, plansock.ErrNotFound) {
		t.Fatalf("a job asked before: %v", err)
	}
	for _, uid := range []uint32{0, 1000} {
		if err := ask(uid, "one more"); !errors.Is(err, plansock.ErrNotFound) {
			t.Fatalf("uid %d: %v", uid, err)
		}
	}
	c.add(FailureTTL)
	if err := ask(nobody, "one more"); !errors.Is(err, plansock.ErrNotFound) {
		t.Fatalf("after the window: %v", err)
	}
}

// A plan fetched for a user other than root never pushes a claimed plan
// out: it is kept only while there is room, and it is the first to go when
// a claimed plan needs room.
func TestUnclaimedPlansNeverEvictClaimedOnes(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	m := &pinning{pinned: map[string]*ginv1.Plan{"other": planFor("other", time.Time{}), "u": planFor("u", time.Time{})}}
	s, err := Open(Options{Fetcher: m, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	// An unclaimed plan, held longest.
	if _, _, err := s.Plan(context.Background(), plansock.Request{JobID: "u", UID: nobody}); err != nil {
		t.Fatal(err)
	}
	for i := range MaxPlans - 1 {
		c.add(time.Millisecond)
		if err := s.Put(planFor(fmt.Sprint(i), time.Time{})); err != nil {
			t.Fatal(err)
		}
	}
	c.add(time.Millisecond)
	if err := s.Put(planFor("new", time.Time{})); err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	for _, j := range s.Jobs() {
		held[j] = true
	}
	if held["u"] || !held["0"] || !held["new"] || len(held) != MaxPlans {
		t.Fatalf("after a claimed plan needed room: u held %v, 0 held %v, new held %v, %d held", held["u"], held["0"], held["new"], len(held))
	}
	// Full of claimed plans: an unclaimed one is answered, not kept.
	if _, h, err := s.Plan(context.Background(), plansock.Request{JobID: "other", UID: nobody}); err != nil || h == "" {
		t.Fatalf("unclaimed plan in a full store: %q, %v", h, err)
	}
	for _, j := range s.Jobs() {
		if j == "other" {
			t.Fatal("an unclaimed plan was kept in a full store")
		}
	}
	if n := len(s.Jobs()); n != MaxPlans {
		t.Fatalf("%d plans held, want %d", n, MaxPlans)
	}
}
