package graph

import (
	"fmt"
	"math/rand/v2"
	"runtime"
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

// BenchmarkPath10kNodesBFSBaseline is the baseline for BenchmarkPath10kNodes:
// the same queries answered without structure, by a breadth-first search over
// the fabric's cables (HCA port → switches → HCA port), as a generic graph
// library would. Adjacency is built once, outside the loop.
func BenchmarkPath10kNodesBFSBaseline(b *testing.B) {
	invs, fab := benchCluster(b)
	adj := map[string][]string{}
	for _, l := range fab.GetLinks() {
		a, c := l.GetA().GetGuid(), l.GetB().GetGuid()
		adj[a] = append(adj[a], c)
		adj[c] = append(adj[c], a)
	}
	// The first compute port of each node stands for "the GPU's NIC".
	ports := make([]string, len(invs))
	for i, inv := range invs {
		for _, h := range inv.GetHcas() {
			if h.GetRole() == ginv1.HcaRole_HCA_ROLE_COMPUTE && len(h.GetPorts()) > 0 {
				ports[i] = h.GetPorts()[0].GetPortGuid()
				break
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pairs := make([][2]string, 4096)
	for i := range pairs {
		pairs[i] = [2]string{ports[rng.IntN(benchNodes)], ports[rng.IntN(benchNodes)]}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := pairs[i%len(pairs)]
		if bfsHops(adj, p[0], p[1]) < 0 {
			b.Fatal("no route")
		}
		i++
	}
}

func bfsHops(adj map[string][]string, from, to string) int {
	if from == to {
		return 0
	}
	dist := map[string]int{from: 0}
	q := []string{from}
	for len(q) > 0 {
		v := q[0]
		q = q[1:]
		for _, w := range adj[v] {
			if _, ok := dist[w]; ok {
				continue
			}
			dist[w] = dist[v] + 1
			if w == to {
				return dist[w]
			}
			q = append(q, w)
		}
	}
	return -1
}

// BenchmarkGraphMemoryPerNode reports the heap the graph keeps per node of a
// 10,000-node cluster, beyond the inventories it is built from.
func BenchmarkGraphMemoryPerNode(b *testing.B) {
	invs, fab := benchCluster(b)
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		g := mustBuild(b, invs, fab)
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(g)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/benchNodes, "B/node")
	}
}
