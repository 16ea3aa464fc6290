package plansock

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/ratelog"
	"github.com/gin-topology/gin/internal/testkit"
)

// fakeNow is a clock the test advances.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeNow) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeNow) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestCallerCausedLinesAreBounded: a user asking for jobs the node has no
// plan for gets every answer, but writes at most the burst of "no plan
// served" lines; once the bucket refills the next line says how many
// were left out. Before the bound, 300,000 misses wrote 300,008 lines.
func TestCallerCausedLinesAreBounded(t *testing.T) {
	path := sockPath(t)
	logs := &testkit.LogBuffer{}
	s, err := Listen(path, &fakeSource{plans: map[string][]byte{}}, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeNow{t: time.Unix(1_800_000_000, 0)}
	s.lines = ratelog.New(logLineRate, logLineBurst, clk.now)
	serveListening(t, s)
	misses := func() int { return strings.Count(logs.String(), `msg="plan socket: no plan served"`) }
	fetch := func(job string) {
		t.Helper()
		fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer fcancel()
		r, err := Fetch(fctx, path, Request{JobID: job})
		if err != nil || r.Status != StatusNotFound {
			t.Fatalf("job %s: %+v, %v; want NOT_FOUND", job, r, err)
		}
	}
	const flood = 5 * logLineBurst
	for i := range flood {
		fetch(fmt.Sprint(1000 + i))
	}
	// A line is written (or counted) just after its answer: poll (bounded).
	testkit.WaitFor(t, 10*time.Second, "every miss logged or counted", func() bool {
		return misses()+int(s.SuppressedLines()) == flood
	}, logs.String)
	if got := misses(); got != logLineBurst {
		t.Fatalf("%d miss lines for %d misses, want the burst %d:\n%s", got, flood, logLineBurst, logs.String())
	}
	if got := s.SuppressedLines(); got != flood-logLineBurst {
		t.Fatalf("SuppressedLines %d, want %d", got, flood-logLineBurst)
	}
	wantAnswered(t, s, map[string]uint64{"NOT_FOUND": flood})
	clk.advance(time.Second)
	fetch("2000")
	testkit.WaitFor(t, 10*time.Second, "the line after the refill", func() bool { return misses() == logLineBurst+1 }, logs.String)
	if want := fmt.Sprintf("suppressed=%d", flood-logLineBurst); !strings.Contains(logs.String(), want) {
		t.Fatalf("the line after the refill does not say %s:\n%s", want, logs.String())
	}
}
