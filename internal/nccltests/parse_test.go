package nccltests

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func readFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustParse(t *testing.T, text string) *Log {
	t.Helper()
	l, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return l
}

// TestPublishedLogs checks the parser on real published logs (testdata/SOURCES.md).
func TestPublishedLogs(t *testing.T) {
	type first struct {
		bytes        uint64
		oopUs, oopBW float64
		ipBW         float64
		ipWrong      string
	}
	tests := []struct {
		file      string
		tests     []string
		nodes     int
		gpn       int
		rows      int // rows of the first run
		avg       float64
		first     first
		lastBytes uint64
	}{
		{
			file: "xxrjun_N10_G8.log", tests: []string{AllReduce, AllGather, ReduceScatter, AllToAll, SendRecv},
			nodes: 10, gpn: 8, rows: 10, avg: 265.631,
			first:     first{bytes: 33554432, oopUs: 798.52, oopBW: 82.99, ipBW: 77.32, ipWrong: "0"},
			lastBytes: 17179869184,
		},
		{
			file: "xxrjun_N10_G1.log", tests: []string{AllReduce, AllGather, ReduceScatter, AllToAll, SendRecv},
			nodes: 10, gpn: 1, rows: 10, avg: 47.8165,
			first:     first{bytes: 33554432, oopUs: 1405.25, oopBW: 42.98, ipBW: 42.95, ipWrong: "0"},
			lastBytes: 17179869184,
		},
		{
			file: "xxrjun_N10_G2.log", tests: []string{AllReduce, AllGather, ReduceScatter, AllToAll, SendRecv},
			nodes: 10, gpn: 2, rows: 10, avg: 94.3888,
			first:     first{bytes: 33554432, oopUs: 787.43, oopBW: 80.96, ipBW: 83.57, ipWrong: "0"},
			lastBytes: 17179869184,
		},
		{
			file: "xxrjun_N10_G4.log", tests: []string{AllReduce, AllGather, ReduceScatter, AllToAll, SendRecv},
			nodes: 10, gpn: 4, rows: 10, avg: 167.923,
			first:     first{bytes: 33554432, oopUs: 780.92, oopBW: 83.79, ipBW: 90.31, ipWrong: "0"},
			lastBytes: 17179869184,
		},
		{
			file: "xxrjun_N1_G8.log", tests: []string{AllReduce, AllGather, ReduceScatter, AllToAll, SendRecv},
			nodes: 1, gpn: 8, rows: 10, avg: 437.957,
			first:     first{bytes: 33554432, oopUs: 182.87, oopBW: 321.10, ipBW: 321.08, ipWrong: "0"},
			lastBytes: 17179869184,
		},
		{
			file: "xxrjun_smoke_N2_G1.log", tests: []string{AllReduce, SendRecv},
			nodes: 2, gpn: 1, rows: 5, avg: 43.6076,
			first:     first{bytes: 33554432, oopUs: 837.47, oopBW: 40.07, ipBW: 39.49, ipWrong: "0"},
			lastBytes: 536870912,
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			l := mustParse(t, readFixture(t, tc.file))
			var got []string
			for _, r := range l.Runs {
				got = append(got, r.Collective)
			}
			if strings.Join(got, ",") != strings.Join(tc.tests, ",") {
				t.Fatalf("collectives %v, want %v", got, tc.tests)
			}
			r := l.Runs[0]
			if r.NNodes != tc.nodes || r.GPUsPerNode() != tc.gpn || r.NRanks != tc.nodes*tc.gpn {
				t.Errorf("nodes %d, gpus/node %d, ranks %d; want %d, %d", r.NNodes, r.GPUsPerNode(), r.NRanks, tc.nodes, tc.gpn)
			}
			if r.TestsVersion != "2.17.8" || r.NCCLVersion != "2.29.2" {
				t.Errorf("versions %q / %q, want 2.17.8 / 2.29.2 (nccl-library=22902)", r.TestsVersion, r.NCCLVersion)
			}
			if len(r.Rows) != tc.rows {
				t.Fatalf("%d rows, want %d", len(r.Rows), tc.rows)
			}
			if !r.HasAvg || r.AvgBusBW != tc.avg {
				t.Errorf("avg %v (%v), want %v", r.AvgBusBW, r.HasAvg, tc.avg)
			}
			row := r.Rows[0]
			if row.Bytes != tc.first.bytes || row.OutOfPlace.TimeUs != tc.first.oopUs || row.OutOfPlace.BusBW != tc.first.oopBW ||
				row.InPlace.BusBW != tc.first.ipBW || row.InPlace.Wrong != tc.first.ipWrong || row.Type != "double" || row.Op != "sum" || row.Root != -1 {
				t.Errorf("first row %+v oop %+v ip %+v, want %+v", row, *row.OutOfPlace, *row.InPlace, tc.first)
			}
			if last := r.Rows[len(r.Rows)-1]; last.Bytes != tc.lastBytes {
				t.Errorf("last size %d, want %d", last.Bytes, tc.lastBytes)
			}
			// sendrecv's in-place #wrong is N/A (nccl-tests 2.13.1+).
			sr := l.Runs[len(l.Runs)-1]
			if sr.Rows[0].InPlace.Wrong != "N/A" {
				t.Errorf("sendrecv in-place wrong %q, want N/A", sr.Rows[0].InPlace.Wrong)
			}
			if len(r.Env) != 0 || r.Network != "" {
				t.Errorf("env %v network %q from a log without NCCL_DEBUG", r.Env, r.Network)
			}
		})
	}
}

