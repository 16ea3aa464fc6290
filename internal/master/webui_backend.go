package master

import (
	"context"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/graph"
)

// Topology implements webui.Backend: this replica's graph and fabric scan,
// read from one view so the two agree.
func (w webBackend) Topology(context.Context) (*graph.Graph, *ginv1.FabricTopology, error) {
	v := w.topologyService.s.store.View()
	return v.Graph, v.Fabric(), nil
}

// Measurements implements webui.Backend.
func (w webBackend) Measurements(context.Context) ([]*ginv1.Measurement, error) {
	return w.topologyService.s.store.Measurements(), nil
}

// Estimate implements webui.Backend with PlanService's own Estimate.
func (w webBackend) Estimate(ctx context.Context, req *ginv1.EstimateRequest) (*ginv1.EstimateResponse, error) {
	return (&planService{s: w.topologyService.s}).Estimate(ctx, req)
}

// NodeVerdicts implements webui.VerdictSource: the health check's verdicts
// of every node at this replica's current state (read only: shared).
func (w webBackend) NodeVerdicts(context.Context) (map[string]*ginv1.NodeVerdict, error) {
	return w.check.verdictsAt(w.topologyService.s.store.View()), nil
}
