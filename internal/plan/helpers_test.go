package plan

import (
	"context"
	"fmt"
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
	fnodes := make([]sim.FabricNode, count)
	c := &cluster{}
	for i := range fnodes {
		fnodes[i] = sim.FabricNode{Name: fmt.Sprintf("node%03d", i), Profile: profile, Index: i}
		c.names = append(c.names, fnodes[i].Name)
	}
	fab, nbrs, err := sim.BuildFabric(spec, "test", fnodes)
	if err != nil {
		t.Fatal(err)
	}
	c.fab = fab
	for i, fn := range fnodes {
		s, err := sim.NewSource(profile, sim.NodeOptions{NodeName: fn.Name, Index: i, Cluster: "test", Neighbors: nbrs[fn.Name]})
		if err != nil {
			t.Fatal(err)
		}
		c.srcs = append(c.srcs, s)
		c.invs = append(c.invs, nil)
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
