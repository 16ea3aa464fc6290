package plan

import (
	"context"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/graph"
)

// cluster is a simulated cluster: count nodes of a profile named
// node000.., cabled into a sim fat tree.
type cluster struct {
	names []string
	srcs  []*sim.Source
	invs  []*ginv1.NodeInventory
	fab   *ginv1.FabricTopology
}

func newCluster(t testing.TB, profile string, count int, spec sim.FabricSpec) *cluster {
	t.Helper()
	sc, err := sim.NewCluster("test", &spec, sim.NodesOf(profile, "node", 0, count))
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{names: sc.Names(), srcs: sc.Sources, fab: sc.Fabric, invs: make([]*ginv1.NodeInventory, count)}
	for i := range c.srcs {
		c.recollect(t, i)
	}
	return c
}

func (c *cluster) recollect(t testing.TB, i int) {
	t.Helper()
	inv, err := c.srcs[i].Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c.invs[i] = inv
}

func (c *cluster) graph(t testing.TB) *graph.Graph {
	t.Helper()
	g, err := graph.Build(c.invs, c.fab)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

var flat = sim.FabricSpec{LeafGroups: 1, Spines: 2, Oversubscription: 1}
