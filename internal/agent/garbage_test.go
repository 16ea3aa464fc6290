package agent

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/testkit"
)

// garbageMaster answers every session with nonsense of one kind.
type garbageMaster struct {
	ginv1.UnimplementedAgentServiceServer
	kind     string
	sessions atomic.Int64
}

func (g *garbageMaster) Session(st ginv1.AgentService_SessionServer) error {
	g.sessions.Add(1)
	if _, err := st.Recv(); err != nil {
		return err
	}
	switch g.kind {
	case "malformed leader hint and empty responses":
		_ = st.Send(&ginv1.SessionResponse{LeaderHint: "[[[not-an-address", Msg: &ginv1.SessionResponse_HelloAck{HelloAck: &ginv1.HelloAck{}}})
		for {
			if _, err := st.Recv(); err != nil {
				return err
			}
			_ = st.Send(&ginv1.SessionResponse{}) // no message at all
		}
	case "ack of a generation never sent":
		_ = st.Send(&ginv1.SessionResponse{Msg: &ginv1.SessionResponse_HelloAck{HelloAck: &ginv1.HelloAck{}}})
		_ = st.Send(&ginv1.SessionResponse{Msg: &ginv1.SessionResponse_InventoryAck{InventoryAck: &ginv1.InventoryAck{AcceptedGeneration: 99}}})
		<-st.Context().Done()
		return nil
	default: // "internal error"
		return status.Error(codes.Internal, "grpc: failed to unmarshal the received message")
	}
}

// A master that sends garbage never crashes the agent: it logs what was
// wrong, keeps collecting, and reconnects with backoff when the session is
// unusable.
func TestMasterSendingGarbage(t *testing.T) {
	tests := []struct {
		kind        string
		logContains string
		reconnects  bool
	}{
		{"malformed leader hint and empty responses", "did not acknowledge generation 1", true},
		{"ack of a generation never sent", "acknowledged generation 99", true},
		{"internal error", "failed to unmarshal", true},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			gm := &garbageMaster{kind: tc.kind}
			srv := grpc.NewServer()
			ginv1.RegisterAgentServiceServer(srv, gm)
			go func() { _ = srv.Serve(lis) }()
			t.Cleanup(srv.Stop)

			var logs syncBuffer
			src := newFakeSource("H100")
			a, err := New(testConfig(src, &logs, lis.Addr().String()))
			if err != nil {
				t.Fatal(err)
			}
			a.silenceTimeout = func(time.Duration) time.Duration { return 300 * time.Millisecond }
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { _ = a.Run(ctx); close(done) }()
			t.Cleanup(func() { cancel(); <-done })
			testkit.WaitFor(t, 20*time.Second, fmt.Sprintf("%q in the logs", tc.logContains), func() bool {
				return strings.Contains(logs.String(), tc.logContains) && (!tc.reconnects || gm.sessions.Load() >= 3)
			}, func() string { return fmt.Sprintf("after %d sessions:\n%s", gm.sessions.Load(), logs.String()) })
			if !strings.Contains(logs.String(), "master sent no message") && tc.kind == "malformed leader hint and empty responses" {
				t.Error("empty responses were not reported")
			}
			if st := a.Status(); st.Collections == 0 {
				t.Fatal("the agent stopped collecting")
			}
		})
	}
}
