package export

import (
	"errors"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/graph"
)

// The graph's entry points: each builds the graph's Topology and renders it
// with one engine (slurm.go, nccl.go, json.go, dot.go). A caller writing
// several formats of one graph builds the Topology once and calls the
// engines on it.

// SlurmTree writes a Slurm topology.conf for TopologyPlugin=topology/tree
// from the graph's compute fabric (Topology.SlurmTree). It fails on an
// empty graph (Slurm must never get an empty tree) and on node names that
// are not valid hostlist names.
func SlurmTree(g *graph.Graph) ([]byte, error) {
	t, err := Build(g)
	if err != nil {
		return nil, slurmError(err)
	}
	return t.SlurmTree()
}

// SlurmBlock writes a Slurm topology.conf for TopologyPlugin=topology/block
// (Topology.SlurmBlock). Every node must be in an NVLink domain.
func SlurmBlock(g *graph.Graph) ([]byte, error) {
	t, err := Build(g)
	if err != nil {
		return nil, slurmError(err)
	}
	return t.SlurmBlock()
}

// NCCLTopo writes an NCCL_TOPO_FILE for the node of inv, whose structure g
// holds as built from inv (Topology.NCCLTopo). It renders the part of the
// model the file reads, that node's Host, and not the whole cluster's.
func NCCLTopo(g *graph.Graph, inv *ginv1.NodeInventory) ([]byte, error) {
	if inv == nil {
		return nil, errNilInventory
	}
	if g == nil {
		return nil, errors.New("export: nccl topo: nil graph")
	}
	return hostTopology(g, inv.NodeName).NCCLTopo(inv)
}

// errNilGraph: JSON and DOT need a graph (an empty one has a document and
// a drawing).
var errNilGraph = errors.New("export: nil graph")

// JSON writes the graph as an indented Document (schema JSONSchema),
// ending with a newline (Topology.JSON).
func JSON(g *graph.Graph) ([]byte, error) {
	if g == nil {
		return nil, errNilGraph
	}
	return newTopology(g).JSON()
}

// DOT writes the graph for Graphviz (Topology.DOT).
func DOT(g *graph.Graph) ([]byte, error) {
	if g == nil {
		return nil, errNilGraph
	}
	return newTopology(g).DOT()
}
