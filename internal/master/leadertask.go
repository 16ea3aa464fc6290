package master

import (
	"context"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/state"
)

// LeaderTask is a leader-only loop that the master's user brings (Config.
// LeaderTasks): Run starts when this server establishes leadership (after
// its barrier: st holds every committed entry) and must return once ctx
// ends, which revocation waits for. It reads the replicated state and the
// nodes' health verdicts (what CheckService answers, for a view of st);
// it writes nothing through Raft. The master knows nothing else of it, so
// a task's dependencies (client-go for --kube-labels) stay out of this
// package.
type LeaderTask struct {
	Name string
	Run  func(ctx context.Context, st *state.Store, verdicts Verdicts)
}

// Verdicts returns every node's health verdict in view v (internal/health,
// as CheckService answers them). The map is shared: read only.
type Verdicts func(v state.View) map[string]*ginv1.NodeVerdict
