package graph

import (
	"fmt"
	"math/rand/v2"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

const benchNodes = 10000

// benchCluster builds 10,000 simulated DGX H100 inventories (80,000 GPUs) on
// a simulated rail-optimised fat tree (4 scalable units, 16 spines, 2:1).
func benchCluster(b *testing.B) ([]*ginv1.NodeInventory, *ginv1.FabricTopology) {
	b.Helper()
	invs, fab, _ := simCluster(b, "dgx-h100", benchNodes, "leaf-groups=4,spines=16,oversub=2")
	return invs, fab
}

func BenchmarkBuild10kNodes(b *testing.B) {
	invs, fab := benchCluster(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(invs, fab); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPath10kNodes(b *testing.B) {
	invs, fab := benchCluster(b)
	g := mustBuild(b, invs, fab)
	rng := rand.New(rand.NewPCG(1, 2))
	pairs := make([][2]GPURef, 4096)
	for i := range pairs {
		for k := range 2 {
			pairs[i][k] = GPURef{Node: fmt.Sprintf("node%03d", rng.IntN(benchNodes)), Index: rng.IntN(8)}
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := pairs[i%len(pairs)]
		if _, err := g.Path(p[0], p[1]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkWithNode10k(b *testing.B) {
	invs, fab := benchCluster(b)
	g := mustBuild(b, invs, fab)
	inv := invs[benchNodes/2]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.WithNode(inv); err != nil {
			b.Fatal(err)
		}
	}
}
