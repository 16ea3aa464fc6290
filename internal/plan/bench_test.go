package plan

import (
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/calib"
	"github.com/gin-topology/gin/internal/costmodel"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/state"
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

// BenchmarkBuildMeasured builds a 2-node DGX H100 plan without and with
// eight imported measurements of the world communicator (NCCL's default
// and a forced tree all_reduce; default and forced ring all_gather,
// reduce_scatter and broadcast; 30 sizes each), which the plan reads at
// every size bucket through the model-calibrated interpolation.
func BenchmarkBuildMeasured(b *testing.B) {
	c := newCluster(b, "dgx-h100", 2, flat)
	g := c.graph(b)
	key, err := calib.KeyOf(g, nil, c.names, 8, "2.21.5")
	if err != nil {
		b.Fatal(err)
	}
	var ms []*ginv1.Measurement
	for i, cell := range []struct {
		coll ginv1.Collective
		algo ginv1.Algorithm
	}{
		{ginv1.Collective_COLLECTIVE_ALL_REDUCE, 0}, {ginv1.Collective_COLLECTIVE_ALL_REDUCE, ginv1.Algorithm_ALGORITHM_TREE},
		{ginv1.Collective_COLLECTIVE_ALL_GATHER, 0}, {ginv1.Collective_COLLECTIVE_ALL_GATHER, ginv1.Algorithm_ALGORITHM_RING},
		{ginv1.Collective_COLLECTIVE_REDUCE_SCATTER, 0}, {ginv1.Collective_COLLECTIVE_REDUCE_SCATTER, ginv1.Algorithm_ALGORITHM_RING},
		{ginv1.Collective_COLLECTIVE_BROADCAST, 0}, {ginv1.Collective_COLLECTIVE_BROADCAST, ginv1.Algorithm_ALGORITHM_RING},
	} {
		m := &ginv1.Measurement{Shape: key, Collective: cell.coll, Algorithm: cell.algo, Nodes: c.names, CreatedIndex: uint64(i + 1)}
		for s := uint64(1 << 10); s <= 1<<39 && len(m.Points) < 30; s <<= 1 {
			m.Points = append(m.Points, &ginv1.MeasuredPoint{Bytes: s, TimeUs: 30 + float64(s)/200e3})
		}
		m.Id = state.MeasurementID(m)
		ms = append(ms, m)
	}
	b.Run("none", func(b *testing.B) {
		for b.Loop() {
			if _, err := Build(g, "job-bench", c.names, 8); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("8-measurements", func(b *testing.B) {
		for b.Loop() {
			if _, err := BuildWith(g, "job-bench", c.names, 8, calib.NewIndex(g, nil, ms)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
