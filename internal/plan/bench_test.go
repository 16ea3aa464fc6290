package plan

import (
	"testing"

	"github.com/gin-topology/gin/internal/costmodel"
	"github.com/gin-topology/gin/internal/discovery/sim"
)

// BenchmarkBuild1024Nodes builds the plan of a 1,024-node DGX H100 job on
// a sim fat tree (8 scalable units, 16 spines). Target: ≤ 100 ms.
func BenchmarkBuild1024Nodes(b *testing.B) {
	c := newCluster(b, "dgx-h100", 1024, sim.FabricSpec{LeafGroups: 8, Spines: 16, Oversubscription: 1})
	g := c.graph(b)
	b.ResetTimer()
	for b.Loop() {
		if _, err := Build(g, "job-bench", c.names, 8); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkShapeOf1024Nodes is the graph part of the build alone.
func BenchmarkShapeOf1024Nodes(b *testing.B) {
	c := newCluster(b, "dgx-h100", 1024, sim.FabricSpec{LeafGroups: 8, Spines: 16, Oversubscription: 1})
	g := c.graph(b)
	b.ResetTimer()
	for b.Loop() {
		if _, err := costmodel.ShapeOf(g, c.names, 8); err != nil {
			b.Fatal(err)
		}
	}
}
