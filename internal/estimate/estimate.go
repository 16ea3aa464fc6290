package estimate

import (
	"errors"
	"fmt"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/costmodel"
	"github.com/gin-topology/gin/internal/graph"
)

// ForPlacement predicts one collective of bytes on a fixed placement:
// gpusPerNode GPUs (0: all) of each of the nodes. The prediction's algbw and
// busbw are nccl-tests': algbw = bytes / time, busbw = algbw ×
// costmodel.BusFactor(coll, ranks).
func ForPlacement(g *graph.Graph, nodes []string, gpusPerNode int, coll ginv1.Collective, bytes uint64) (*ginv1.Prediction, error) {
	if g == nil {
		return nil, errors.New("estimate: no graph")
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("estimate: %w", ErrNoNodes)
	}
	if gpusPerNode < 0 {
		return nil, fmt.Errorf("estimate: gpus per node %d: want 0 (all) or more", gpusPerNode)
	}
	if err := checkCollective(coll); err != nil {
		return nil, fmt.Errorf("estimate: %w", err)
	}
	seen := make(map[string]struct{}, len(nodes))
	for _, name := range nodes {
		if _, dup := seen[name]; dup {
			return nil, fmt.Errorf("estimate: node %s is listed twice", name)
		}
		seen[name] = struct{}{}
		if _, ok := g.NodeInfo(name); !ok {
			return nil, fmt.Errorf("estimate: no node %q in the graph", name)
		}
	}
	s, err := costmodel.ShapeOf(g, nodes, gpusPerNode)
	if err != nil {
		return nil, fmt.Errorf("estimate: %w", err)
	}
	p, err := predict(s, coll, bytes)
	if err != nil {
		return nil, fmt.Errorf("estimate: %w", err)
	}
	return p, nil
}

// checkCollective accepts the collectives the cost model knows.
func checkCollective(c ginv1.Collective) error {
	switch c {
	case ginv1.Collective_COLLECTIVE_BROADCAST, ginv1.Collective_COLLECTIVE_REDUCE,
		ginv1.Collective_COLLECTIVE_ALL_GATHER, ginv1.Collective_COLLECTIVE_REDUCE_SCATTER,
		ginv1.Collective_COLLECTIVE_ALL_REDUCE:
		return nil
	}
	return fmt.Errorf("collective %v: want BROADCAST, REDUCE, ALL_GATHER, REDUCE_SCATTER or ALL_REDUCE", c)
}

// predict runs the cost model on a shape and converts its answer. A single
// rank communicates nothing: time 0, no algorithm.
func predict(s costmodel.Shape, coll ginv1.Collective, bytes uint64) (*ginv1.Prediction, error) {
	out := &ginv1.Prediction{
		Collective: coll, SizeBytes: bytes,
		NRanks: uint32(max(s.NRanks, 0)), NNodes: uint32(max(s.NNodes, 0)),
	}
	if s.NRanks <= 1 {
		return out, nil
	}
	p, err := costmodel.Predict(s, coll, bytes)
	if err != nil {
		return nil, err
	}
	out.Algorithm, out.Protocol, out.Channels = p.Algorithm, p.Protocol, uint32(max(p.Channels, 0))
	out.TimeUs = p.TimeUs
	if p.TimeUs > 0 {
		// bytes / (µs × 1e-6) / 1e9 = GB/s.
		out.AlgbwGbps = float64(bytes) / (p.TimeUs * 1e3)
		out.BusbwGbps = out.AlgbwGbps * costmodel.BusFactor(coll, s.NRanks)
	}
	return out, nil
}
