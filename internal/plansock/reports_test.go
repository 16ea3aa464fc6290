package plansock

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

type recordingSink struct {
	mu     sync.Mutex
	frames [][]byte
	got    chan struct{}
}

func (r *recordingSink) Report(uid, pid uint32, frame []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(frame) > 12 && frame[12] == 'x' {
		return errors.New("refused by the sink")
	}
	r.frames = append(r.frames, append([]byte(nil), frame...))
	r.got <- struct{}{}
	return nil
}

func reportFrame(body string) []byte {
	b := append([]byte(ReportMagic), 1, 0, 0, 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(b[8:], uint32(len(body)))
	return append(b, body...)
}

// Reports share the plan socket: a frame reaches the sink whole (sent at
// once or a byte at a time), a bad one is refused and counted, and plan
// requests are answered as before.
func TestReportsOnThePlanSocket(t *testing.T) {
	path := sockPath(t)
	srv, err := Listen(path, &fakeSource{plans: map[string][]byte{"job-1": []byte("the plan")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink := &recordingSink{got: make(chan struct{}, 8)}
	srv.SetReportSink(sink)
	serveListening(t, srv)

	send := func(chunks ...[]byte) {
		t.Helper()
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for _, ch := range chunks {
			if _, err := c.Write(ch); err != nil {
				t.Fatal(err)
			}
		}
	}
	whole := reportFrame("hello body")
	send(whole)
	var bytewise [][]byte
	for i := range whole {
		bytewise = append(bytewise, whole[i:i+1])
	}
	send(bytewise...)
	for range 2 {
		select {
		case <-sink.got:
		case <-time.After(10 * time.Second):
			t.Fatal("report not delivered")
		}
	}
	for _, f := range sink.frames {
		if string(f) != string(whole) {
			t.Fatalf("sink got %q, want %q", f, whole)
		}
	}
	// Refused: the sink says no; too large a body; a short frame.
	send(reportFrame("x refused"))
	big := reportFrame("")
	binary.BigEndian.PutUint32(big[8:], MaxReportBody+1)
	send(big)
	send(reportFrame("short body")[:15])
	// A plan request on the same socket is still answered.
	resp, err := Fetch(context.Background(), path, Request{JobID: "job-1", Form: FormPlan})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != StatusOK || string(resp.Body) != "the plan" {
		t.Fatalf("plan request after reports: %v %s", resp.Status, resp.Body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		taken, refused := srv.Reports()
		if taken == 2 && refused == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reports taken %d, refused %d; want 2 and 3", taken, refused)
		}
		time.Sleep(10 * time.Millisecond) // the refusals are counted on the connections' goroutines
	}
}
