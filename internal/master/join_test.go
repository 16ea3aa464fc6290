package master

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	ginraft "github.com/gin-topology/gin/internal/raft"
)

// Join checks the server id against the Raft server-id limit (not another
// field's), and a refused Join changes neither the membership nor the state.
func TestJoinRejectsBadServerIDs(t *testing.T) {
	s, conn := startServer(t, time.Second)
	admin := ginv1.NewAdminServiceClient(conn)
	tests := []struct {
		name string
		id   string
	}{
		{"empty", ""},
		{"one byte over the limit", strings.Repeat("m", ginraft.MaxServerIDLen+1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			before, members := s.store.Index(), len(s.node.Stats().Members)
			_, err := admin.Join(ctx, &ginv1.JoinRequest{ServerId: tc.id, RaftAddress: "127.0.0.1:1"})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "server_id") {
				t.Fatalf("Join(%d-byte id) = %v, want InvalidArgument about server_id", len(tc.id), err)
			}
			if s.store.Index() != before || len(s.node.Stats().Members) != members {
				t.Fatal("a refused Join changed the state or the membership")
			}
		})
	}
}
