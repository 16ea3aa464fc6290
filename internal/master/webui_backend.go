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
// answering from this replica.
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
func (t *topologyService) Topology(context.Context) (*graph.Graph, *ginv1.FabricTopology, error) {
	v := t.store.View()
	return v.Graph, v.Fabric(), nil
}

// Measurements implements webui.Backend: every stored measurement.
func (c *calibrationService) Measurements(context.Context) ([]*ginv1.Measurement, error) {
	return c.store.Measurements(), nil
}

// PinnedPlans implements webui.Backend.
func (p *planService) PinnedPlans(context.Context) ([]*ginv1.Plan, error) {
	return p.store.Plans(), nil
}

// NodeVerdicts implements webui.VerdictSource: the health check's verdicts
// of every node at this replica's current state (read only: shared).
func (c *checkService) NodeVerdicts(context.Context) (map[string]*ginv1.NodeVerdict, error) {
	return c.current(), nil
}
