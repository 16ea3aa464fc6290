package export

import (
	"testing"

	"github.com/gin-topology/gin/internal/discovery/sim"
)

// BenchmarkModel: the cost of the one model of a 256-node DGX H100
// cluster, and of each engine rendering it (NCCLTopo(g, inv) builds only
// that node's part of the model for its file).
func BenchmarkModel(b *testing.B) {
	invs, fab := simCluster(b, "dgx-h100", nodeNames("dgx", 256), &sim.FabricSpec{LeafGroups: 8, Spines: 8, Oversubscription: 1})
	g := mustBuild(b, invs, fab)
	m, err := Build(g)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			newTopology(g)
		}
	})
	b.Run("nccl-topo-graph", func(b *testing.B) {
		for b.Loop() {
			if _, err := NCCLTopo(g, invs[0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	for name, run := range map[string]func() ([]byte, error){
		"slurm-tree": m.SlurmTree, "json": m.JSON, "dot": m.DOT,
		"nccl-topo": func() ([]byte, error) { return m.NCCLTopo(invs[0]) },
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
