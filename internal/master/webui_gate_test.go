package master

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginraft "github.com/gin-topology/gin/internal/raft"
)

// TestWebViewReadsPassTheReadGate: every read the web view makes
// in-process is refused, UNAVAILABLE (503 on the page), on a master whose
// state is incomplete, as the gRPC reads are; before the gate the pages
// drew that state.
func TestWebViewReadsPassTheReadGate(t *testing.T) {
	s, _ := startServer(t, time.Second)
	registerNodes(t, s, "dgx-h100", "node001")
	b := webBackend{s.topology, s.admin, s.plans, s.calib, s.newCheck()}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	reads := []struct {
		name string
		read func() error
	}{
		{"Topology", func() error { _, _, err := b.Topology(ctx); return err }},
		{"PinnedPlans", func() error { _, err := b.PinnedPlans(ctx); return err }},
		{"Measurements", func() error { _, err := b.Measurements(ctx); return err }},
		{"NodeVerdicts", func() error { _, err := b.NodeVerdicts(ctx); return err }},
	}
	for _, r := range reads {
		if err := r.read(); err != nil {
			t.Fatalf("%s on a healthy master: %v", r.name, err)
		}
	}
	// An entry this version cannot apply leaves the state incomplete.
	if _, err := s.node.Apply(ctx, &statev1.Command{}); !errors.Is(err, ginraft.ErrUnknownCommand) {
		t.Fatalf("apply of an unknown command = %v, want ErrUnknownCommand", err)
	}
	for _, r := range reads {
		t.Run(r.name, func(t *testing.T) {
			if err := r.read(); status.Code(err) != codes.Unavailable {
				t.Fatalf("%s on an outdated master: %v, want Unavailable", r.name, err)
			}
		})
	}
}
