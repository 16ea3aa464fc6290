package plan

import (
	"math"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/calib"
	"github.com/gin-topology/gin/internal/costmodel"
	"github.com/gin-topology/gin/internal/planread"
	"github.com/gin-topology/gin/internal/state"
)

// measured builds a stored-like measurement of the world communicator of
// nodes: times at 1 MiB..1 GiB scaled by factor from a base curve.
func measured(t *testing.T, c *cluster, nodes []string, gpn int, a ginv1.Algorithm, by string, factor float64, created uint64) *ginv1.Measurement {
	t.Helper()
	key, err := calib.KeyOf(c.graph(t), nil, nodes, gpn, "2.21.5")
	if err != nil {
		t.Fatal(err)
	}
	m := &ginv1.Measurement{Shape: key, Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, Algorithm: a, ForcedBy: by,
		Nodes: nodes, CreatedIndex: created}
	for b := uint64(1 << 20); b <= 1<<30; b <<= 1 {
		base := 30 + float64(b)/200e3 // 200 GB/s algbw
		m.Points = append(m.Points, &ginv1.MeasuredPoint{Bytes: b, TimeUs: base * factor, BusBwGbps: 1})
	}
	m.Id = state.MeasurementID(m)
	if err := state.CheckMeasurement(m); err != nil {
		t.Fatal(err)
	}
	return m
}

// withSpread gives every point of m a slower cell spread above its time.
func withSpread(m *ginv1.Measurement, spread float64) *ginv1.Measurement {
	for _, p := range m.GetPoints() {
		p.SlowerTimeUs = p.GetTimeUs() * (1 + spread)
	}
	return m
}

func ruleAt(t *testing.T, p *ginv1.Plan, nRanks, nNodes int, bytes uint64) *ginv1.PlanRule {
	t.Helper()
	r, ok := planread.Lookup(p, ginv1.Collective_COLLECTIVE_ALL_REDUCE, nRanks, nNodes, bytes)
	if !ok {
		t.Fatalf("no rule for %d bytes", bytes)
	}
	return r
}

func TestMeasurementsDecide(t *testing.T) {
	c := newCluster(t, "dgx-h100", 2, flat)
	g := c.graph(t)
	def := measured(t, c, c.names, 8, 0, "default", 1, 1)
	tests := []struct {
		name      string
		ms        []*ginv1.Measurement
		wantAlgo  ginv1.Algorithm
		wantProto ginv1.Protocol // -1: any protocol the model picks
		wantWhy   []string
	}{
		{"tree measured 30% faster than NCCL's default", []*ginv1.Measurement{def, measured(t, c, c.names, 8, ginv1.Algorithm_ALGORITHM_TREE, "flag", 0.7, 2)},
			ginv1.Algorithm_ALGORITHM_TREE, -1, []string{"measured 30% faster than NCCL's default", "protocol from the model", "measurement " + def.GetId()}},
		{"tree measured only 3% faster: NCCL keeps it", []*ginv1.Measurement{def, measured(t, c, c.names, 8, ginv1.Algorithm_ALGORITHM_TREE, "flag", 0.97, 2)},
			0, 0, []string{"leave it to NCCL: measured", "is not 5% faster"}},
		{"NCCL's default measured alone", []*ginv1.Measurement{def}, 0, 0, []string{"leave it to NCCL: measured, NCCL's default takes"}},
		// 10% faster in its faster cell, but its in-place and out-of-place
		// cells differ by 8%: the slower one is not 5% faster.
		{"tree 10% faster within its own 8% spread: NCCL keeps it", []*ginv1.Measurement{def, withSpread(measured(t, c, c.names, 8, ginv1.Algorithm_ALGORITHM_TREE, "flag", 0.9, 2), 0.08)},
			0, 0, []string{"leave it to NCCL: measured", "(its slower cell ", "is not 5% faster"}},
		{"tree 10% faster with a 3% spread: GIN overrides", []*ginv1.Measurement{def, withSpread(measured(t, c, c.names, 8, ginv1.Algorithm_ALGORITHM_TREE, "flag", 0.9, 2), 0.03)},
			ginv1.Algorithm_ALGORITHM_TREE, -1, []string{"measured 10% faster than NCCL's default", "in its slower cell"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := BuildWith(g, "job-1", c.names, 8, calib.NewIndex(g, nil, tc.ms))
			if err != nil {
				t.Fatal(err)
			}
			if err := planread.Verify(p); err != nil {
				t.Fatal(err)
			}
			r := ruleAt(t, p, 16, 2, 64<<20)
			protoOK := r.GetProtocol() == tc.wantProto || (tc.wantProto == -1 && r.GetProtocol() != 0)
			if r.GetAlgorithm() != tc.wantAlgo || !protoOK {
				t.Fatalf("64 MiB rule %v, want %v/%v", r, tc.wantAlgo, tc.wantProto)
			}
			for _, w := range tc.wantWhy {
				if !strings.Contains(r.GetReason(), w) {
					t.Errorf("reason %q lacks %q", r.GetReason(), w)
				}
			}
			// Below the measured range the model decides, and says so.
			if small := ruleAt(t, p, 16, 2, 4096); strings.Contains(small.GetReason(), "measured") {
				t.Errorf("4 KiB rule %q uses measurements below the measured range", small.GetReason())
			}
			// One node's communicator has no measurement: the model.
			if r := ruleAt(t, p, 8, 1, 64<<20); strings.Contains(r.GetReason(), "measured") {
				t.Errorf("one-node rule %q uses the 2-node measurement", r.GetReason())
			}
		})
	}
	// Measurements of another shape (4 nodes) change nothing.
	c4 := newCluster(t, "dgx-h100", 4, flat)
	other := []*ginv1.Measurement{measured(t, c4, c4.names, 8, 0, "default", 1, 1), measured(t, c4, c4.names, 8, ginv1.Algorithm_ALGORITHM_TREE, "flag", 0.5, 2)}
	with, err := BuildWith(g, "job-1", c.names, 8, calib.NewIndex(g, nil, other))
	if err != nil {
		t.Fatal(err)
	}
	without, err := Build(g, "job-1", c.names, 8)
	if err != nil {
		t.Fatal(err)
	}
	if with.GetContentHash() != without.GetContentHash() {
		t.Error("measurements of a 4-node shape changed a 2-node plan")
	}
}