// TestVariants derives the variants users post (nccl-tests-format.md §4)
// from a real log and checks that each parses to the same table.
func TestVariants(t *testing.T) {
	base := readFixture(t, "xxrjun_smoke_N2_G1.log")
	want := mustParse(t, base)
	lines := strings.Split(strings.TrimRight(base, "\n"), "\n")
	mapLines := func(f func(i int, s string) string) string {
		out := make([]string, len(lines))
		for i, s := range lines {
			out[i] = f(i, s)
		}
		return strings.Join(out, "\n") + "\n"
	}
	collapse := regexp.MustCompile(`[ \t]+`)
	tests := []struct {
		name string
		text string
	}{
		{"CRLF", mapLines(func(_ int, s string) string { return s + "\r" })},
		{"OpenMPI tag-output", mapLines(func(_ int, s string) string { return "[1,0]<stdout>:" + s })},
		{"srun -l", mapLines(func(_ int, s string) string { return " 0: " + s })},
		{"rank prefix", mapLines(func(_ int, s string) string { return "[0] " + s })},
		{"collapsed whitespace", mapLines(func(_ int, s string) string { return strings.TrimSpace(collapse.ReplaceAllString(s, " ")) })},
		{"tabs", mapLines(func(_ int, s string) string { return strings.ReplaceAll(s, "    ", "\t") })},
		{"debug lines inside the table", mapLines(func(_ int, s string) string {
			if strings.HasPrefix(strings.TrimSpace(s), "6710") {
				return "cnode3-002:2201134:2201200 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0\n" + s +
					"\n\ncnode3-002:2201134:2201200 [0] transport/net_ib.cc:1000 NCCL WARN NET/IB : something"
			}
			return s
		})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := mustParse(t, tc.text)
			if len(got.Runs) != len(want.Runs) {
				t.Fatalf("%d runs, want %d", len(got.Runs), len(want.Runs))
			}
			for i := range want.Runs {
				g, w := got.Runs[i], want.Runs[i]
				if g.Collective != w.Collective || g.NNodes != w.NNodes || g.NRanks != w.NRanks || len(g.Rows) != len(w.Rows) || g.AvgBusBW != w.AvgBusBW {
					t.Fatalf("run %d: %s nodes %d ranks %d rows %d avg %v; want %s %d %d %d %v", i,
						g.Collective, g.NNodes, g.NRanks, len(g.Rows), g.AvgBusBW, w.Collective, w.NNodes, w.NRanks, len(w.Rows), w.AvgBusBW)
				}
				for j := range w.Rows {
					gr, wr := g.Rows[j], w.Rows[j]
					if gr.Bytes != wr.Bytes || *gr.OutOfPlace != *wr.OutOfPlace || *gr.InPlace != *wr.InPlace {
						t.Fatalf("run %d row %d: %+v %+v, want %+v %+v", i, j, *gr.OutOfPlace, *gr.InPlace, *wr.OutOfPlace, *wr.InPlace)
					}
				}
			}
		})
	}
}

