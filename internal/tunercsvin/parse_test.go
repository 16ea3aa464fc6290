package tunercsvin

import (
	"errors"
	"os"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

const header = "collective,size_bytes,algorithm,protocol,channels,nodes,ranks,pipeOps,regBuff,cost_metric,bandwidth_gbps,latency_us\n"

func TestParseGood(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		rows       int
		headerLine int
		check      func(t *testing.T, f *File)
	}{
		{name: "documented header", in: header +
			"allreduce,1024,ring,ll,8,2,16,-1,0,0.0141,0.14,14.05\n" +
			"allreduce,1048576,nvls_tree,simple,-1,2,16,-1,-1,0.1,28.3,69.5\n",
			rows: 2, headerLine: 1,
			check: func(t *testing.T, f *File) {
				r := f.Rows[0]
				want := Row{Line: 2, Collective: ginv1.Collective_COLLECTIVE_ALL_REDUCE, Bytes: 1024, Algorithm: ginv1.Algorithm_ALGORITHM_RING,
					Protocol: ginv1.Protocol_PROTOCOL_LL, Channels: 8, Nodes: 2, Ranks: 16, PipeOps: -1, RegBuff: 0, CostMetric: 0.0141, BandwidthGBps: 0.14, LatencyUs: 14.05}
				if r != want {
					t.Errorf("row 0: %+v\nwant  %+v", r, want)
				}
				if f.Rows[1].Algorithm != ginv1.Algorithm_ALGORITHM_NVLS_TREE || f.Rows[1].Channels != -1 || f.Rows[1].RegBuff != -1 {
					t.Errorf("row 1: %+v", f.Rows[1])
				}
			}},
		{name: "no header: the documented order", in: "broadcast,4096,tree,ll128,2,1,8,-1,-1,0.15,45.2,12.5\n", rows: 1,
			check: func(t *testing.T, f *File) {
				if r := f.Rows[0]; r.Collective != ginv1.Collective_COLLECTIVE_BROADCAST || r.Protocol != ginv1.Protocol_PROTOCOL_LL128 || r.LatencyUs != 12.5 {
					t.Errorf("%+v", r)
				}
			}},
		{name: "columns by name, optional ones left out, unknown ones ignored", in: "# measured on 2 x 8\n\n" +
			"latency_us,ranks,nodes,note,protocol,algorithm,size_bytes,collective\n" +
			"100.5,16,2,first try,Simple,Ring,65536,AllReduce\n", rows: 1, headerLine: 3,
			check: func(t *testing.T, f *File) {
				r := f.Rows[0]
				if r.Line != 4 || r.Bytes != 65536 || r.Algorithm != ginv1.Algorithm_ALGORITHM_RING || r.Protocol != ginv1.Protocol_PROTOCOL_SIMPLE ||
					r.Channels != -1 || r.PipeOps != -1 || r.BandwidthGBps != 0 || r.LatencyUs != 100.5 {
					t.Errorf("%+v", r)
				}
			}},
		{name: "BOM, CRLF, quotes, spaces, other spellings", in: "\ufeff" + strings.ReplaceAll(header, "\n", "\r\n") +
			`"all_gather", 2048 ,"nvlstree",LL,-1,-1,-1,-1,-1,,,7.5` + "\r\n", rows: 1, headerLine: 1,
			check: func(t *testing.T, f *File) {
				r := f.Rows[0]
				if r.Collective != ginv1.Collective_COLLECTIVE_ALL_GATHER || r.Bytes != 2048 || r.Algorithm != ginv1.Algorithm_ALGORITHM_NVLS_TREE ||
					r.Nodes != -1 || r.Ranks != -1 || r.CostMetric != 0 {
					t.Errorf("%+v", r)
				}
			}},
		{name: "a second header (concatenated files)", in: header + "reduce,8,ring,simple,1,1,8,1,1,1,1,5\n" +
			"latency_us,collective,size_bytes,algorithm,protocol,nodes,ranks\n9,reducescatter,16,pat,simple,2,2\n", rows: 2, headerLine: 1,
			check: func(t *testing.T, f *File) {
				if r := f.Rows[1]; r.Collective != ginv1.Collective_COLLECTIVE_REDUCE_SCATTER || r.Algorithm != ginv1.Algorithm_ALGORITHM_PAT || r.LatencyUs != 9 {
					t.Errorf("%+v", r)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Rows) != tc.rows || f.HeaderLine != tc.headerLine {
				t.Fatalf("%d rows, header line %d; want %d, %d", len(f.Rows), f.HeaderLine, tc.rows, tc.headerLine)
			}
			tc.check(t, f)
		})
	}
}

