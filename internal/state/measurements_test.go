package state

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/calib"
)

func goodMeasurement() *ginv1.Measurement {
	m := &ginv1.Measurement{
		Shape: &ginv1.PlacementShape{GpuModel: "NVIDIA H100 80GB HBM3", NvlinkDomainSize: 8, GpusPerNode: 8,
			NicsPerNode: 8, NicGbps: 400, NodeCount: 2, FabricTiers: 1, NcclVersion: "2.21.5"},
		Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, Algorithm: ginv1.Algorithm_ALGORITHM_TREE,
		ForcedBy: "flag", Nodes: []string{"node001", "node002"}, Source: "a.log:1",
		Points: []*ginv1.MeasuredPoint{{Bytes: 1 << 20, TimeUs: 50, BusBwGbps: 40}, {Bytes: 1 << 30, TimeUs: 9000, BusBwGbps: 230}},
	}
	m.Id = MeasurementID(m)
	return m
}

func TestCheckMeasurement(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(m *ginv1.Measurement)
		rehash bool
		want   string
	}{
		{"good", func(*ginv1.Measurement) {}, false, ""},
		{"id not the key's", func(m *ginv1.Measurement) { m.Id = "0000000000000000" }, false, "does not match its key"},
		{"key changed without the id", func(m *ginv1.Measurement) { m.Shape.NodeCount = 3; m.Nodes = append(m.Nodes, "node003") }, false, "does not match"},
		{"no shape", func(m *ginv1.Measurement) { m.Shape = nil }, true, "shape is missing"},
		{"zero gpus", func(m *ginv1.Measurement) { m.Shape.GpusPerNode = 0 }, true, "gpus_per_node"},
		{"nan nic", func(m *ginv1.Measurement) { m.Shape.NicGbps = math.NaN() }, true, "nic_gbps"},
		{"bad version", func(m *ginv1.Measurement) { m.Shape.NcclVersion = "2.21" }, true, "nccl_version"},
		{"alltoall", func(m *ginv1.Measurement) { m.Collective = 0 }, true, "collective"},
		{"unknown algorithm", func(m *ginv1.Measurement) { m.Algorithm = 42 }, true, "algorithm 42"},
		{"forced_by", func(m *ginv1.Measurement) { m.ForcedBy = "guess" }, true, "forced_by"},
		{"default with algo", func(m *ginv1.Measurement) { m.ForcedBy = "default" }, true, "forced_by default"},
		{"node count", func(m *ginv1.Measurement) { m.Nodes = m.Nodes[:1] }, true, "nodes named"},
		{"empty node", func(m *ginv1.Measurement) { m.Nodes[1] = "" }, true, "nodes[1]"},
		{"no points", func(m *ginv1.Measurement) { m.Points = nil }, true, "0 points"},
		{"too many points", func(m *ginv1.Measurement) {
			m.Points = nil
			for i := range calib.MaxPoints + 1 {
				m.Points = append(m.Points, &ginv1.MeasuredPoint{Bytes: uint64(i + 1), TimeUs: 1})
			}
		}, true, "points, want"},
		{"descending", func(m *ginv1.Measurement) { m.Points[1].Bytes = 1 }, true, "ascend"},
		{"zero time", func(m *ginv1.Measurement) { m.Points[0].TimeUs = 0 }, true, "not positive"},
		{"inf busbw", func(m *ginv1.Measurement) { m.Points[0].BusBwGbps = math.Inf(1) }, true, "bus bandwidth"},
		{"slower cell", func(m *ginv1.Measurement) { m.Points[0].SlowerTimeUs = 55 }, true, ""},
		{"slower cell equal", func(m *ginv1.Measurement) { m.Points[0].SlowerTimeUs = 50 }, true, ""},
		{"slower cell below the faster", func(m *ginv1.Measurement) { m.Points[0].SlowerTimeUs = 49 }, true, "slower cell 49"},
		{"negative slower cell", func(m *ginv1.Measurement) { m.Points[1].SlowerTimeUs = -1 }, true, "points[1]: slower cell"},
		{"nan slower cell", func(m *ginv1.Measurement) { m.Points[0].SlowerTimeUs = math.NaN() }, true, "slower cell"},
		{"long source", func(m *ginv1.Measurement) { m.Source = strings.Repeat("x", 300) }, true, "source"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := goodMeasurement()
			tc.edit(m)
			if tc.rehash && m.Shape != nil {
				m.Id = MeasurementID(m)
			}
			err := CheckMeasurement(m)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

func TestPutMeasurementIsIdempotentAndSnapshotted(t *testing.T) {
	s := New(nil)
	m := goodMeasurement()
	put := &statev1.PutMeasurement{Measurement: m}
	if r, err := s.PutMeasurement(5, put); err != nil || !r.Changed {
		t.Fatalf("first put: %+v %v", r, err)
	}
	if r, err := s.PutMeasurement(6, put); err != nil || r.Changed {
		t.Fatalf("replayed put: %+v %v, want unchanged", r, err)
	}
	got, ok := s.Measurement(m.GetId())
	if !ok || got.GetCreatedIndex() != 5 {
		t.Fatalf("stored %v %v, want created at 5", got, ok)
	}
	// A new run of the same key replaces the points.
	m2 := proto.CloneOf(m)
	m2.Points[0].TimeUs = 45
	if r, err := s.PutMeasurement(7, &statev1.PutMeasurement{Measurement: m2}); err != nil || !r.Changed {
		t.Fatalf("replacing put: %+v %v", r, err)
	}
	// A bad one is refused and changes nothing, at the same index on every replica.
	bad := proto.CloneOf(m)
	bad.Points = nil
	if _, err := s.PutMeasurement(8, &statev1.PutMeasurement{Measurement: bad}); err == nil {
		t.Fatal("bad measurement stored")
	}
	if got, _ := s.Measurement(m.GetId()); got.GetPoints()[0].GetTimeUs() != 45 || s.Index() != 8 {
		t.Fatalf("after refusal: %v, index %d", got.GetPoints()[0], s.Index())
	}

	snap := s.Snapshot()
	r := New(nil)
	if err := r.Restore(9, snap); err != nil {
		t.Fatal(err)
	}
	if got, ok := r.Measurement(m.GetId()); !ok || !proto.Equal(got, s.Measurements()[0]) {
		t.Fatalf("restored %v", got)
	}
	// A corrupt snapshot measurement is refused.
	snap.Measurements[0] = bad
	if err := New(nil).Restore(9, snap); err == nil || !strings.Contains(err.Error(), "snapshot measurement 0") {
		t.Fatalf("restore of a bad measurement: %v", err)
	}

	if r, err := s.DeleteMeasurement(10, &statev1.DeleteMeasurement{Id: m.GetId()}); err != nil || !r.Changed {
		t.Fatalf("delete %+v %v", r, err)
	}
	if r, err := s.DeleteMeasurement(11, &statev1.DeleteMeasurement{Id: m.GetId()}); err != nil || r.Changed {
		t.Fatalf("second delete %+v %v, want a no-op", r, err)
	}
	if len(s.Measurements()) != 0 {
		t.Fatal("measurement still there")
	}
}

func TestPutMeasurementBound(t *testing.T) {
	s := New(nil)
	for i := range MaxMeasurements + 1 {
		m := goodMeasurement()
		m.Shape.NodeCount = 1
		m.Nodes = []string{"n"}
		m.Shape.GpusPerNode = uint32(i%1024 + 1)
		m.Shape.FabricTiers = uint32(i / 1024)
		m.Id = MeasurementID(m)
		_, err := s.PutMeasurement(uint64(i+1), &statev1.PutMeasurement{Measurement: m})
		if i < MaxMeasurements && err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		if i == MaxMeasurements && err == nil {
			t.Fatal("bound not enforced")
		}
	}
}
