package master

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

func TestCalibrationImportListGetDelete(t *testing.T) {
	s, conn := startServer(t, time.Minute)
	registerNodes(t, s, "dgx-h100", "node001", "node002")
	cc := ginv1.NewCalibrationServiceClient(conn)
	ctx := context.Background()
	good := &ginv1.ImportMeasurementRequest{
		Nodes: "node[001-002]", GpusPerNode: 8, Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE,
		Algorithm: ginv1.Algorithm_ALGORITHM_TREE, ForcedBy: "flag", NcclVersion: "2.21.5", Source: "x.log:1",
		Points: []*ginv1.MeasuredPoint{{Bytes: 1 << 20, TimeUs: 60, BusBwGbps: 30}, {Bytes: 1 << 30, TimeUs: 11000, BusBwGbps: 180}},
	}
	bad := []struct {
		name string
		edit func(r *ginv1.ImportMeasurementRequest)
		code codes.Code
	}{
		{"no nodes", func(r *ginv1.ImportMeasurementRequest) { r.Nodes = "" }, codes.InvalidArgument},
		{"bad hostlist", func(r *ginv1.ImportMeasurementRequest) { r.Nodes = "node[1-" }, codes.InvalidArgument},
		{"unknown node", func(r *ginv1.ImportMeasurementRequest) { r.Nodes = "node[001-003]" }, codes.NotFound},
		{"too many GPUs", func(r *ginv1.ImportMeasurementRequest) { r.GpusPerNode = 9 }, codes.InvalidArgument},
		{"no points", func(r *ginv1.ImportMeasurementRequest) { r.Points = nil }, codes.InvalidArgument},
		{"descending sizes", func(r *ginv1.ImportMeasurementRequest) {
			r.Points = []*ginv1.MeasuredPoint{{Bytes: 2, TimeUs: 1}, {Bytes: 1, TimeUs: 1}}
		}, codes.InvalidArgument},
		{"bad version", func(r *ginv1.ImportMeasurementRequest) { r.NcclVersion = "two" }, codes.InvalidArgument},
		{"alltoall", func(r *ginv1.ImportMeasurementRequest) { r.Collective = 0 }, codes.InvalidArgument},
	}
	for _, tc := range bad {
		r := proto.CloneOf(good)
		tc.edit(r)
		_, err := cc.ImportMeasurement(ctx, r)
		if status.Code(err) != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.code)
		}
	}
	if l, err := cc.ListMeasurements(ctx, &ginv1.ListMeasurementsRequest{}); err != nil || len(l.GetMeasurements()) != 0 {
		t.Fatalf("after refusals: %v %v, want nothing stored", l, err)
	}
	resp, err := cc.ImportMeasurement(ctx, good)
	if err != nil || !resp.GetChanged() {
		t.Fatalf("import: %v %v", resp, err)
	}
	m := resp.GetMeasurement()
	if k := m.GetShape(); k.GetGpuModel() == "" || k.GetNodeCount() != 2 || k.GetGpusPerNode() != 8 || k.GetNicsPerNode() != 8 || m.GetCreatedIndex() == 0 {
		t.Fatalf("stored %v", m)
	}
	again, err := cc.ImportMeasurement(ctx, good)
	if err != nil || again.GetMeasurement().GetId() != m.GetId() || again.GetChanged() {
		t.Fatalf("re-import: %v %v, want the same id, unchanged", again, err)
	}
	l, err := cc.ListMeasurements(ctx, &ginv1.ListMeasurementsRequest{})
	if err != nil || len(l.GetMeasurements()) != 1 || len(l.GetMeasurements()[0].GetPoints()) != 0 || l.GetRead() == nil {
		t.Fatalf("list %v %v", l, err)
	}
	g, err := cc.GetMeasurement(ctx, &ginv1.GetMeasurementRequest{Id: m.GetId()})
	if err != nil || len(g.GetMeasurement().GetPoints()) != 2 {
		t.Fatalf("get %v %v", g, err)
	}
	if _, err := cc.GetMeasurement(ctx, &ginv1.GetMeasurementRequest{Id: "0123456789abcdef"}); status.Code(err) != codes.NotFound {
		t.Errorf("get missing: %v", err)
	}
	if _, err := cc.DeleteMeasurement(ctx, &ginv1.DeleteMeasurementRequest{Id: "../x"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("delete bad id: %v", err)
	}
	if d, err := cc.DeleteMeasurement(ctx, &ginv1.DeleteMeasurementRequest{Id: m.GetId()}); err != nil || !d.GetChanged() {
		t.Fatalf("delete %v %v", d, err)
	}
	if d, err := cc.DeleteMeasurement(ctx, &ginv1.DeleteMeasurementRequest{Id: m.GetId()}); err != nil || d.GetChanged() {
		t.Fatalf("second delete %v %v", d, err)
	}
}

