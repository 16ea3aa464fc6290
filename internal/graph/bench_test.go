package graph

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
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

// memProfiles are the node mixes BenchmarkGraphMemoryPerNode measures:
// 10,000 nodes each on one rail-optimised fabric (4 scalable units, 16
// spines), as a dev cluster simulates them.
func memProfiles() []memProfile {
	return []memProfile{
		{"dgx-h100", sim.NodesOf("dgx-h100", "node", 0, benchNodes)},
		{"gb200-nvl72", sim.NodesOf("gb200-nvl72", "tray", 0, benchNodes)},
		{"mixed", append(sim.NodesOf("gb200-nvl72", "tray", 0, benchNodes/2), sim.NodesOf("dgx-h100", "node", 0, benchNodes/2)...)},
	}
}

type memProfile struct {
	name  string
	nodes []sim.FabricNode
}

// BenchmarkGraphMemoryPerNode reports the heap a 10,000-node graph keeps
// per node once the inventories it was built from are gone, as on a master,
// which keeps inventories compressed (B/node, fabric index included), and
// the part of it beyond inventories kept alive beside it
// (beyond-inventories-B/node: strings the graph shares with them are not
// counted there).
func BenchmarkGraphMemoryPerNode(b *testing.B) {
	for _, mp := range memProfiles() {
		b.Run(mp.name, func(b *testing.B) {
			for b.Loop() {
				base := heapAlloc()
				invs, fab := memCluster(b, mp.nodes)
				withInvs := heapAlloc()
				g := mustBuild(b, invs, fab)
				beside := heapAlloc()
				runtime.KeepAlive(invs)
				runtime.KeepAlive(fab)
				invs, fab = nil, nil
				alone := heapAlloc()
				runtime.KeepAlive(g)
				b.ReportMetric(float64(alone-base)/benchNodes, "B/node")
				b.ReportMetric(float64(beside-withInvs)/benchNodes, "beyond-inventories-B/node")
			}
		})
	}
}

// memCluster simulates nodes on BenchmarkGraphMemoryPerNode's fabric and
// returns only their inventories and the fabric (nothing else of the
// simulation stays reachable).
func memCluster(b *testing.B, nodes []sim.FabricNode) ([]*ginv1.NodeInventory, *ginv1.FabricTopology) {
	b.Helper()
	fs, err := sim.ParseFabricSpec("leaf-groups=4,spines=16,oversub=2")
	if err != nil {
		b.Fatal(err)
	}
	c, err := sim.NewCluster(testCluster, &fs, nodes)
	if err != nil {
		b.Fatal(err)
	}
	invs, err := c.Collect(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return invs, c.Fabric
}

// heapAlloc is the live heap after two collections.
func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkNewNode10k adds a node to a 10,000-node graph: with, the new
// graph (the FSM's apply); check, CheckNode (a master's check at the edge
// before it commits, which makes no graph).
func BenchmarkNewNode10k(b *testing.B) {
	invs, fab := benchCluster(b)
	g := mustBuild(b, invs[1:], fab)
	for _, mode := range []string{"with", "check"} {
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if mode == "with" {
					_, err = g.WithNode(invs[0])
				} else {
					err = g.CheckNode(invs[0])
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
