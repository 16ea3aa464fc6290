package plansock

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// framedSource is fakeSource with prepared answers for the jobs in frames
// (FrameCache), as the agent's store offers them.
type framedSource struct {
	fakeSource
	frames map[string][]byte
}

func (f *framedSource) CachedFrame(job []byte, form Form) ([]byte, string, bool) {
	fr, ok := f.frames[string(job)]
	return fr, "hash-" + string(job), ok && form == FormTable
}

// TestServeFromPreparedAnswers: a held plan is answered with the source's
// prepared bytes whichever way the request arrives (at once, or in pieces
// the accept loop cannot wait for); anything else goes to Plan as before.
func TestServeFromPreparedAnswers(t *testing.T) {
	path := sockPath(t)
	table := bytes.Repeat([]byte{7}, 3000)
	frame, err := AppendResponse(nil, Response{Status: StatusOK, Hash: "hash-42", Body: table})
	if err != nil {
		t.Fatal(err)
	}
	src := &framedSource{fakeSource: fakeSource{plans: map[string][]byte{"42": []byte("the plan")}}, frames: map[string][]byte{"42": frame}}
	srv := serve(t, path, src)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	whole, _ := AppendRequest(nil, Request{JobID: "42", Nodes: "n[1-4]", GPUsPerNode: 8, Form: FormTable})
	tests := []struct {
		name   string
		req    Request
		split  int // write the request in two parts at this byte (0: at once)
		status Status
		body   []byte
		plans  int // calls to Plan
	}{
		{"held, at once", Request{JobID: "42", Form: FormTable}, 0, StatusOK, table, 0},
		{"held, in two parts", Request{JobID: "42", Nodes: "n[1-4]", GPUsPerNode: 8, Form: FormTable}, 3, StatusOK, table, 0},
		{"held, split in the job id", Request{JobID: "42", Nodes: "n[1-4]", GPUsPerNode: 8, Form: FormTable}, len(whole) - 12, StatusOK, table, 0},
		{"other form: Plan", Request{JobID: "42", Form: FormPlan}, 0, StatusOK, []byte("the plan"), 1},
		{"not held: Plan", Request{JobID: "43", Form: FormTable}, 0, StatusNotFound, []byte("job 43: no plan for this job"), 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src.mu.Lock()
			calls := src.calls
			src.mu.Unlock()
			req, err := AppendRequest(nil, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			c, err := (&net.Dialer{}).DialContext(ctx, "unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			parts := [][]byte{req}
			if tc.split > 0 {
				parts = [][]byte{req[:tc.split], req[tc.split:]}
			}
			for _, p := range parts {
				if _, err := c.Write(p); err != nil {
					t.Fatal(err)
				}
			}
			r, err := ReadResponse(c)
			if err != nil || r.Status != tc.status || !bytes.Equal(r.Body, tc.body) {
				t.Fatalf("%v %d bytes, %v; want %v %d bytes", r.Status, len(r.Body), err, tc.status, len(tc.body))
			}
			if tc.status == StatusOK && r.Hash != "hash-42" {
				t.Fatalf("hash %q", r.Hash)
			}
			if rest, err := io.ReadAll(c); err != nil || len(rest) != 0 {
				t.Fatalf("after the answer: %d bytes, %v; want the connection closed", len(rest), err)
			}
			src.mu.Lock()
			defer src.mu.Unlock()
			if got := src.calls - calls; got != tc.plans {
				t.Fatalf("Plan called %d times, want %d", got, tc.plans)
			}
		})
	}
	// Answers from prepared frames (at once or in serveConn) count as OK.
	wantAnswered(t, srv, map[string]uint64{"OK": 4, "NOT_FOUND": 1})
	// Garbage is still refused with BAD_REQUEST by a server with prepared answers.
	c, err := (&net.Dialer{}).DialContext(ctx, "unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	if r, err := ReadResponse(c); err != nil || r.Status != StatusBadRequest || !strings.Contains(string(r.Body), "not a GIN plan request") {
		t.Fatalf("%+v, %v", r, err)
	}
}

// FuzzParseRequest: the server's in-place parser agrees with ReadRequest on
// any bytes: the same request, or both refuse (a prefix that may still
// become a request is errShort, never a request).
func FuzzParseRequest(f *testing.F) {
	good, _ := AppendRequest(nil, Request{JobID: "42", Nodes: "n[1-4]", GPUsPerNode: 8, Form: FormTable})
	f.Add(good)
	f.Add(good[:3])
	f.Add(good[:9])
	f.Add([]byte("GINQ\x02\x00\x00\x00\x00\x00\x00\x00\x08"))
	f.Add([]byte("GINQ\x01\x00\x021\n\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > MaxRequest {
			b = b[:MaxRequest]
		}
		raw, perr := parseRequest(b)
		want, rerr := ReadRequest(bytes.NewReader(b))
		switch {
		case perr == nil && rerr == nil:
			if got := raw.request(); got != want {
				t.Fatalf("parseRequest = %+v, ReadRequest = %+v", got, want)
			}
		case perr == nil:
			t.Fatalf("parseRequest accepted what ReadRequest refuses (%v)", rerr)
		case rerr == nil:
			t.Fatalf("parseRequest refused (%v) what ReadRequest accepts", perr)
		}
	})
}
