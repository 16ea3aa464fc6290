package plansock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/planread"
)

func TestRequestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		req  Request
		want string // "" = encodes and decodes back
	}{
		{"full", Request{JobID: "1234", Nodes: "n[1-4]", GPUsPerNode: 8, Form: FormPlan}, ""},
		{"job only", Request{JobID: "j", Form: FormPlan}, ""},
		{"table form", Request{JobID: "j", Form: FormTable}, ""},
		{"unknown form", Request{JobID: "j", Form: 3}, "unknown form"},
		{"empty job", Request{Nodes: "n1"}, "empty job id"},
		{"long job", Request{JobID: strings.Repeat("j", MaxJobID+1)}, "job id"},
		{"long nodes", Request{JobID: "1", Nodes: strings.Repeat("n", MaxNodes+1)}, "node list"},
		{"control", Request{JobID: "1\n2"}, "control"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := AppendRequest(nil, tc.req)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("AppendRequest = %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := ReadRequest(bytes.NewReader(b))
			if err != nil || got != tc.req {
				t.Fatalf("ReadRequest = %+v, %v; want %+v", got, err, tc.req)
			}
		})
	}
}

func TestReadBounds(t *testing.T) {
	good, _ := AppendRequest(nil, Request{JobID: "42", Nodes: "n1"})
	okResp, _ := AppendResponse(nil, Response{Status: StatusOK, Hash: "abc", Body: []byte("plan")})
	hugeMsg := append([]byte("GINA\x01\x01\x00\x00"), 0, 0, 0x10, 0) // NOT_FOUND with a 4 KiB message
	hugePlan := append([]byte("GINA\x01\x00\x00\x00"), 0xff, 0xff, 0xff, 0xff)
	tests := []struct {
		name string
		req  bool
		in   []byte
		want string
	}{
		{"request truncated", true, good[:len(good)-1], "GPUs per node"},
		{"request magic", true, append([]byte("HTTP"), good[4:]...), "not a GIN plan request"},
		{"request job length", true, []byte("GINQ\x01\xff\xff"), "more than"},
		{"response magic", false, append([]byte("GINQ"), okResp[4:]...), "not a GIN plan response"},
		{"response status", false, []byte("GINA\x01\x09"), "unknown status"},
		{"response message cap", false, hugeMsg, "more than 1024"},
		{"response plan cap", false, hugePlan, fmt.Sprintf("more than %d", planread.MaxBytes)},
		{"response truncated", false, okResp[:len(okResp)-1], "response body"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.req {
				_, err = ReadRequest(bytes.NewReader(tc.in))
			} else {
				_, err = ReadResponse(bytes.NewReader(tc.in))
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := AppendResponse(nil, Response{Status: StatusNotFound, Body: make([]byte, MaxMessage+1)}); err == nil {
		t.Fatal("AppendResponse encoded an oversized message")
	}
}

// FuzzReadRequest: any bytes give a valid request or an error; a valid one
// re-encodes to the same bytes it was read from.
func FuzzReadRequest(f *testing.F) {
	good, _ := AppendRequest(nil, Request{JobID: "42", Nodes: "n[1-4]", GPUsPerNode: 8})
	f.Add(good)
	f.Add(good[:7])
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ReadRequest(bytes.NewReader(b))
		if err != nil {
			return
		}
		again, err := AppendRequest(nil, r)
		if err != nil {
			t.Fatalf("accepted request does not encode: %v", err)
		}
		if !bytes.HasPrefix(b, again) {
			t.Fatalf("re-encoding differs")
		}
	})
}

// FuzzReadResponse: any bytes give a bounded response or an error.
func FuzzReadResponse(f *testing.F) {
	good, _ := AppendResponse(nil, Response{Status: StatusOK, Hash: "abc", Body: []byte("plan bytes")})
	f.Add(good)
	msg, _ := AppendResponse(nil, Response{Status: StatusUnavailable, Body: []byte("masters down")})
	f.Add(msg)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ReadResponse(bytes.NewReader(b))
		if err != nil {
			return
		}
		if len(r.Hash) > MaxHash || len(r.Body) > planread.MaxBytes || (r.Status != StatusOK && len(r.Body) > MaxMessage) {
			t.Fatalf("unbounded response accepted: hash %d, body %d", len(r.Hash), len(r.Body))
		}
	})
}

// fakeSource stands in for the agent's store: it answers from a map and
// counts calls; block makes a call wait until its context ends.
type fakeSource struct {
	mu    sync.Mutex
	plans map[string][]byte
	calls int
	last  Request
	block bool
	fail  error
}

func (f *fakeSource) Plan(ctx context.Context, r Request) ([]byte, string, error) {
	f.mu.Lock()
	f.calls++
	f.last = r
	p, ok := f.plans[r.JobID]
	f.mu.Unlock()
	if f.block {
		<-ctx.Done()
		return nil, "", ctx.Err()
	}
	if f.fail != nil {
		return nil, "", f.fail
	}
	if !ok {
		return nil, "", fmt.Errorf("job %s: %w", r.JobID, ErrNotFound)
	}
	return p, "hash-" + r.JobID, nil
}

// sockPath is a short socket path (sun_path holds 108 bytes).
func sockPath(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "gps")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return filepath.Join(d, "run", "agent.sock")
}

