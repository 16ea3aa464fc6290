package costmodel

import (
	"errors"
	"fmt"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// ModelVersion names the model; it is written into every plan.
const ModelVersion = "gin-cost-4"

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
	// NICPath is how the GPUs reach their NICs on the worst sampled path
	// (the zero value: through a PCIe switch, or not known).
	NICPath NICPath
	// Nominal is what the same links give when none is degraded or down
	// (ShapeOf); zero fields: as the shape says. Only Ideal reads it: the
	// models price the shape as it is.
	Nominal Nominal
}

// Nominal is a shape's links as built: ShapeOf takes the fastest of
// their kind it sees, so a link slower than its peers counts as degraded.
type Nominal struct {
	// NICsPerNode counts the compute ports, up or down, of the node with
	// the fewest (at most the ranks per node); NICGbps is the fastest
	// sampled NET path (the rails of the first node pair included);
	// IntraGBps the fastest NVLink ring step of the first node's GPUs.
	NICsPerNode int
	NICGbps     float64
	IntraGBps   float64
}

// NICPath is the GPU→NIC path class as NCCL ranks it for its inter-node
// graph (typeInter): it decides GPUDirect RDMA and LL128 across nodes.
type NICPath uint8

// GPU→NIC paths.
const (
	// NICPathSwitch: through a PCIe switch (PIX/PXB), or unknown: GPUDirect
	// RDMA, LL128 across nodes (NCCL: typeInter ≤ PXB).
	NICPathSwitch NICPath = iota
	// NICPathC2C: over the GPU's C2C link to its own Grace CPU, then that
	// CPU's PCIe (NCCL ≥ 2.23's P2C): GPUDirect RDMA kept, LL128 across
	// nodes on SM90+ (P2C ≤ PXN). `nvidia-smi topo -m` prints SYS.
	NICPathC2C
	// NICPathHost: through a host bridge or across CPUs without C2C
	// (PHB/NODE/SYS): no GPUDirect RDMA at NCCL's default GDR level, no
	// LL128 across nodes.
	NICPathHost
)

// String names the path as evidence prints it.
func (n NICPath) String() string {
	switch n {
	case NICPathC2C:
		return "GPU→NIC over Grace C2C + PCIe (NCCL P2C, GPUDirect RDMA kept)"
	case NICPathHost:
		return "GPU→NIC through the host (no GPUDirect RDMA, no LL128 across nodes)"
	}
	return "GPU→NIC through a PCIe switch"
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

// ErrNoAlgorithm is returned when no (algorithm, protocol) is usable for
// the shape (NCCL would fail with "No algorithm/protocol available").
var ErrNoAlgorithm = errors.New("costmodel: no usable algorithm/protocol")

// Algorithms and Protocols are the cells of NCCL's cost table in NCCL's
// index order (ties go to the first).
var (
	Algorithms = []ginv1.Algorithm{
		ginv1.Algorithm_ALGORITHM_TREE, ginv1.Algorithm_ALGORITHM_RING,
		ginv1.Algorithm_ALGORITHM_COLLNET_DIRECT, ginv1.Algorithm_ALGORITHM_COLLNET_CHAIN,
		ginv1.Algorithm_ALGORITHM_NVLS, ginv1.Algorithm_ALGORITHM_NVLS_TREE, ginv1.Algorithm_ALGORITHM_PAT,
	}
	Protocols = []ginv1.Protocol{ginv1.Protocol_PROTOCOL_LL, ginv1.Protocol_PROTOCOL_LL128, ginv1.Protocol_PROTOCOL_SIMPLE}
)

// collIndex maps a Collective to ncclFunc_t; -1 for others.
func collIndex(c ginv1.Collective) int {
	if c < ginv1.Collective_COLLECTIVE_BROADCAST || c > ginv1.Collective_COLLECTIVE_ALL_REDUCE {
		return -1
	}
	return int(c) - 1
}

// Predict returns the fastest (algorithm, protocol) for coll of bytes on s
// in GIN's model.
func Predict(s Shape, coll ginv1.Collective, bytes uint64) (Prediction, error) {
	return predict(s, coll, bytes, true)
}

// PredictNCCL returns what NCCL's own model (no tuner) picks for coll of
// bytes on s, with NCCL's predicted time: the same formulas without GIN's
// fabric adjustments (oversubscription, switch hops, Ethernet latency,
// 2- and 3-node tree NIC bytes, measured NVLink step latency).
func PredictNCCL(s Shape, coll ginv1.Collective, bytes uint64) (Prediction, error) {
	return predict(s, coll, bytes, false)
}

func predict(s Shape, coll ginv1.Collective, bytes uint64, gin bool) (Prediction, error) {
	c := collIndex(coll)
	if c < 0 {
		return Prediction{}, fmt.Errorf("costmodel: collective %v is not one the tuner sees", coll)
	}
	p, err := derive(s, gin)
	if err != nil {
		return Prediction{}, err
	}
	best := Prediction{TimeUs: -1}
	for a := range numAlgos {
		for pr := range numProtos {
			us, ch, ok := p.cell(c, a, pr, bytes)
			if !ok || (best.TimeUs >= 0 && us >= best.TimeUs) {
				continue
			}
			best = Prediction{Algorithm: Algorithms[a], Protocol: Protocols[pr], Channels: ch, TimeUs: us}
		}
	}
	if best.TimeUs < 0 {
		return Prediction{}, fmt.Errorf("%w for %v on %d ranks over %d nodes", ErrNoAlgorithm, coll, s.NRanks, s.NNodes)
	}
	if best.TimeUs > 0 {
		best.AlgBWGBps = float64(bytes) / best.TimeUs / 1000
	}
	best.BusBWGBps = best.AlgBWGBps * BusFactor(coll, s.NRanks)
	return best, nil
}

// Cost is the predicted time of one (algorithm, protocol) cell, µs; ok is
// false when NCCL would not offer that cell for s.
func Cost(s Shape, coll ginv1.Collective, algo ginv1.Algorithm, proto ginv1.Protocol, bytes uint64) (us float64, ok bool) {
	return cost(s, coll, algo, proto, bytes, true)
}

// CostNCCL is Cost in NCCL's own model.
func CostNCCL(s Shape, coll ginv1.Collective, algo ginv1.Algorithm, proto ginv1.Protocol, bytes uint64) (us float64, ok bool) {
	return cost(s, coll, algo, proto, bytes, false)
}

func cost(s Shape, coll ginv1.Collective, algo ginv1.Algorithm, proto ginv1.Protocol, bytes uint64, gin bool) (float64, bool) {
	c, a, pr := collIndex(coll), int(algo)-1, int(proto)-1
	if c < 0 || a < 0 || a >= numAlgos || pr < 0 || pr >= numProtos {
		return 0, false
	}
	p, err := derive(s, gin)
	if err != nil {
		return 0, false
	}
	us, _, ok := p.cell(c, a, pr, bytes)
	return us, ok
}

// BusFactor is nccl-tests' busbw/algbw factor for coll on n ranks.
func BusFactor(coll ginv1.Collective, n int) float64 {
	if n < 1 {
		return 0
	}
	switch coll {
	case ginv1.Collective_COLLECTIVE_ALL_REDUCE:
		return 2 * float64(n-1) / float64(n)
	case ginv1.Collective_COLLECTIVE_ALL_GATHER, ginv1.Collective_COLLECTIVE_REDUCE_SCATTER:
		return float64(n-1) / float64(n)
	}
	return 1
}
