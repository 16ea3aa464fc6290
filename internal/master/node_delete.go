package master

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/inventory"
)

// DeleteNode removes a node's record and its binding (machine_id, or the
// certificate with TLS), so that the name can be registered again by a new
// machine or certificate. A node whose agent holds a session (on the
// leader, or on a follower that reports it) is refused rather than deleted under it:
// its agent would register it again at once. Stop the agent first, or deny
// its certificate (which ends the session) when it is not to come back.
func (a *adminService) DeleteNode(ctx context.Context, req *ginv1.DeleteNodeRequest) (*ginv1.DeleteNodeResponse, error) {
	name := req.GetNodeName()
	if err := inventory.ValidNodeName(name); err != nil {
		return nil, toStatus(invalidf("node_name", "%v", err))
	}
	if _, ok := a.store.Node(name); !ok {
		return nil, toStatus(&notFound{what: fmt.Sprintf("node %q", name)})
	}
	if err := a.leading(); err != nil {
		return nil, toStatus(err)
	}
	if a.held(name) {
		return nil, toStatus(&precondition{msg: fmt.Sprintf("node %q has a live agent session: stop its agent first (or deny its certificate, ginctl tls deny SERIAL, which ends the session), then delete it", name)})
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := a.apply(ctx, &statev1.Command{Command: &statev1.Command_DeleteNode{DeleteNode: &statev1.DeleteNode{NodeName: name, At: timestamppb.Now()}}})
	if err != nil {
		return nil, toStatus(fmt.Errorf("delete node %s: %w", name, err))
	}
	a.log.Warn("node deleted", "node", name, "changed", res.Changed, "index", res.Index)
	return &ginv1.DeleteNodeResponse{Index: res.Index}, nil
}
