package state

import (
	"math"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// TestSnapshotMeasurementsCompat: Snapshot.measurements (field 20) came
// without a format bump, as a proto3 field addition. Both directions hold:
// a snapshot written before it (format 1, no field 20) restores here with no
// measurements and the rest intact; and a snapshot written now, read by a
// binary that does not know field 20, is exactly the snapshot without its
// measurements (the field is self-contained on the wire), so such a binary
// restores everything else and drops the measurements.
func TestSnapshotMeasurementsCompat(t *testing.T) {
	// As the binary before calibration wrote it: format 1, a cluster id.
	var old []byte
	old = protowire.AppendTag(old, 1, protowire.VarintType)
	old = protowire.AppendVarint(old, SnapshotFormat)
	old = protowire.AppendTag(old, 7, protowire.BytesType)
	old = protowire.AppendString(old, "cluster-a")
	var snap statev1.Snapshot
	if err := proto.Unmarshal(old, &snap); err != nil {
		t.Fatal(err)
	}
	s := New(nil)
	if err := s.Restore(3, &snap); err != nil {
		t.Fatalf("restore of a pre-calibration snapshot: %v", err)
	}
	if s.ClusterID() != "cluster-a" || len(s.Measurements()) != 0 {
		t.Fatalf("restored cluster %q, %d measurements", s.ClusterID(), len(s.Measurements()))
	}

	// Now with a measurement, read by a binary that skips field 20.
	m := goodMeasurement()
	if _, err := s.PutMeasurement(4, &statev1.PutMeasurement{Measurement: m}); err != nil {
		t.Fatal(err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	var stripped []byte
	for rest := b; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 {
			t.Fatal(protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, rest[n:])
		if m < 0 {
			t.Fatal(protowire.ParseError(m))
		}
		if num != 20 {
			stripped = append(stripped, rest[:n+m]...)
		}
		rest = rest[n+m:]
	}
	var older, want statev1.Snapshot
	if err := proto.Unmarshal(stripped, &older); err != nil {
		t.Fatal(err)
	}
	proto.Merge(&want, s.Snapshot())
	want.Measurements = nil
	if !proto.Equal(&older, &want) {
		t.Fatalf("without field 20 the snapshot is not the rest of the state:\n%v\nwant\n%v", &older, &want)
	}
	if err := New(nil).Restore(5, &older); err != nil {
		t.Fatalf("restore without measurements: %v", err)
	}
}

// TestSlowerTimeUsCompat: MeasuredPoint.slower_time_us (field 6) came after
// measurements, as a proto3 field addition. A point written without it (as
// the binary before it stored one) reads 0, "spread unknown", and is valid;
// a point with it keeps it through a snapshot and restore.
func TestSlowerTimeUsCompat(t *testing.T) {
	// A point as the binary before the field wrote it: fields 1-3 only.
	var old []byte
	old = protowire.AppendTag(old, 1, protowire.VarintType)
	old = protowire.AppendVarint(old, 1<<20)
	old = protowire.AppendTag(old, 2, protowire.Fixed64Type)
	old = protowire.AppendFixed64(old, math.Float64bits(50))
	var p ginv1.MeasuredPoint
	if err := proto.Unmarshal(old, &p); err != nil {
		t.Fatal(err)
	}
	if p.GetSlowerTimeUs() != 0 || p.GetTimeUs() != 50 {
		t.Fatalf("old point read as %v", &p)
	}
	m := goodMeasurement()
	m.Points[0] = &p
	if err := CheckMeasurement(m); err != nil {
		t.Fatalf("an old point is refused: %v", err)
	}

	m = goodMeasurement()
	m.Points[1].SlowerTimeUs = 9900
	s := New(nil)
	if _, err := s.PutMeasurement(4, &statev1.PutMeasurement{Measurement: m}); err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	var snap statev1.Snapshot
	if err := proto.Unmarshal(b, &snap); err != nil {
		t.Fatal(err)
	}
	r := New(nil)
	if err := r.Restore(5, &snap); err != nil {
		t.Fatal(err)
	}
	got := r.Measurements()
	if len(got) != 1 || got[0].GetPoints()[1].GetSlowerTimeUs() != 9900 || got[0].GetPoints()[0].GetSlowerTimeUs() != 0 {
		t.Fatalf("restored %v", got)
	}
}
