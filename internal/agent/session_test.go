package agent

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// recordingStream is a session's send side that records what was sent.
type recordingStream struct {
	sent   []*ginv1.SessionRequest
	closed bool // CloseSend was called
}

func (r *recordingStream) Send(req *ginv1.SessionRequest) error {
	r.sent = append(r.sent, req)
	return nil
}

func (r *recordingStream) CloseSend() error {
	r.closed = true
	return nil
}

// newTestSession is a session on a recording stream for an agent that has
// collected once; nothing has been sent.
func newTestSession(t *testing.T) (*session, *recordingStream) {
	t.Helper()
	var logs syncBuffer
	a, err := New(testConfig(newFakeSource("H100"), &logs, "m1:5000"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.collectOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	rs := &recordingStream{}
	s := a.newSession(context.Background(), "m1:5000", rs, nil)
	t.Cleanup(s.stop)
	return s, rs
}

func helloAck(held uint64, inSync bool, hint string) *ginv1.SessionResponse {
	return &ginv1.SessionResponse{LeaderHint: hint, Msg: &ginv1.SessionResponse_HelloAck{HelloAck: &ginv1.HelloAck{HeldGeneration: held, InSync: inSync}}}
}

func inventoryAck(gen uint64) *ginv1.SessionResponse {
	return &ginv1.SessionResponse{Msg: &ginv1.SessionResponse_InventoryAck{InventoryAck: &ginv1.InventoryAck{AcceptedGeneration: gen, Index: 7}}}
}

// kinds lists the message kinds sent, in order.
func kinds(rs *recordingStream) string {
	var k []string
	for _, r := range rs.sent {
		switch m := r.GetMsg().(type) {
		case *ginv1.SessionRequest_Hello:
			k = append(k, "hello")
		case *ginv1.SessionRequest_Inventory:
			k = append(k, "inventory:"+itoa(m.Inventory.GetGeneration()))
		case *ginv1.SessionRequest_Delta:
			k = append(k, "delta")
		case *ginv1.SessionRequest_Heartbeat:
			k = append(k, "heartbeat:"+itoa(m.Heartbeat.GetSequence())+"@"+itoa(m.Heartbeat.GetGeneration()))
		case *ginv1.SessionRequest_FabricScan:
			k = append(k, "fabric")
		}
	}
	return strings.Join(k, " ")
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// The session's handlers, one message kind or timer at a time, without a
// network: what each sends, what it records, and which ends the session.
func TestSessionHandlers(t *testing.T) {
	tests := []struct {
		name    string
		steps   func(s *session) error // the last error is checked
		wantErr string                 // "" = no error
		wantOut string                 // what was sent, in order
		check   func(t *testing.T, s *session)
	}{
		{"hello names the node and its inventory", func(s *session) error { return s.sendHello() }, "", "hello",
			func(t *testing.T, s *session) {
				h := s.stream.(*recordingStream).sent[0].GetHello()
				if h.GetNodeName() != "node-a" || h.GetMachineId() == "" || h.GetInventoryHash() != s.a.latestSnapshot().hash || h.GetLastAckedGeneration() != 0 {
					t.Fatalf("hello %v", h)
				}
			}},
		{"a master in sync gets no inventory", func(s *session) error {
			_ = s.sendHello()
			return s.onResponse(helloAck(3, true, ""))
		}, "", "hello", func(t *testing.T, s *session) {
			if gen, _ := s.a.acked(); !s.out.established || gen != 3 || s.ticker == nil || !s.a.Status().Connected {
				t.Fatalf("established=%v acked=%d ticker=%v", s.out.established, gen, s.ticker != nil)
			}
		}},
		{"a master that holds nothing gets the full inventory", func(s *session) error {
			_ = s.sendHello()
			return s.onResponse(helloAck(0, false, ""))
		}, "", "hello inventory:1", func(t *testing.T, s *session) {
			if s.pending == nil || s.pending.generation != 1 || s.a.Status().InventoriesSent != 1 {
				t.Fatalf("pending %+v, sent %d", s.pending, s.a.Status().InventoriesSent)
			}
		}},
		{"an inventory ack moves what the master holds", func(s *session) error {
			_ = s.sendHello()
			_ = s.onResponse(helloAck(0, false, ""))
			return s.onResponse(inventoryAck(1))
		}, "", "hello inventory:1", func(t *testing.T, s *session) {
			if gen, hash := s.a.acked(); gen != 1 || hash != s.a.latestSnapshot().hash || s.pending != nil {
				t.Fatalf("acked %d %s, pending %+v", gen, hash, s.pending)
			}
		}},
		{"an ack for another generation ends the session", func(s *session) error {
			_ = s.sendHello()
			_ = s.onResponse(helloAck(0, false, ""))
			return s.onResponse(inventoryAck(5))
		}, "acknowledged generation 5, expected 1", "hello inventory:1", nil},
		{"a hint naming another master after the ack is a redirect", func(s *session) error {
			_ = s.sendHello()
			_ = s.onResponse(helloAck(3, true, "m1.example:5000"))
			return s.onResponse(&ginv1.SessionResponse{LeaderHint: "m2", Msg: &ginv1.SessionResponse_HeartbeatAck{HeartbeatAck: &ginv1.HeartbeatAck{}}})
		}, "master named another leader m2:5000", "hello", func(t *testing.T, s *session) {
			if s.out.hint != "m2:5000" {
				t.Fatalf("hint %q", s.out.hint)
			}
		}},
		{"the master's own name is not a redirect", func(s *session) error {
			_ = s.sendHello()
			_ = s.onResponse(helloAck(3, true, "m1.example:5000"))
			return s.onResponse(&ginv1.SessionResponse{LeaderHint: "m1.example:5000", Msg: &ginv1.SessionResponse_HeartbeatAck{HeartbeatAck: &ginv1.HeartbeatAck{}}})
		}, "", "hello", func(t *testing.T, s *session) {
			if s.out.hint != "" {
				t.Fatalf("hint %q", s.out.hint)
			}
		}},
		{"the master sets the heartbeat interval", func(s *session) error {
			_ = s.sendHello()
			return s.onResponse(&ginv1.SessionResponse{HeartbeatInterval: durationpb.New(7 * time.Second), Msg: &ginv1.SessionResponse_HelloAck{HelloAck: &ginv1.HelloAck{HeldGeneration: 3, InSync: true}}})
		}, "", "hello", func(t *testing.T, s *session) {
			if s.hb != 7*time.Second || s.a.heartbeatInterval() != 7*time.Second {
				t.Fatalf("interval %v / %v", s.hb, s.a.heartbeatInterval())
			}
		}},
		{"a tick sends a numbered heartbeat with the held generation", func(s *session) error {
			_ = s.sendHello()
			_ = s.onResponse(helloAck(3, true, ""))
			_ = s.onTick()
			return s.onTick()
		}, "", "hello heartbeat:1@3 heartbeat:2@3", nil},
		{"an inventory unacknowledged past the silence timeout ends the session", func(s *session) error {
			_ = s.sendHello()
			_ = s.onResponse(helloAck(0, false, ""))
			s.pending.sentAt = time.Now().Add(-time.Hour)
			return s.onTick()
		}, "did not acknowledge generation 1", "hello inventory:1", nil},
		{"silence ends the session as unavailable", func(s *session) error { return s.onSilence() }, "sent nothing for", "", nil},
		{"the scanner role opens the scan channel; a scan is uploaded", func(s *session) error {
			_ = s.sendHello()
			_ = s.onResponse(&ginv1.SessionResponse{FabricScanner: true, Msg: &ginv1.SessionResponse_HelloAck{HelloAck: &ginv1.HelloAck{HeldGeneration: 3, InSync: true}}})
			if s.scanC == nil || !s.a.Status().FabricScanner {
				return errors.New("scanner role not taken")
			}
			return s.onFabricScan(&ginv1.FabricTopology{Source: "test"})
		}, "", "hello fabric", func(t *testing.T, s *session) {
			if s.a.Status().FabricScans != 1 {
				t.Fatalf("%d scans counted", s.a.Status().FabricScans)
			}
		}},
		{"a second hello ack is ignored", func(s *session) error {
			_ = s.sendHello()
			_ = s.onResponse(helloAck(3, true, ""))
			return s.onResponse(helloAck(0, false, ""))
		}, "", "hello", func(t *testing.T, s *session) {
			if s.held.generation != 3 {
				t.Fatalf("held generation %d after a second ack", s.held.generation)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, rs := newTestSession(t)
			err := tc.steps(s)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one with %q", err, tc.wantErr)
			}
			if got := kinds(rs); got != tc.wantOut {
				t.Fatalf("sent %q, want %q", got, tc.wantOut)
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

func TestSessionSilenceIsUnavailable(t *testing.T) {
	s, _ := newTestSession(t)
	if err := s.onSilence(); status.Code(err) != codes.Unavailable {
		t.Fatalf("onSilence = %v, want Unavailable", err)
	}
}
