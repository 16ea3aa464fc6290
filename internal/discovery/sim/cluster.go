package sim

import (
	"context"
	"fmt"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// Cluster is a simulated cluster: one source per node, each node cabled
// into one simulated fabric. It is the one way tests, benchmarks and the
// dev cluster get simulated nodes and their fabric.
type Cluster struct {
	Nodes   []FabricNode
	Sources []*Source
	// Fabric is what a fabric scan of the cluster finds (nil without one).
	Fabric *ginv1.FabricTopology
}

// NodesOf names count nodes of one profile prefix%03d, numbered from
// first ("node", 1, 3: node001..node003), indexed from 0.
func NodesOf(profile, prefix string, first, count int) []FabricNode {
	out := make([]FabricNode, count)
	for i := range out {
		out[i] = FabricNode{Name: fmt.Sprintf("%s%03d", prefix, first+i), Profile: profile, Index: i}
	}
	return out
}

// NewCluster simulates nodes under the cluster name (part of every
// simulated GUID), cabled into a fabric of spec; a nil spec builds no
// fabric (the nodes' ports then name no neighbours).
func NewCluster(cluster string, spec *FabricSpec, nodes []FabricNode) (*Cluster, error) {
	c := &Cluster{Nodes: nodes}
	nbrs := map[string][]*ginv1.FabricNeighbor{}
	if spec != nil {
		fab, n, err := BuildFabric(*spec, cluster, nodes)
		if err != nil {
			return nil, fmt.Errorf("sim: fabric: %w", err)
		}
		c.Fabric, nbrs = fab, n
	}
	for _, n := range nodes {
		src, err := NewSource(n.Profile, NodeOptions{NodeName: n.Name, Index: n.Index, Cluster: cluster, Neighbors: nbrs[n.Name]})
		if err != nil {
			return nil, fmt.Errorf("sim: node %s: %w", n.Name, err)
		}
		c.Sources = append(c.Sources, src)
	}
	return c, nil
}

// Names lists the nodes' names, in order.
func (c *Cluster) Names() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Name
	}
	return out
}

// Collect collects every node's inventory once, in order.
func (c *Cluster) Collect(ctx context.Context) ([]*ginv1.NodeInventory, error) {
	out := make([]*ginv1.NodeInventory, len(c.Sources))
	for i, s := range c.Sources {
		inv, err := s.Collect(ctx)
		if err != nil {
			return nil, fmt.Errorf("sim: collect %s: %w", c.Nodes[i].Name, err)
		}
		out[i] = inv
	}
	return out, nil
}
