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
	badCell[len(b)-8-1] = MaxChoices + 1 // the last cell's choice count
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"truncated", b[:len(b)-1], "checksum"},
		{"flipped bit", func() []byte { c := append([]byte(nil), b...); c[20] ^= 1; return c }(), "checksum"},
		{"too short", b[:10], "not a table"},
		{"too long", make([]byte, MaxBytes+1), "not a table"},
		{"bad cell, resealed", reseal(badCell), "truncated"},
		{"magic", reseal(append([]byte("XINT"), b[4:]...)), "not a GIN table"},
		{"version", func() []byte { c := append([]byte(nil), b...); c[4] = 3; return reseal(c) }(), "not a GIN table"},
		{"shape count", func() []byte { c := append([]byte(nil), b...); c[5] = 3; return reseal(c) }(), "truncated"},
		{"shape count low", func() []byte { c := append([]byte(nil), b...); c[5] = 1; return reseal(c) }(), "after the last shape"},
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
	f.Add(encodeV1(p.GetJobId(), p.GetContentHash(), Compile(p)))
	cb, _ := Encode("7", "h", Compile(choicePlan()))
	f.Add(cb)
	f.Fuzz(func(t *testing.T, in []byte) {
		e, err := Decode(in)
		if err != nil {
			return
		}
		if len(e.Table.Shapes) > MaxShapes || len(e.JobID) > maxString {
			t.Fatalf("unbounded table accepted")
		}
		for _, s := range e.Table.Shapes {
			for coll := range NumColls {
				for k := range NumBuckets {
					c := s.Cells[coll][k]
					if c.N > MaxChoices {
						t.Fatalf("%d choices accepted", c.N)
					}
					for _, ch := range c.Choices[:c.N] {
						if !validChoice(ch) {
							t.Fatalf("invalid choice accepted: %+v", ch)
						}
					}
				}
			}
		}
		again, err := Encode(e.JobID, e.Hash, e.Table)
		if err != nil || (in[4] == version && string(again) != string(in)) {
			t.Fatalf("re-encoding differs: %v", err)
		}
	})
}

// choicePlan is the published GB200 case's rule: NVLSTree when NCCL
// offers it (NCCL's own choice), else tree/simple measured on 2.27.3.
func choicePlan() *ginv1.Plan {
	p := &ginv1.Plan{FormatVersion: planread.FormatVersion, JobId: "7", Rules: []*ginv1.PlanRule{
		{Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, NRanks: 12, NNodes: 3, MaxLog2Bytes: planread.MaxLog2Bytes,
			Choices: []*ginv1.PlanChoice{
				{Algorithm: ginv1.Algorithm_ALGORITHM_NVLS_TREE, NcclIfOffered: true, Basis: "nccl"},
				{Algorithm: ginv1.Algorithm_ALGORITHM_TREE, Protocol: ginv1.Protocol_PROTOCOL_SIMPLE, Basis: "measured",
					MinNcclVersion: 22703, MaxNcclVersion: 22703},
			}},
	}}
	p.ContentHash = planread.Hash(p)
	return p
}

// encodeV1 writes a table in version 1's form (one cell per bucket), as
// agents before choices did.
func encodeV1(job, hash string, t *Table) []byte {
	b := append([]byte("GINT"), 1, byte(len(t.Shapes)), 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(job)))
	b = append(b, job...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(hash)))
	b = append(b, hash...)
	for _, s := range t.Shapes {
		b = binary.BigEndian.AppendUint32(b, s.NRanks)
		b = binary.BigEndian.AppendUint32(b, s.NNodes)
		for coll := range NumColls {
			for k := range NumBuckets {
				c := Choice{Algo: -1, Proto: -1}
				if s.Cells[coll][k].N > 0 {
					c = s.Cells[coll][k].Choices[0]
				}
				b = append(b, byte(c.Algo), byte(c.Proto))
				b = binary.BigEndian.AppendUint16(b, uint16(c.Channels))
			}
		}
	}
	return binary.BigEndian.AppendUint64(b, fnv1a(b))
}

// TestDecodeV1: a version 1 table (an agent from before choices) reads as
// one choice per bucket, the same cells Compile makes of a plan without
// choices.
func TestDecodeV1(t *testing.T) {
	p := samplePlan()
	e, err := Decode(encodeV1(p.GetJobId(), p.GetContentHash(), Compile(p)))
	if err != nil {
		t.Fatal(err)
	}
	want := Compile(p)
	for i := range want.Shapes {
		if e.Table.Shapes[i] != want.Shapes[i] {
			t.Fatalf("shape %d differs:\n%+v\n%+v", i, e.Table.Shapes[i].Cells[4][20], want.Shapes[i].Cells[4][20])
		}
	}
}

// TestResolve: the same cell resolves by what NCCL's cost table offers:
// NCCL's own NVLSTree when it is usable, the measured tree when it is
// not, NCCL's choice when neither is; and by the running NCCL version.
func TestResolve(t *testing.T) {
	c := Compile(choicePlan()).Shapes[0].Cells[4][34]
	if c.N != 2 {
		t.Fatalf("%d choices", c.N)
	}
	bit := func(a, p int) Mask { return 1 << (a*MaxProtos + p) }
	ring := bit(1, 0) | bit(1, 1) | bit(1, 2)
	tree := bit(0, 0) | bit(0, 2)
	nvlsTree := bit(5, 2)
	for _, tc := range []struct {
		name    string
		mask    Mask
		numAlgo int
		running uint32
		want    Resolution
	}{
		{"NVLSTree offered", ring | tree | nvlsTree, 7, 22703, Resolution{Index: 0, Algo: -1, Proto: -1}},
		{"NVLS off", ring | tree, 7, 22703, Resolution{Index: 1, Algo: 0, Proto: 2}},
		{"NVLS off, tree/simple disabled", ring | bit(0, 0), 7, 22703, Resolution{Index: -1, Algo: -1, Proto: -1}},
		{"NVLS off, a later 2.27 patch", ring | tree, 7, 22707, Resolution{Index: 1, Algo: 0, Proto: 2}},
		{"NVLS off, NCCL 2.29: version rule", ring | tree, 7, 22907, Resolution{Index: -1, Algo: -1, Proto: -1}},
		{"NVLS off, version unknown", ring | tree, 7, 0, Resolution{Index: 1, Algo: 0, Proto: 2}},
		{"6 algorithms (NCCL 2.22), NVLSTree offered", ring | tree | nvlsTree, 6, 0, Resolution{Index: 0, Algo: -1, Proto: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.Resolve(tc.mask, tc.numAlgo, MaxProtos, tc.running); got != tc.want {
				t.Fatalf("Resolve = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestVersionApplies(t *testing.T) {
	m := Choice{MinVersion: 22703, MaxVersion: 22902}
	for _, tc := range []struct {
		running uint32
		want    bool
	}{{0, true}, {22703, true}, {22700, true}, {22810, true}, {22999, true}, {23003, false}, {22603, false}, {32703, false}} {
		if got := VersionApplies(m, tc.running); got != tc.want {
			t.Errorf("running %d: %v, want %v", tc.running, got, tc.want)
		}
	}
	if !VersionApplies(Choice{}, 23003) {
		t.Error("a choice without measurements is subject to the version rule")
	}
}