func TestParseRefuses(t *testing.T) {
	row := "allreduce,1024,ring,ll,8,2,16,-1,0,0.0141,0.14,14.05"
	with := func(i int, v string) string {
		f := strings.Split(row, ",")
		f[i] = v
		return header + strings.Join(f, ",") + "\n"
	}
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "no measurement row"},
		{"only comments and a header", "# nothing\n" + header, "no measurement row"},
		{"header without latency", "collective,size_bytes,algorithm,protocol,nodes,ranks,bandwidth_gbps\n", "line 1: header: no column latency_us"},
		{"header twice the same column", "collective,size_bytes,algorithm,protocol,nodes,ranks,latency_us,nodes\n", "line 1: header: column nodes twice"},
		{"too few fields", header + "allreduce,1024,ring,ll,8,2,16\n", "line 2: 7 fields, the header names 12"},
		{"too few fields, no header", "allreduce,1024,ring\n", "line 1: 3 fields, the documented columns are 12"},
		{"unknown collective", with(0, "alltoall"), `line 2: collective "alltoall": want one of`},
		{"size zero", with(1, "0"), `line 2: size_bytes "0"`},
		{"size not a number", with(1, "1K"), `line 2: size_bytes "1K"`},
		{"size too large", with(1, "2251799813685249"), `line 2: size_bytes`},
		{"unknown algorithm", with(2, "auto"), `line 2: algorithm "auto"`},
		{"default algorithm", with(2, "-1"), `line 2: algorithm "-1"`},
		{"unknown protocol", with(3, "ll64"), `line 2: protocol "ll64"`},
		{"channels negative", with(4, "-2"), `line 2: channels "-2"`},
		{"nodes zero", with(5, "0"), `line 2: nodes "0"`},
		{"nodes empty", with(5, ""), `line 2: nodes ""`},
		{"ranks not a number", with(6, "16.0"), `line 2: ranks "16.0"`},
		{"fewer ranks than nodes", with(6, "1"), "line 2: 1 ranks on 2 nodes"},
		{"regBuff 2", with(8, "2"), `line 2: regBuff "2"`},
		{"bandwidth NaN", with(10, "NaN"), `line 2: bandwidth_gbps "NaN": not a finite number`},
		{"bandwidth negative", with(10, "-3"), `line 2: bandwidth_gbps "-3": a bandwidth is not negative`},
		{"latency zero", with(11, "0"), `line 2: latency_us "0": a measured time must be above 0`},
		{"latency empty", with(11, ""), `line 2: latency_us "": not a finite number`},
		{"latency infinite", with(11, "inf"), `line 2: latency_us "inf": not a finite number`},
		{"bad quotes", with(0, `"allreduce`), `line 2: field 1: "\"allreduce": a quoted field`},
		{"long field", with(0, strings.Repeat("a", MaxFieldBytes+1)), "line 2: field 1: 65 bytes, more than 64"},
		{"too many fields", header + strings.Repeat("x,", MaxColumns) + "x\n", "line 2: 65 fields, more than 64"},
		{"long line", header + strings.Repeat(" ", MaxLineBytes+1) + "\n", "line 2: line longer than 4096 bytes"},
		{"second error named too", with(2, "auto") + "allreduce,1024,ring,ll,8,2,16,-1,0,0.0141,0.14,-1\n", "line 3: latency_us"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestParseBounds: a file over MaxFileBytes, and over MaxRows, is refused
// naming the line where it went over; more than maxErrors bad lines are
// counted, not listed.
func TestParseBounds(t *testing.T) {
	row := "allreduce,1024,ring,ll,8,2,16,-1,0,0.0141,0.14,14.05\n"
	var b strings.Builder
	b.WriteString(header)
	for range MaxRows + 1 {
		b.WriteString(row)
	}
	_, err := Parse(strings.NewReader(b.String()))
	var le *LineError
	if !errors.As(err, &le) || le.Line != MaxRows+2 || !strings.Contains(err.Error(), "more than 100000 rows") {
		t.Errorf("rows: %v", err)
	}
	big := header + strings.Repeat("# "+strings.Repeat("x", 1000)+"\n", MaxFileBytes/1000+1)
	if _, err := Parse(strings.NewReader(big)); err == nil || !strings.Contains(err.Error(), "larger than 16 MiB") {
		t.Errorf("size: %v", err)
	}
	bad := header + strings.Repeat("allreduce,x,ring,ll,8,2,16,-1,0,0,0,1\n", maxErrors+5)
	_, err = Parse(strings.NewReader(bad))
	if err == nil || !strings.Contains(err.Error(), "and 5 more line errors") || strings.Count(err.Error(), "size_bytes") != maxErrors {
		t.Errorf("errors: %v", err)
	}
}

// TestParseSample reads the committed sample (testdata/sample.csv, the
// fuzz seed too).
func TestParseSample(t *testing.T) {
	b, err := os.ReadFile("testdata/sample.csv")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Rows) == 0 || f.HeaderLine == 0 {
		t.Fatalf("%d rows, header line %d", len(f.Rows), f.HeaderLine)
	}
}