func serve(t *testing.T, path string, src Source) *Server {
	t.Helper()
	s, err := Listen(path, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	serveListening(t, s)
	return s
}

// serveListening serves s until the test ends.
func serveListening(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
}

func TestServeAndFetch(t *testing.T) {
	path := sockPath(t)
	src := &fakeSource{plans: map[string][]byte{"42": []byte("the plan")}}
	srv := serve(t, path, src)
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o666 {
		t.Fatalf("socket mode %v, %v; want 0666 so that every local user can ask", st.Mode(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tests := []struct {
		job    string
		status Status
		body   string
	}{
		{"42", StatusOK, "the plan"},
		{"43", StatusNotFound, "job 43: no plan for this job"},
	}
	for _, tc := range tests {
		r, err := Fetch(ctx, path, Request{JobID: tc.job})
		if err != nil || r.Status != tc.status || string(r.Body) != tc.body {
			t.Fatalf("job %s: %+v, %v; want %v %q", tc.job, r, err, tc.status, tc.body)
		}
	}
	// Many ranks at once, as at a job start.
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Go(func() {
			r, err := Fetch(ctx, path, Request{JobID: "42"})
			if err == nil && (r.Status != StatusOK || r.Hash != "hash-42") {
				err = fmt.Errorf("got %+v", r)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	wantAnswered(t, srv, map[string]uint64{"OK": 65, "NOT_FOUND": 1})
}

// wantAnswered checks the server's answer counts (zeros for the statuses
// not in want, and every status reported).
func wantAnswered(t *testing.T, srv *Server, want map[string]uint64) {
	t.Helper()
	got := srv.Answered()
	for _, st := range []Status{StatusOK, StatusNotFound, StatusUnavailable, StatusBadRequest} {
		n, ok := got[st.String()]
		if !ok || n != want[st.String()] {
			t.Errorf("answered %s = %d (reported %v), want %d", st, n, ok, want[st.String()])
		}
	}
}

func TestServerAnswersUnavailableAndBadRequests(t *testing.T) {
	path := sockPath(t)
	srv := serve(t, path, &fakeSource{fail: errors.New("masters unreachable")})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := Fetch(ctx, path, Request{JobID: "42"})
	if err != nil || r.Status != StatusUnavailable || string(r.Body) != "masters unreachable" {
		t.Fatalf("%+v, %v", r, err)
	}
	// Garbage instead of a request: a BAD_REQUEST answer, and the server
	// goes on serving.
	c, err := (&net.Dialer{}).DialContext(ctx, "unix", path)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	resp, err := ReadResponse(c)
	_ = c.Close()
	if err != nil || resp.Status != StatusBadRequest || !strings.Contains(string(resp.Body), "not a GIN plan request") {
		t.Fatalf("%+v, %v", resp, err)
	}
	if r, err := Fetch(ctx, path, Request{JobID: "42"}); err != nil || r.Status != StatusUnavailable {
		t.Fatalf("after garbage: %+v, %v", r, err)
	}
	wantAnswered(t, srv, map[string]uint64{"UNAVAILABLE": 2, "BAD_REQUEST": 1})
}

func TestFetchHonoursTheDeadline(t *testing.T) {
	path := sockPath(t)
	serve(t, path, &fakeSource{block: true})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := Fetch(ctx, path, Request{JobID: "42"})
	if err == nil || !strings.Contains(err.Error(), "no answer in time") {
		t.Fatalf("Fetch = %v, want a deadline error", err)
	}
}

func TestListen(t *testing.T) {
	t.Run("stale socket replaced", func(t *testing.T) {
		path := sockPath(t)
		s, err := Listen(path, &fakeSource{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// A killed agent leaves its socket behind (no unlink on close).
		s.unlink = false
		_ = s.Close()
		serve(t, path, &fakeSource{plans: map[string][]byte{"1": []byte("p")}})
		if r, err := Fetch(context.Background(), path, Request{JobID: "1"}); err != nil || r.Status != StatusOK {
			t.Fatalf("%+v, %v", r, err)
		}
	})
	t.Run("a live socket is not stolen", func(t *testing.T) {
		path := sockPath(t)
		serve(t, path, &fakeSource{plans: map[string][]byte{"1": []byte("p")}})
		if _, err := Listen(path, &fakeSource{}, nil); err == nil || !strings.Contains(err.Error(), "another process serves it") {
			t.Fatalf("Listen = %v", err)
		}
		if r, err := Fetch(context.Background(), path, Request{JobID: "1"}); err != nil || r.Status != StatusOK {
			t.Fatalf("the first server lost its socket: %+v, %v", r, err)
		}
	})
	t.Run("other file refused and kept", func(t *testing.T) {
		path := sockPath(t)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Listen(path, &fakeSource{}, nil); err == nil || !strings.Contains(err.Error(), "not a socket") {
			t.Fatalf("Listen = %v", err)
		}
		if b, _ := os.ReadFile(path); string(b) != "keep" {
			t.Fatal("the file was touched")
		}
	})
	t.Run("no agent", func(t *testing.T) {
		_, err := Fetch(context.Background(), sockPath(t), Request{JobID: "1"})
		if err == nil || !strings.Contains(err.Error(), "agent socket") {
			t.Fatalf("Fetch = %v", err)
		}
	})
}
