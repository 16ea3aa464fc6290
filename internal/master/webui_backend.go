package master

import (
	"context"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/webui"
)

var _ webui.VerdictSource = webBackend{} // the pictures colour nodes by it (a type assertion there)

// webBackend is what the web view reads (webui.Backend and
// webui.VerdictSource): the read services' own methods, called in-process,
// answering from this replica. Every one passes the read gate the gRPC
// reads pass (Server.read at READ_CONSISTENCY_ANY: a master outdated or
// still catching up refuses, UNAVAILABLE, which the view shows as 503),
// so a page never draws a state the API would refuse to serve.
type webBackend struct {
	*topologyService    // ListNodes, GetNode, GetMatrix, Topology
	*adminService       // GetClusterInfo
	*planService        // Estimate, PinnedPlans
	*calibrationService // Measurements
	// NodeVerdicts, from a cache of assessments of its own (as
	// CheckService keeps one).
	*checkService
}

// Topology implements webui.Backend: this replica's graph and fabric scan,
// read from one view so the two agree.
func (t *topologyService) Topology(ctx context.Context) (*graph.Graph, *ginv1.FabricTopology, error) {
	v, _, err := t.read(ctx, ginv1.ReadConsistency_READ_CONSISTENCY_ANY)
	if err != nil {
		return nil, nil, toStatus(err)
	}
	return v.Graph, v.Fabric(), nil
}

// Measurements implements webui.Backend: every stored measurement.
func (c *calibrationService) Measurements(ctx context.Context) ([]*ginv1.Measurement, error) {
	if _, _, err := c.read(ctx, ginv1.ReadConsistency_READ_CONSISTENCY_ANY); err != nil {
		return nil, toStatus(err)
	}
	return c.store.Measurements(), nil
}

// PinnedPlans implements webui.Backend.
func (p *planService) PinnedPlans(ctx context.Context) ([]*ginv1.Plan, error) {
	if _, _, err := p.read(ctx, ginv1.ReadConsistency_READ_CONSISTENCY_ANY); err != nil {
		return nil, toStatus(err)
	}
	return p.store.Plans(), nil
}

// NodeVerdicts implements webui.VerdictSource: the health check's verdicts
// of every node at this replica's current state (read only: shared).
func (c *checkService) NodeVerdicts(ctx context.Context) (map[string]*ginv1.NodeVerdict, error) {
	v, _, err := c.read(ctx, ginv1.ReadConsistency_READ_CONSISTENCY_ANY)
	if err != nil {
		return nil, toStatus(err)
	}
	return c.verdictsAt(v), nil
}
