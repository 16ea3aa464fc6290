package master

import (
	"context"

	"github.com/gin-topology/gin/internal/state"
)

// LeaderTask is a leader-only loop that the master's user brings (Config.
// LeaderTasks): Run starts when this server establishes leadership (after
// its barrier: st holds every committed entry) and must return once ctx
// ends, which revocation waits for. It reads the replicated state; it
// writes nothing through Raft. The master knows nothing else of it, so a
// task's dependencies (client-go for --kube-labels) stay out of this
// package.
type LeaderTask struct {
	Name string
	Run  func(ctx context.Context, st *state.Store)
}
