package master

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	ginraft "github.com/gin-topology/gin/internal/raft"
)

// A committed command this version does not know (a newer master wrote it
// during a rolling upgrade) leaves this replica's state incomplete: it stops
// serving reads, writes and agent sessions with UNAVAILABLE (clients move on
// to another master), says NOT_SERVING, and counts the skipped entry.
func TestMasterThatSkippedANewerCommandStopsServing(t *testing.T) {
	s, conn := startServer(t, time.Second)
	registerNodes(t, s, "dgx-h100", "node001")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// An empty oneof is what a Command with a field added by a newer
	// version decodes to here.
	if _, err := s.node.Apply(ctx, &statev1.Command{}); !errors.Is(err, ginraft.ErrUnknownCommand) {
		t.Fatalf("apply of an unknown command = %v, want ErrUnknownCommand", err)
	}
	if n := s.node.SkippedEntries(); n != 1 {
		t.Fatalf("skipped entries = %d, want 1", n)
	}

	_, err := ginv1.NewTopologyServiceClient(conn).ListNodes(ctx, &ginv1.ListNodesRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("read from an outdated master = %v, want Unavailable", err)
	}
	inv := simInventory(t, "dgx-h100", "node002")
	inv.Generation = 1
	if _, err := s.putInventory(ctx, inv); status.Code(toStatus(err)) != codes.Unavailable {
		t.Fatalf("write on an outdated master = %v, want Unavailable", err)
	}
	sess, ack := openSession(t, conn, inv)
	if ack != nil {
		t.Fatalf("an outdated master acknowledged an agent: %v", ack)
	}
	if _, err := sess.stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("agent session on an outdated master = %v, want Unavailable", err)
	}
	hc := healthpb.NewHealthClient(conn)
	for {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("health still %v, %v: want NOT_SERVING", resp.GetStatus(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
