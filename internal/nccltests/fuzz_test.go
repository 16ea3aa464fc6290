package nccltests

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// FuzzParse: any input parses or fails with an error, never panics, and
// what it returns respects the bounds and holds only non-negative finite
// numbers. Seeds: the published logs and testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"xxrjun_smoke_N2_G1.log", "xxrjun_N1_G8.log"} {
		f.Add([]byte(readFixture(f, name)))
	}
	f.Add([]byte(header213 + "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n8 2 float sum -1 1 0 0 0 1 0 0 N/A\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Parse(bytes.NewReader(data))
		if l == nil {
			t.Fatal("nil log")
		}
		var le *LineError
		if errors.As(err, &le) && le.Line < 1 {
			t.Fatalf("line error without a line: %v", err)
		}
		if len(l.Runs) > MaxRuns {
			t.Fatalf("%d runs", len(l.Runs))
		}
		rows := 0
		for _, r := range l.Runs {
			rows += len(r.Rows)
			if len(r.Ranks) > MaxRanks {
				t.Fatalf("%d ranks", len(r.Ranks))
			}
			for _, row := range r.Rows {
				for _, c := range []*Cell{row.OutOfPlace, row.InPlace} {
					if c == nil {
						continue
					}
					for _, v := range []float64{c.TimeUs, c.AlgBW, c.BusBW} {
						if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
							t.Fatalf("bad value %v in %+v", v, *c)
						}
					}
				}
				if row.InPlace == nil {
					t.Fatalf("row without a cell: %+v", row)
				}
			}
			_ = r.Points()
			_ = r.GPUsPerNode()
		}
		if rows > MaxRows {
			t.Fatalf("%d rows", rows)
		}
	})
}
