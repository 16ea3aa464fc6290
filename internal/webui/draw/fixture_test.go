package draw

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/graph"
)

var update = flag.Bool("update", false, "rewrite the golden SVG files in testdata")

// cluster is a simulated cluster as the master would hold it: the
// inventories, the canonical graph, the fabric scan and ListNodes' summaries.
type cluster struct {
	invs   []*ginv1.NodeInventory
	g      *graph.Graph
	fabric *ginv1.FabricTopology
	nodes  []*ginv1.NodeSummary
}

// simCluster simulates n nodes of profile in a fat tree of spec, lets
// fault change the sources before they are collected, and sets the listed
// nodes' states.
func simCluster(t testing.TB, profile string, n int, spec sim.FabricSpec, fault func(c *sim.Cluster) error, states map[string]ginv1.NodeState) cluster {
	t.Helper()
	c, err := sim.NewCluster("draw", &spec, sim.NodesOf(profile, "node", 1, n))
	if err != nil {
		t.Fatal(err)
	}
	if fault != nil {
		if err := fault(c); err != nil {
			t.Fatal(err)
		}
	}
	invs, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build(invs, c.Fabric)
	if err != nil {
		t.Fatal(err)
	}
	out := cluster{invs: invs, g: g, fabric: c.Fabric}
	for _, inv := range invs {
		s := &ginv1.NodeSummary{Name: inv.GetNodeName(), State: ginv1.NodeState_NODE_STATE_UP, GpuCount: uint32(len(inv.GetGpus()))}
		if st, ok := states[s.Name]; ok {
			s.State = st
			s.StateReason = "missed 3 heartbeats"
		}
		if info, ok := g.NodeInfo(s.Name); ok {
			s.NvlinkDomain, s.LeafSwitch = info.NVLinkDomain, info.LeafSwitch
			s.NvlinksUp, s.NvlinksTotal = uint32(info.NVLinksUp), uint32(info.NVLinksTotal)
			s.ComputePortsUp, s.ComputePortsTotal = uint32(info.ComputePortsUp), uint32(info.ComputePortsTotal)
		}
		out.nodes = append(out.nodes, s)
	}
	return out
}

// source returns the named node's simulated source.
func source(c *sim.Cluster, name string) *sim.Source {
	for i, n := range c.Nodes {
		if n.Name == name {
			return c.Sources[i]
		}
	}
	return nil
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update once and review the file by eye)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the golden file (%d bytes, want %d); if the change is meant, rerun with -update and review it", path, len(got), len(want))
	}
}

func nodeHref(n string) string { return "node?name=" + n }
func expandHref(g string) string {
	if g == "" {
		return "?"
	}
	return "?expand=" + g
}
