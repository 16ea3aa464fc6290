package master

import (
	"context"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/graph"
)

// webBackend is what the web view reads (webui.Backend): the gRPC read
// services, called in-process, answering from this replica.
type webBackend struct {
	*topologyService // ListNodes, GetNode, GetMatrix
	*adminService    // GetClusterInfo
	plans            *planService
	calib            *calibrationService
	// check answers the health verdicts the pictures colour nodes by (its
	// own cache of assessments, as CheckService keeps one).
	check *checkService
}

// Topology implements webui.Backend: this replica's graph and fabric scan,
// read from one view so the two agree.
func (w webBackend) Topology(context.Context) (*graph.Graph, *ginv1.FabricTopology, error) {
	g, f := w.snapshot()
	return g, f, nil
}

// Measurements implements webui.Backend.
func (w webBackend) Measurements(context.Context) ([]*ginv1.Measurement, error) {
	return w.calib.measurements(), nil
}

// PinnedPlans implements webui.Backend.
func (w webBackend) PinnedPlans(context.Context) ([]*ginv1.Plan, error) {
	return w.plans.pinned(), nil
}

// Estimate implements webui.Backend with PlanService's own Estimate.
func (w webBackend) Estimate(ctx context.Context, req *ginv1.EstimateRequest) (*ginv1.EstimateResponse, error) {
	return w.plans.Estimate(ctx, req)
}

// NodeVerdicts implements webui.VerdictSource: the health check's verdicts
// of every node at this replica's current state (read only: shared).
func (w webBackend) NodeVerdicts(context.Context) (map[string]*ginv1.NodeVerdict, error) {
	return w.check.current(), nil
}
