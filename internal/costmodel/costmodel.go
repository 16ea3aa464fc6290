// Package costmodel predicts NCCL collective times for a placement: NCCL's
// own model (latency + size / bandwidth per algorithm and protocol, NCCL's
// constants) plus what NCCL cannot see from one node: leaf/spine hops and
// oversubscription, degraded or down links, MNNVL domains, NVLS on NVSwitch
// systems. Plans, estimates and host ordering all use it.
//
// CONTRACT STUB: the types and signatures below are what plan, estimate and
// master code against; the bodies are being written.
package costmodel

import (
	"errors"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/graph"
)

// ModelVersion names the model; it is written into every plan.
const ModelVersion = "gin-cost-1"

// Shape is what the model needs to know about a communicator's placement.
type Shape struct {
	NRanks, NNodes int
	// CompCap is the lowest SM version of the GPUs (80, 90, 100).
	CompCap int
	// IntraNVLink: the GPUs of a node talk over NVLink (else PCIe);
	// IntraGBps is the per-GPU bottleneck of that path, GB/s per direction.
	IntraNVLink bool
	IntraGBps   float64
	// NVSwitch: the node's NVLinks go through NVSwitches (NVLS possible).
	NVSwitch bool
	// MNNVL: all nodes are in one multi-node NVLink clique.
	MNNVL bool
	// Inter-node: compute NICs per node used by the ranks, the bottleneck
	// rate of one NIC on the worst path (Gb/s, after degraded links), the
	// switch hops of the worst path, its worst oversubscription, and
	// whether the fabric is Ethernet (RoCE).
	NICsPerNode      int
	NICGbps          float64
	InterHops        int
	Oversubscription float64
	Ethernet         bool
}

// Prediction is the model's answer for one collective.
type Prediction struct {
	Algorithm ginv1.Algorithm
	Protocol  ginv1.Protocol
	Channels  int
	TimeUs    float64
	AlgBWGBps float64
	BusBWGBps float64
}

// ErrNotImplemented is returned by the stub.
var ErrNotImplemented = errors.New("costmodel: not implemented yet")

// Predict returns the fastest (algorithm, protocol) for coll of bytes on s.
func Predict(s Shape, coll ginv1.Collective, bytes uint64) (Prediction, error) {
	return Prediction{}, ErrNotImplemented
}

// Cost is the predicted time of one (algorithm, protocol) cell, µs; ok is
// false when NCCL would not offer that cell for s.
func Cost(s Shape, coll ginv1.Collective, algo ginv1.Algorithm, proto ginv1.Protocol, bytes uint64) (us float64, ok bool) {
	return 0, false
}

// BusFactor is nccl-tests' busbw/algbw factor for coll on n ranks.
func BusFactor(coll ginv1.Collective, n int) float64 { return 1 }

// ShapeOf derives the Shape of a communicator over gpusPerNode GPUs (0: all)
// of each node from the graph.
func ShapeOf(g *graph.Graph, nodes []string, gpusPerNode int) (Shape, error) {
	return Shape{}, ErrNotImplemented
}
