package master

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/agent"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/testkit"
)

// One connected agent at a time scans the fabric; when it leaves, another
// one takes over, and only the scanner's uploads are accepted.
func TestExactlyOneAgentScansTheFabric(t *testing.T) {
	s, conn := startServer(t, 50*time.Millisecond)
	type runner struct {
		scans  atomic.Int64
		cancel context.CancelFunc
		done   chan struct{}
		a      *agent.Agent
	}
	start := func(name string) *runner {
		src, err := sim.NewSource("dgx-h100", sim.NodeOptions{NodeName: name, Cluster: "scan"})
		if err != nil {
			t.Fatal(err)
		}
		r := &runner{done: make(chan struct{})}
		a, err := agent.New(agent.Config{
			NodeName: name, Masters: []string{s.Addr()}, HeartbeatInterval: 50 * time.Millisecond, Source: src,
			Logger:      slog.New(slog.DiscardHandler),
			DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
			FabricScanner: func(context.Context) (*ginv1.FabricTopology, error) {
				r.scans.Add(1)
				return &ginv1.FabricTopology{Source: "test:" + name, Switches: []*ginv1.FabricSwitch{{Guid: "0x1", Tier: 1}}}, nil
			},
			FabricScanInterval: time.Hour,
		})
		if err != nil {
			t.Fatal(err)
		}
		r.a = a
		ctx, cancel := context.WithCancel(context.Background())
		r.cancel = cancel
		go func() { defer close(r.done); _ = a.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		testkit.WaitFor(t, 20*time.Second, what, cond)
	}
	first := start("node001")
	wait("node001 to scan", func() bool { return first.scans.Load() == 1 })
	wait("the scan to be imported", func() bool { return s.store.View().Fabric().GetSource() == "test:node001" })
	second := start("node002")
	wait("node002 to attach", func() bool { return second.a.Status().Connected })
	// Three heartbeats of node002 reach the master (each answered with the
	// role): node002 must not scan meanwhile.
	lastSeen := func() time.Time {
		s.live.mu.Lock()
		defer s.live.mu.Unlock()
		return s.live.lastSeen["node002"]
	}
	for i := range 3 {
		prev := lastSeen()
		wait(fmt.Sprintf("heartbeat %d of node002", i+1), func() bool { return lastSeen().After(prev) })
	}
	if got := s.scanner(); got != "node001" {
		t.Fatalf("the master names %q the scanner, want node001", got)
	}
	if n := second.scans.Load(); n != 0 || second.a.Status().FabricScanner {
		t.Fatalf("node002 scanned %d times while node001 held the role", n)
	}
	first.cancel()
	<-first.done
	wait("node002 to take over and scan", func() bool { return second.scans.Load() == 1 })
	wait("node002's scan to be imported", func() bool { return s.store.View().Fabric().GetSource() == "test:node002" })

	// An agent that is not the scanner cannot upload a fabric.
	inv := simInventory(t, "pcie-8gpu", "node003")
	sess, ack := openSession(t, conn, inv)
	if ack == nil {
		t.Fatal("node003 not acked")
	}
	before := s.store.Index()
	if err := sess.stream.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_FabricScan{FabricScan: &ginv1.FabricTopology{Source: "rogue"}}}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := sess.stream.Recv()
		if err == nil {
			continue // heartbeat acks are not expected, but tolerate any
		}
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("non-scanner upload: %v, want FailedPrecondition", err)
		}
		break
	}
	if s.store.View().Fabric().GetSource() != "test:node002" || s.store.Index() != before {
		t.Fatal("a non-scanner's fabric upload changed the state")
	}
}
