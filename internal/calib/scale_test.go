package calib

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/costmodel"
)

// TestScaledRing: a forced ring run of 4 DGX H100 nodes that measured 10%
// slower than GIN's model is scaled to communicators of 2 and 8 such nodes
// (the model there times the measured ratio, said so in the evidence);
// never to 16 nodes (more than MaxScale away), one node, other GPUs per
// node, from tree or NCCL's-default runs, nor where the communicator's own
// shape has measurements.
func TestScaledRing(t *testing.T) {
	g, nodes := simGraph(t, "dgx-h100", 16)
	const slower = 1.10
	ar := ginv1.Collective_COLLECTIVE_ALL_REDUCE
	run := func(algo ginv1.Algorithm, on []string, id string) *ginv1.Measurement {
		t.Helper()
		key, err := KeyOf(g, nil, on, 0, "2.21.5")
		if err != nil {
			t.Fatal(err)
		}
		s, err := costmodel.ShapeOf(g, on, 0)
		if err != nil {
			t.Fatal(err)
		}
		m := &ginv1.Measurement{Id: id, CreatedIndex: 1, Collective: ar, Algorithm: algo, Shape: key, Nodes: on}
		curve := CellCurve(s, m)
		for b := uint64(32 << 20); b <= 1<<30; b *= 2 {
			m.Points = append(m.Points, &ginv1.MeasuredPoint{Bytes: b, TimeUs: curve(b) * slower})
		}
		return m
	}
	ring4 := run(ginv1.Algorithm_ALGORITHM_RING, nodes[:4], "ring4")
	tree4 := run(ginv1.Algorithm_ALGORITHM_TREE, nodes[:4], "tree4")
	def4 := run(0, nodes[:4], "def4")
	def8 := run(0, nodes[:8], "def8")
	const bytes = 256 << 20
	tests := []struct {
		name   string
		ms     []*ginv1.Measurement
		on     []string
		gpn    int
		scaled bool
		from   string
	}{
		{"8 nodes from 4", []*ginv1.Measurement{ring4}, nodes[:8], 0, true, "from 4 to 8 nodes"},
		{"2 nodes from 4", []*ginv1.Measurement{ring4}, nodes[:2], 0, true, "from 4 to 2 nodes"},
		{"16 nodes: 4× away", []*ginv1.Measurement{ring4}, nodes, 0, false, ""},
		{"one node", []*ginv1.Measurement{ring4}, nodes[:1], 0, false, ""},
		{"4 GPUs per node", []*ginv1.Measurement{ring4}, nodes[:8], 4, false, ""},
		{"a tree run", []*ginv1.Measurement{tree4}, nodes[:8], 0, false, ""},
		{"NCCL's default run", []*ginv1.Measurement{def4}, nodes[:8], 0, false, ""},
		{"own shape measured", []*ginv1.Measurement{ring4, def8}, nodes[:8], 0, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cells := NewIndex(g, nil, tc.ms).Measured(tc.on, tc.gpn, ar, bytes)
			var sc *Cell
			for i := range cells {
				if cells[i].How == "scaled" {
					sc = &cells[i]
				}
			}
			if (sc != nil) != tc.scaled {
				t.Fatalf("cells %+v, want scaled %v", cells, tc.scaled)
			}
			if sc == nil {
				return
			}
			s, err := costmodel.ShapeOf(g, tc.on, tc.gpn)
			if err != nil {
				t.Fatal(err)
			}
			want := CellCurve(s, ring4)(bytes) * slower
			if math.Abs(sc.TimeUs-want) > 1e-6*want || sc.Algorithm != ginv1.Algorithm_ALGORITHM_RING {
				t.Errorf("scaled %v %.3f µs, want ring %.3f µs", sc.Algorithm, sc.TimeUs, want)
			}
			if !strings.Contains(sc.Evidence, tc.from) || !strings.Contains(sc.Evidence, "measured/model 1.10") || !strings.Contains(sc.Evidence, "ring4") {
				t.Errorf("evidence %q", sc.Evidence)
			}
			p := &ginv1.Prediction{SizeBytes: bytes, Collective: ar, NRanks: uint32(s.NRanks)}
			Apply(p, cells)
			if p.GetBasis() != BasisCalibrated || !strings.Contains(p.GetEvidence(), "scaled") {
				t.Errorf("estimate basis %q, evidence %q", p.GetBasis(), p.GetEvidence())
			}
		})
	}
}

// TestNearbyForRingKeys: which keys a forced ring run may be scaled to.
func TestNearbyForRingKeys(t *testing.T) {
	base := &ginv1.PlacementShape{GpuModel: "H100", NvlinkDomainSize: 8, GpusPerNode: 8, NicsPerNode: 8, NicGbps: 400, NodeCount: 4, FabricTiers: 1}
	with := func(edit func(k *ginv1.PlacementShape)) *ginv1.PlacementShape {
		k := proto.CloneOf(base)
		edit(k)
		return k
	}
	ring := &ginv1.Measurement{Algorithm: ginv1.Algorithm_ALGORITHM_RING, Shape: base}
	mnnvl := &ginv1.Measurement{Algorithm: ginv1.Algorithm_ALGORITHM_RING,
		Shape: &ginv1.PlacementShape{GpuModel: "GB200", NvlinkDomainSize: 72, GpusPerNode: 4, NodeCount: 4}}
	for _, tc := range []struct {
		name string
		m    *ginv1.Measurement
		key  *ginv1.PlacementShape
		want bool
	}{
		{"8 nodes", ring, with(func(k *ginv1.PlacementShape) { k.NodeCount = 8 }), true},
		{"2 nodes", ring, with(func(k *ginv1.PlacementShape) { k.NodeCount = 2 }), true},
		{"same node count", ring, base, false},
		{"9 nodes: over 2×", ring, with(func(k *ginv1.PlacementShape) { k.NodeCount = 9 }), false},
		{"one node", ring, with(func(k *ginv1.PlacementShape) { k.NodeCount = 1 }), false},
		{"other NIC rate", ring, with(func(k *ginv1.PlacementShape) { k.NodeCount = 8; k.NicGbps = 200 }), false},
		{"other tiers", ring, with(func(k *ginv1.PlacementShape) { k.NodeCount = 8; k.FabricTiers = 2 }), false},
		{"other GPU", ring, with(func(k *ginv1.PlacementShape) { k.NodeCount = 8; k.GpuModel = "A100" }), false},
		{"a tree run", &ginv1.Measurement{Algorithm: ginv1.Algorithm_ALGORITHM_TREE, Shape: base}, with(func(k *ginv1.PlacementShape) { k.NodeCount = 8 }), false},
		{"one MNNVL clique", mnnvl, &ginv1.PlacementShape{GpuModel: "GB200", NvlinkDomainSize: 72, GpusPerNode: 4, NodeCount: 8}, false},
	} {
		if got := NearbyForRing(tc.m, tc.key); got != tc.want {
			t.Errorf("%s: NearbyForRing = %v, want %v", tc.name, got, tc.want)
		}
	}
}
