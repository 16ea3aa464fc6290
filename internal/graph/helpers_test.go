package graph

import (
	"bufio"
	"context"
	"os"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
)

const testCluster = "test"

// simNode builds one simulated node's source.
func simNode(t testing.TB, profile, name string, index int, nbrs []*ginv1.FabricNeighbor) *sim.Source {
	t.Helper()
	s, err := sim.NewSource(profile, sim.NodeOptions{NodeName: name, Index: index, Cluster: testCluster, Neighbors: nbrs})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func collect(t testing.TB, s *sim.Source) *ginv1.NodeInventory {
	t.Helper()
	inv, err := s.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// simCluster builds count nodes of a profile named node000.., cabled into a
// simulated fabric of the given spec.
func simCluster(t testing.TB, profile string, count int, spec string) ([]*ginv1.NodeInventory, *ginv1.FabricTopology, []*sim.Source) {
	t.Helper()
	fs, err := sim.ParseFabricSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.NewCluster(testCluster, &fs, sim.NodesOf(profile, "node", 0, count))
	if err != nil {
		t.Fatal(err)
	}
	invs, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return invs, c.Fabric, c.Sources
}

func mustBuild(t testing.TB, invs []*ginv1.NodeInventory, fab *ginv1.FabricTopology) *Graph {
	t.Helper()
	g, err := Build(invs, fab)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func mustPath(t testing.TB, g *Graph, a, b string) Path {
	t.Helper()
	ra, err := g.ResolveGPU(a)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := g.ResolveGPU(b)
	if err != nil {
		t.Fatal(err)
	}
	p, err := g.Path(ra, rb)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// topoFixture is a parsed `nvidia-smi topo -m` output.
type topoFixture struct {
	columns []string            // device labels of the header, in order
	rows    map[string][]string // row label → cells (trimmed), then trailing columns
}

// parseTopoFixture reads a real `nvidia-smi topo -m` output: lines starting
// with '#' are skipped, the first line is the header, rows run until the
// first empty line (the legend follows).
func parseTopoFixture(t *testing.T, path string) topoFixture {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fx := topoFixture{rows: map[string][]string{}}
	sc := bufio.NewScanner(f)
	header := true
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.TrimSpace(line) == "" {
			if !header {
				break
			}
			continue
		}
		cells := strings.Split(line, "\t")
		if header {
			for _, c := range cells[1:] {
				c = strings.TrimSpace(c)
				if c == "CPU Affinity" || c == "NUMA Affinity" || c == "GPU NUMA ID" {
					break
				}
				fx.columns = append(fx.columns, c)
			}
			header = false
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		fx.rows[cells[0]] = cells[1:]
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(fx.columns) == 0 || len(fx.rows) != len(fx.columns) {
		t.Fatalf("%s: %d columns, %d rows", path, len(fx.columns), len(fx.rows))
	}
	return fx
}