// TestMeasurementsChangePlansAndEstimates: a measured forced tree that
// beats NCCL's measured default on the job's shape turns the plan's rule
// into an override that names the evidence, and estimates say "measured".
func TestMeasurementsChangePlansAndEstimates(t *testing.T) {
	s, conn := startServer(t, time.Minute)
	registerNodes(t, s, "dgx-h100", "node001", "node002", "node003", "node004")
	cc := ginv1.NewCalibrationServiceClient(conn)
	pc := ginv1.NewPlanServiceClient(conn)
	ctx := context.Background()
	curve := func(factor float64) []*ginv1.MeasuredPoint {
		var pts []*ginv1.MeasuredPoint
		for b := uint64(1 << 20); b <= 1<<30; b <<= 1 {
			pts = append(pts, &ginv1.MeasuredPoint{Bytes: b, TimeUs: (30 + float64(b)/50e3) * factor, BusBwGbps: 1})
		}
		return pts
	}
	for _, r := range []*ginv1.ImportMeasurementRequest{
		{Nodes: "node[001-002]", Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, Points: curve(1)},
		{Nodes: "node[001-002]", Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, Algorithm: ginv1.Algorithm_ALGORITHM_TREE,
			Protocol: ginv1.Protocol_PROTOCOL_SIMPLE, Points: curve(0.75)},
	} {
		if _, err := cc.ImportMeasurement(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	plan := func(job, nodes string) *ginv1.Plan {
		resp, err := pc.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: job, Nodes: nodes})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetPlan()
	}
	rule := func(p *ginv1.Plan, bytes uint64) *ginv1.PlanRule {
		for _, r := range p.GetRules() {
			b := uint32(0)
			for v := bytes; v > 1; v >>= 1 {
				b++
			}
			if r.GetCollective() == ginv1.Collective_COLLECTIVE_ALL_REDUCE && r.GetNRanks() == 16 && r.GetMinLog2Bytes() <= b && b <= r.GetMaxLog2Bytes() {
				return r
			}
		}
		t.Fatalf("no rule for %d bytes", bytes)
		return nil
	}
	r := rule(plan("calibrated", "node[001-002]"), 64<<20)
	if r.GetAlgorithm() != ginv1.Algorithm_ALGORITHM_TREE || r.GetProtocol() != ginv1.Protocol_PROTOCOL_SIMPLE ||
		!strings.Contains(r.GetReason(), "measured 25% faster than NCCL's default") {
		t.Fatalf("rule %v, want tree/simple on the measurement's evidence", r)
	}
	// The same job shape on other nodes of the same shape is the same shape.
	if r := rule(plan("same-shape", "node[003-004]"), 64<<20); r.GetAlgorithm() != ginv1.Algorithm_ALGORITHM_TREE {
		t.Errorf("node[003-004] (same shape): %v", r)
	}
	est, err := pc.Estimate(ctx, &ginv1.EstimateRequest{Nodes: "node[001-002]", Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, SizeBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if p := est.GetPrediction(); p.GetBasis() != "measured" || p.GetAlgorithm() != ginv1.Algorithm_ALGORITHM_TREE || !strings.Contains(p.GetEvidence(), "measurement") {
		t.Errorf("estimate %v, want the measured tree", p)
	}
	est, err = pc.Estimate(ctx, &ginv1.EstimateRequest{Nodes: "node[001-002]", Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, SizeBytes: 3 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if p := est.GetPrediction(); p.GetBasis() != "calibrated" {
		t.Errorf("estimate between measured sizes %v, want calibrated", p)
	}
	est, err = pc.Estimate(ctx, &ginv1.EstimateRequest{Nodes: "node[001-003]", Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, SizeBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if p := est.GetPrediction(); p.GetBasis() != "modelled" {
		t.Errorf("estimate of an unmeasured shape %v, want modelled", p)
	}
}
