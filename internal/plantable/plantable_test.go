package plantable

import (
	"encoding/binary"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/planread"
)

func samplePlan() *ginv1.Plan {
	p := &ginv1.Plan{FormatVersion: planread.FormatVersion, JobId: "42", Rules: []*ginv1.PlanRule{
		{Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, NRanks: 16, NNodes: 2, MaxLog2Bytes: 19},
		{Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, NRanks: 16, NNodes: 2, MinLog2Bytes: 20, MaxLog2Bytes: planread.MaxLog2Bytes,
			Algorithm: ginv1.Algorithm_ALGORITHM_RING, Protocol: ginv1.Protocol_PROTOCOL_SIMPLE, Channels: 8},
		{Collective: ginv1.Collective_COLLECTIVE_ALL_GATHER, NRanks: 8, NNodes: 1, MaxLog2Bytes: planread.MaxLog2Bytes,
			Algorithm: ginv1.Algorithm_ALGORITHM_NVLS, Protocol: ginv1.Protocol_PROTOCOL_SIMPLE},
	}}
	p.ContentHash = planread.Hash(p)
	return p
}

func TestCompileIsLookup(t *testing.T) {
	p := samplePlan()
	tb := Compile(p)
	if len(tb.Shapes) != 2 || tb.Dropped != 0 {
		t.Fatalf("%d shapes, %d dropped", len(tb.Shapes), tb.Dropped)
	}
	for _, s := range tb.Shapes {
		for coll := range NumColls {
			for b := range NumBuckets {
				if got, want := s.Cells[coll][b], Decide(p, coll, s.NRanks, s.NNodes, uint64(1)<<b); got != want {
					t.Fatalf("shape %d/%d coll %d bucket %d: %+v, Lookup %+v", s.NRanks, s.NNodes, coll, b, got, want)
				}
			}
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	p := samplePlan()
	b, err := Encode(p.GetJobId(), p.GetContentHash(), Compile(p))
	if err != nil {
		t.Fatal(err)
	}
	e, err := Decode(b)
	if err != nil || e.JobID != "42" || e.Hash != p.GetContentHash() || len(e.Table.Shapes) != 2 || e.Table.Shapes[1] != Compile(p).Shapes[1] {
		t.Fatalf("Decode = %+v, %v", e, err)
	}
	reseal := func(b []byte) []byte {
		b = append([]byte(nil), b[:len(b)-8]...)
		return binary.BigEndian.AppendUint64(b, fnv1a(b))
	}
	badCell := append([]byte(nil), b...)
	badCell[len(b)-8-4] = 9 // the last cell's algorithm
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"truncated", b[:len(b)-1], "checksum"},
		{"flipped bit", func() []byte { c := append([]byte(nil), b...); c[20] ^= 1; return c }(), "checksum"},
		{"too short", b[:10], "not a table"},
		{"too long", make([]byte, MaxBytes+1), "not a table"},
		{"bad cell, resealed", reseal(badCell), "out of range"},
		{"magic", reseal(append([]byte("XINT"), b[4:]...)), "not a GIN table"},
		{"shape count", func() []byte { c := append([]byte(nil), b...); c[5] = 3; return reseal(c) }(), "bytes of shapes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Decode(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := Encode(strings.Repeat("j", 129), "", &Table{}); err == nil {
		t.Fatal("encoded an over-long job id")
	}
}

// FuzzDecode: any bytes give a table within bounds or an error.
func FuzzDecode(f *testing.F) {
	p := samplePlan()
	b, _ := Encode(p.GetJobId(), p.GetContentHash(), Compile(p))
	f.Add(b)
	f.Add(b[:40])
	f.Fuzz(func(t *testing.T, in []byte) {
		e, err := Decode(in)
		if err != nil {
			return
		}
		if len(e.Table.Shapes) > MaxShapes || len(e.JobID) > maxString {
			t.Fatalf("unbounded table accepted")
		}
		again, err := Encode(e.JobID, e.Hash, e.Table)
		if err != nil || string(again) != string(in) {
			t.Fatalf("re-encoding differs: %v", err)
		}
	})
}