// TestLeaveToNCCLRangesSplit: "leave it to NCCL" ranges are split where
// NCCL's own choice changes, so each range carries its own time.
func TestLeaveToNCCLRangesSplit(t *testing.T) {
	c := newCluster(t, "dgx-h100", 2, flat)
	p := mustBuild(t, c, c.names, 8)
	n := 0
	for _, r := range p.GetRules() {
		if r.GetCollective() == ginv1.Collective_COLLECTIVE_ALL_REDUCE && r.GetNRanks() == 16 {
			n++
			if r.GetMinLog2Bytes() == 0 && r.GetMaxLog2Bytes() == planread.MaxLog2Bytes {
				t.Errorf("one rule for 0-∞: %v", r)
			}
		}
	}
	if n < 2 {
		t.Errorf("%d all_reduce rules on 2 nodes, want one per range of NCCL's choice", n)
	}
}

// fakeEvidence answers one default cell at every size from 1 MiB, at
// factor × GIN's model of NCCL's own choice.
type fakeEvidence struct {
	s      costmodel.Shape
	factor float64
}

func (f fakeEvidence) Measured(_ []string, _ int, coll ginv1.Collective, bytes uint64) []calib.Cell {
	if bytes < 1<<20 {
		return nil
	}
	n, err := costmodel.PredictNCCL(f.s, coll, bytes)
	if err != nil {
		return nil
	}
	us, _ := costmodel.Cost(f.s, coll, n.Algorithm, n.Protocol, bytes)
	return []calib.Cell{{Default: true, TimeUs: us * f.factor, How: "measured", Evidence: "fake"}}
}

func TestModelMarginIsTheMeasuredError(t *testing.T) {
	c := newCluster(t, "dgx-h100", 2, flat)
	world, err := costmodel.ShapeOf(c.graph(t), c.names, 8)
	if err != nil {
		t.Fatal(err)
	}
	cm := comm{shape: world, nodes: c.names, gpn: 8}
	ar := ginv1.Collective_COLLECTIVE_ALL_REDUCE
	for _, tc := range []struct {
		ev   Evidence
		want float64
	}{
		{nil, OverrideMargin},
		{fakeEvidence{world, 1.01}, OverrideMargin},     // the model within 1%: NCCL's 3% stands
		{fakeEvidence{world, 1.25}, 0.2},                // 25% slower measured: |model-m|/m = 0.2
		{fakeEvidence{world, 3}, 0.5},                   // capped
		{fakeEvidence{world, 1 / 1.1}, 0.1000000000001}, // faster than modelled
	} {
		if got := modelMargin(cm, ar, tc.ev); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("margin %v, want %v", got, tc.want)
		}
	}
}

// TestScaledRingInPlan: a forced ring all_gather measured on 4 nodes
// stands, scaled, for NCCL's ring on a 2-node plan of the same nodes'
// kind, and the rule says it was scaled and from what; a 2-node plan with
// its own measurement does not use it.
func TestScaledRingInPlan(t *testing.T) {
	c := newCluster(t, "dgx-h100", 2, flat)
	g := c.graph(t)
	c4 := newCluster(t, "dgx-h100", 4, flat)
	ring4 := measured(t, c4, c4.names, 8, ginv1.Algorithm_ALGORITHM_RING, "flag", 1, 1)
	ring4.Collective = ginv1.Collective_COLLECTIVE_ALL_GATHER
	ring4.Id = state.MeasurementID(ring4)
	own := measured(t, c, c.names, 8, 0, "default", 1, 2)
	own.Collective = ginv1.Collective_COLLECTIVE_ALL_GATHER
	own.Id = state.MeasurementID(own)
	for _, tc := range []struct {
		name string
		ms   []*ginv1.Measurement
		want string
	}{
		{"scaled from 4 nodes", []*ginv1.Measurement{ring4}, "scaled, from 4 to 2 nodes"},
		{"own shape measured", []*ginv1.Measurement{ring4, own}, "NCCL's default takes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := BuildWith(g, "job-1", c.names, 8, calib.NewIndex(g, nil, tc.ms))
			if err != nil {
				t.Fatal(err)
			}
			r, ok := planread.Lookup(p, ginv1.Collective_COLLECTIVE_ALL_GATHER, 16, 2, 64<<20)
			if !ok {
				t.Fatal("no 64 MiB all_gather rule")
			}
			if !strings.Contains(r.GetReason(), tc.want) || r.GetAlgorithm() != 0 {
				t.Errorf("rule %v: want NCCL's choice, reason with %q", r, tc.want)
			}
			if tc.want != "scaled, from 4 to 2 nodes" && strings.Contains(r.GetReason(), "scaled") {
				t.Errorf("reason %q uses the scaled run although the shape has its own", r.GetReason())
			}
		})
	}
}
