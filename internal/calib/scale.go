package calib

import (
	"fmt"
	"sort"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/costmodel"
)

// MaxScale is how far a measurement's node count may be from a
// communicator's for its ring runs to be scaled to it: at most MaxScale
// times more or fewer nodes.
const MaxScale = 2

// NearbyForRing says whether m's ring runs may be scaled to a communicator
// of shape key: m forced ring, and the two shapes differ only in their
// node count, both multi-node over NICs (not one MNNVL clique), at most
// MaxScale apart. That is sound for a
// ring over the network: with the same GPUs, NVLink domain, GPUs and NICs
// per node, NIC rate and fabric tiers, a ring's bandwidth per NIC does not
// depend on the node count, and the model carries what does (the latency
// of the longer ring). Nothing else is scaled: NCCL's default may change
// algorithm with the node count, and a tree's bytes per node do (2 and 3
// nodes differ from 4 and more).
func NearbyForRing(m *ginv1.Measurement, key *ginv1.PlacementShape) bool {
	a, b := m.GetShape(), key
	if m.GetAlgorithm() != ginv1.Algorithm_ALGORITHM_RING || a.GetNodeCount() == b.GetNodeCount() ||
		a.GetNodeCount() < 2 || b.GetNodeCount() < 2 || a.GetNicsPerNode() == 0 {
		return false
	}
	lo, hi := min(a.GetNodeCount(), b.GetNodeCount()), max(a.GetNodeCount(), b.GetNodeCount())
	if hi > MaxScale*lo {
		return false
	}
	return sameButNodes(a, b)
}

// scaled returns the ring cells of coll at bytes scaled from the nearby
// measurements ms to shape s: the model's time on s times the measured /
// model ratio at bytes on the measured shape (At with that shape's
// model). Per protocol the nearest node count wins, then the newest.
func scaled(ms []*ginv1.Measurement, s costmodel.Shape, coll ginv1.Collective, bytes uint64) []Cell {
	ppn := s.NRanks / max(s.NNodes, 1)
	dist := func(m *ginv1.Measurement) int {
		return max(int(m.GetShape().GetNodeCount()), s.NNodes) - min(int(m.GetShape().GetNodeCount()), s.NNodes)
	}
	best := map[ginv1.Protocol]*ginv1.Measurement{}
	for _, m := range ms {
		if m.GetCollective() != coll {
			continue
		}
		old, ok := best[m.GetProtocol()]
		if ok && (dist(old) < dist(m) || dist(old) == dist(m) && old.GetCreatedIndex() >= m.GetCreatedIndex()) {
			continue
		}
		best[m.GetProtocol()] = m
	}
	var out []Cell
	for proto, m := range best {
		from := s
		from.NNodes = int(m.GetShape().GetNodeCount())
		from.NRanks = ppn * from.NNodes
		fromCurve := CellCurve(from, m)
		us, how, ok := At(m, bytes, fromCurve)
		mFrom, mTo := fromCurve(bytes), CellCurve(s, m)(bytes)
		if !ok || mFrom <= 0 || mTo <= 0 {
			continue
		}
		r := us / mFrom
		out = append(out, Cell{Algorithm: ginv1.Algorithm_ALGORITHM_RING, Protocol: proto, TimeUs: mTo * r, How: "scaled", ID: m.GetId(), Spread: SpreadAt(m, bytes), NCCLVersion: m.GetShape().GetNcclVersion(),
			Evidence: fmt.Sprintf("from %d to %d nodes: %s there, measured/model %.2f, times GIN's model here (a ring over the same NICs: its bandwidth per NIC does not depend on the node count); %s",
				from.NNodes, s.NNodes, how, r, Describe(m))})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].TimeUs != out[j].TimeUs {
			return out[i].TimeUs < out[j].TimeUs
		}
		return out[i].ID < out[j].ID
	})
	return out
}
