package tunercsvin

import (
	"bytes"
	"errors"
	"math"
	"os"
	"testing"
)

// FuzzParse: any input parses or fails with an error, never panics; every
// line error names a line; what it returns respects the bounds and holds
// only valid values. Seeds: testdata/sample.csv and testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	b, err := os.ReadFile("testdata/sample.csv")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(bytes.NewReader(data))
		if file == nil {
			t.Fatal("nil file")
		}
		var le *LineError
		if errors.As(err, &le) && le.Line < 1 {
			t.Fatalf("line error without a line: %v", err)
		}
		if err == nil && len(file.Rows) == 0 {
			t.Fatal("no rows and no error")
		}
		if len(file.Rows) > MaxRows {
			t.Fatalf("%d rows", len(file.Rows))
		}
		last := 0
		for _, r := range file.Rows {
			if r.Line <= last || r.Line <= file.HeaderLine && file.HeaderLine > 0 {
				t.Fatalf("row line %d after %d (header %d)", r.Line, last, file.HeaderLine)
			}
			last = r.Line
			if r.Collective == 0 || r.Algorithm == 0 || r.Protocol == 0 || r.Bytes == 0 || r.Bytes > MaxSize {
				t.Fatalf("bad row %+v", r)
			}
			if !(r.LatencyUs > 0) || math.IsInf(r.LatencyUs, 0) || r.BandwidthGBps < 0 || math.IsNaN(r.BandwidthGBps) || math.IsInf(r.BandwidthGBps, 0) ||
				math.IsNaN(r.CostMetric) || math.IsInf(r.CostMetric, 0) {
				t.Fatalf("bad metrics %+v", r)
			}
			for _, v := range []int{r.Channels, r.Nodes, r.Ranks, r.PipeOps, r.RegBuff} {
				if v < -1 {
					t.Fatalf("bad count %+v", r)
				}
			}
			if r.Nodes == 0 || r.Ranks == 0 || r.Nodes > MaxNodes || r.Ranks > MaxRanks || (r.Nodes > 0 && r.Ranks > 0 && r.Ranks < r.Nodes) {
				t.Fatalf("bad nodes/ranks %+v", r)
			}
		}
	})
}
