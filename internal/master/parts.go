package master

import (
	"context"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/state"
)

// What the parts of a master are given instead of the Server (doc.go):
// a state view (*state.Store), an apply function, a read function, a
// clock, a logger and their own configuration. Server.New wires them.

// applyFunc proposes a command on the leader and waits until it is
// applied here (Server.apply: refused on a follower, NOT_LEADER, which
// forward.go turns into a forwarded call).
type applyFunc func(ctx context.Context, cmd *statev1.Command) (state.Result, error)

// readFunc prepares a read at a consistency: the view to answer from and
// the ReadInfo that says where and how fresh it is (Server.read).
type readFunc func(ctx context.Context, c ginv1.ReadConsistency) (state.View, *ginv1.ReadInfo, error)

// leadingFunc is nil while this master leads, else the NotLeaderError
// naming the leader (Server.leading), for a part whose work only the
// leader may start.
type leadingFunc func() error