const header213 = `# nThread 1 nGpus 1 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  11 on nodeA device  0 [0x1b] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  12 on nodeA device  1 [0x43] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  13 on nodeB device  0 [0x1b] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  14 on nodeB device  1 [0x43] NVIDIA H100 80GB HBM3
`

// TestFormats covers the formats of other nccl-tests and NCCL versions
// (nccl-tests-format.md §1, §3), written from the format description.
func TestFormats(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		check func(t *testing.T, r Run)
	}{
		{
			name: "v1 table in ms, no # on params",
			text: `nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1 
# NCCL Tests compiled with NCCL 1.3
# Using devices
#   Rank  0 on host1 device  0 [0x06] Tesla P100-SXM2-16GB
#   Rank  1 on host1 device  1 [0x07] Tesla P100-SXM2-16GB

#                                                 out-of-place                    in-place
#      bytes             N    type      op     time  algbw  busbw      res     time  algbw  busbw      res
     1048576        262144   float     sum    0.100  10.49  10.49    0e+00    0.101  10.38  10.38    0e+00
`,
			check: func(t *testing.T, r Run) {
				if !r.TimeInMs || r.Rows[0].OutOfPlace.TimeUs != 100 || r.Rows[0].InPlace.BusBW != 10.38 {
					t.Errorf("v1 row %+v %+v", *r.Rows[0].OutOfPlace, *r.Rows[0].InPlace)
				}
				if r.Collective != AllReduce || r.NRanks != 2 {
					t.Errorf("collective %q from busbw/algbw with %d ranks, want all_reduce", r.Collective, r.NRanks)
				}
			},
		},
		{
			name: "v2.0 error column, alltoall with blank redop, echoed command",
			text: `$ mpirun -np 4 ./build/alltoall_perf -b 8 -e 1M
# nThread 1 nGpus 1 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20 validation: 1 
#
# Using devices
#   Rank  0 Pid  1 on h1 device  0 [0x1b] Tesla V100-SXM2-32GB
#   Rank  1 Pid  2 on h1 device  1 [0x1c] Tesla V100-SXM2-32GB
#
#                                                     out-of-place                       in-place
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        131072   float           30.12   34.81   17.41  0e+00    30.20   34.72   17.36  5e-07
`,
			check: func(t *testing.T, r Run) {
				row := r.Rows[0]
				if r.Collective != AllToAll || row.Type != "float" || row.Op != "" || row.InPlace.Wrong != "5e-07" {
					t.Errorf("%q row %+v ip %+v", r.Collective, row, *row.InPlace)
				}
			},
		},
		{
			name: "in-place only (rccl-tests -O 0), NCCL env and version, IB",
			text: header213 + `NCCL version 2.21.5+cuda12.4
nodeA:11:20 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>
nodeA:11:20 [0] NCCL INFO NCCL_ALGO set by environment to Tree
nodeA:11:20 [0] NCCL INFO NCCL_PROTO set by environment to Simple
nodeA:11:20 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.
nodeA:11:20 [0] NCCL INFO comm 0x55 rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0
#
#                                          in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    40.00   26.21   39.32      0
# Avg bus bandwidth    : 39.32 OK
`,
			check: func(t *testing.T, r Run) {
				row := r.Rows[0]
				if row.OutOfPlace != nil || row.InPlace.TimeUs != 40 || row.InPlace.BusBW != 39.32 {
					t.Errorf("in-place-only row %+v", row)
				}
				if r.Env["NCCL_ALGO"] != "Tree" || r.Env["NCCL_PROTO"] != "Simple" || r.Env["NCCL_NVLS_ENABLE"] != "0" {
					t.Errorf("env %v", r.Env)
				}
				if r.NCCLVersion != "2.21.5" || r.Network != "IB" || r.NNodes != 2 || r.GPUsPerNode() != 2 {
					t.Errorf("version %q network %q nodes %d gpn %d", r.NCCLVersion, r.Network, r.NNodes, r.GPUsPerNode())
				}
				if r.Collective != AllReduce {
					t.Errorf("collective %q", r.Collective)
				}
			},
		},
		{
			name: "-I and -S columns, %g numbers, wide counts",
			text: header213 + `#       size         count      type   redop    root     time   algbw   busbw #wrong   i_min   i_max   i_p99   i_cv%     time   algbw   busbw #wrong   i_min   i_max   i_p99   i_cv%  timestamp
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)    (us)    (us)     (%)    (us)  (GB/s)  (GB/s)            (us)    (us)    (us)     (%)  %Y-%m-%d %H:%M:%S
 17179869184    4294967296     float     sum      -1  1.2e+05  143.17  214.75 1.67772e+07  1.1e+05  1.3e+05  1.3e+05    2.1  1.2e+05  143.20  214.80      0  1.1e+05  1.3e+05  1.3e+05    2.0 2026-01-02 03:04:05
`,
			check: func(t *testing.T, r Run) {
				row := r.Rows[0]
				if row.OutOfPlace.TimeUs != 1.2e5 || row.OutOfPlace.Wrong != "1.67772e+07" || row.InPlace.BusBW != 214.80 {
					t.Errorf("row %+v %+v", *row.OutOfPlace, *row.InPlace)
				}
			},
		},
		{
			name: "TUNING lines (2.20 numeric and 2.24 named), a row split by one",
			text: header213 + `#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
nodeA:11:20 [0] NCCL INFO AllReduce: 262144 Bytes -> Algo 1 proto 2 time 25.2
      262144         65536     float     sum      -1    25.10   10.44   15.67      0nodeA:11:20 [0] NCCL INFO AllReduce: 262144 Bytes -> Algo 1 proto 2 time 25.2
    25.00   10.49   15.73      0
nodeA:11:20 [0] NCCL INFO AllReduce: 524288 Bytes -> Algo TREE proto LL128 channel{Lo..Hi}={0..31}
      524288        131072     float     sum      -1    30.00   17.48   26.21      0    30.10   17.42   26.13      0
`,
			check: func(t *testing.T, r Run) {
				if len(r.Rows) != 2 {
					t.Fatalf("%d rows, want 2", len(r.Rows))
				}
				a, b := r.Rows[0], r.Rows[1]
				if a.OutOfPlace.TimeUs != 25.10 || a.OutOfPlace.Wrong != "N/A" || a.InPlace.TimeUs != 25.00 {
					t.Errorf("split row %+v %+v", *a.OutOfPlace, *a.InPlace)
				}
				if a.Choice == nil || *a.Choice != (Choice{Algo: "Ring", Proto: "Simple"}) || b.Choice == nil || *b.Choice != (Choice{Algo: "Tree", Proto: "LL128"}) {
					t.Errorf("choices %+v %+v", a.Choice, b.Choice)
				}
			},
		},
		{
			name: "truncated by a failure, 2.22+ INFO version line",
			text: header213 + `nodeA:11:20 [0] NCCL INFO NCCL version 2.23.4+cuda12.6
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
     1048576        262144     float     sum      -1    40.00   26.21   39.32      0    40.10   26.15   39.22      0
nodeA: Test NCCL failure common.cu:1005 'remote process exited or there was a network error'
`,
			check: func(t *testing.T, r Run) {
				if len(r.Rows) != 1 || !strings.Contains(r.Failure, "Test NCCL failure") || r.NCCLVersion != "2.23.4" {
					t.Errorf("rows %d failure %q version %q", len(r.Rows), r.Failure, r.NCCLVersion)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := mustParse(t, tc.text)
			if len(l.Runs) != 1 {
				t.Fatalf("%d runs, want 1", len(l.Runs))
			}
			tc.check(t, l.Runs[0])
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name     string
		text     string
		wantLine int
		wantMsg  string
	}{
		{"no table", "hello\nworld\n", 0, "no nccl-tests result table"},
		{"bad number", header213 + "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n" +
			"     1048576        262144     float     sum      -1    40.00   2x.21   39.32      0    40.10   26.15   39.22      0\n", 9, `algbw "2x.21"`},
		{"negative time", header213 + "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n" +
			"     1048576        262144     float     sum      -1   -40.00   26.21   39.32      0    40.10   26.15   39.22      0\n", 9, "time"},
		{"short row", header213 + "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n" +
			"     1048576        262144     float     sum      -1    40.00\n", 9, "fields"},
		{"bad #wrong", header213 + "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n" +
			"     1048576        262144     float     sum      -1    40.00   26.21   39.32   oops    40.10   26.15   39.22      0\n", 9, "#wrong"},
		{"line too long", strings.Repeat("x", MaxLineBytes+10) + "\n", 1, "longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.text))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not say %q", err, tc.wantMsg)
			}
			var le *LineError
			if tc.wantLine > 0 && (!errors.As(err, &le) || le.Line != tc.wantLine) {
				t.Errorf("error %v: want line %d", err, tc.wantLine)
			}
		})
	}
}

func TestPointsKeepsFastestPerSize(t *testing.T) {
	r := Run{Rows: []Row{
		{Bytes: 2048, OutOfPlace: &Cell{TimeUs: 20, BusBW: 1}, InPlace: &Cell{TimeUs: 19, BusBW: 2}},
		{Bytes: 1024, OutOfPlace: &Cell{TimeUs: 10, BusBW: 1}, InPlace: &Cell{TimeUs: 0}},
		{Bytes: 2048, OutOfPlace: &Cell{TimeUs: 18, BusBW: 3}, InPlace: &Cell{TimeUs: 21, BusBW: 0.5}},
	}}
	got := r.Points()
	if len(got) != 2 || got[0].Bytes != 1024 || got[0].TimeUs != 10 || got[1].TimeUs != 18 || got[1].BusBW != 3 {
		t.Errorf("points %+v", got)
	}
	// 1 KiB has one cell (the other's time is 0): no spread known; 2 KiB's
	// slowest of its four cells is 21 µs.
	if len(got) == 2 && (got[0].SlowerTimeUs != 0 || got[1].SlowerTimeUs != 21) {
		t.Errorf("slower cells %v, %v; want 0, 21", got[0].SlowerTimeUs, got[1].SlowerTimeUs)
	}
}

func TestVersionFromCode(t *testing.T) {
	for code, want := range map[string]string{"22902": "2.29.2", "21805": "2.18.5", "2708": "2.7.8", "x": "", "0": ""} {
		if got := versionFromCode(code); got != want {
			t.Errorf("versionFromCode(%s) = %q, want %q", code, got, want)
		}
	}
}

func TestBounds(t *testing.T) {
	var b strings.Builder
	b.WriteString(header213)
	b.WriteString("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n")
	for range MaxRows + 1 {
		b.WriteString("8 2 float sum -1 1.0 0.0 0.0 0 1.0 0.0 0.0 0\n")
	}
	_, err := Parse(strings.NewReader(b.String()))
	if err == nil || !strings.Contains(err.Error(), "table rows") {
		t.Fatalf("err %v, want the row bound", err)
	}
}
