package main

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/tunercsvin"
)

const tunerExample = "../../examples/nccl-tuner/measurements.csv"

const tunerHeader = "collective,size_bytes,algorithm,protocol,channels,nodes,ranks,pipeOps,regBuff,cost_metric,bandwidth_gbps,latency_us\n"

func parseTuner(t *testing.T, s string) *tunercsvin.File {
	t.Helper()
	f, err := tunercsvin.Parse(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func readTunerExample(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(tunerExample)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// scaleTunerRows is a tuner CSV with the latency of the rows of one
// collective, algorithm/protocol and size multiplied by factor (and their
// bandwidth divided by it).
func scaleTunerRows(t *testing.T, csv, coll, cell string, size uint64, factor float64) string {
	t.Helper()
	lines := strings.Split(csv, "\n")
	n := 0
	for i, l := range lines {
		f := strings.Split(l, ",")
		if len(f) != 12 || f[0] != coll || f[1] != strconv.FormatUint(size, 10) || f[2]+"/"+f[3] != cell {
			continue
		}
		lat, err1 := strconv.ParseFloat(f[11], 64)
		bw, err2 := strconv.ParseFloat(f[10], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("line %d: %q", i+1, l)
		}
		f[11], f[10] = fmt.Sprintf("%.2f", lat*factor), fmt.Sprintf("%.2f", bw/factor)
		lines[i] = strings.Join(f, ",")
		n++
	}
	if n == 0 {
		t.Fatalf("no row of %s %s at %d", coll, cell, size)
	}
	return strings.Join(lines, "\n")
}

func TestTunerRequests(t *testing.T) {
	two := []string{"node001", "node002"}
	tests := []struct {
		name   string
		in     string
		names  []string
		gpn    int
		groups int
		diffs  int
		notes  int
		err    string
		check  func(t *testing.T, gs []tunerGroup)
	}{
		{name: "the example: one measurement per collective and cell", in: readTunerExample(t), names: two, groups: 6,
			check: func(t *testing.T, gs []tunerGroup) {
				for _, g := range gs {
					r := g.req
					if r.GetGpusPerNode() != 8 || r.GetForcedBy() != "log" || r.GetNcclVersion() != "2.21.5" || r.GetAlgorithm() == 0 || r.GetProtocol() == 0 ||
						!strings.HasPrefix(r.GetSource(), "tuner-csv:measurements.csv:") || len(r.GetPoints()) != 8 || g.ranksOnNode != 8 {
						t.Errorf("line %d: %v", g.line, r)
					}
					for i, p := range r.GetPoints() {
						if i > 0 && p.GetBytes() <= r.GetPoints()[i-1].GetBytes() {
							t.Errorf("line %d: sizes not ascending", g.line)
						}
					}
				}
				// all_reduce on 16 ranks: busbw = size / time × 2 × 15/16.
				p := gs[0].req.GetPoints()[7]
				if want := float64(p.GetBytes()) / p.GetTimeUs() / 1000 * 2 * 15 / 16; math.Abs(p.GetBusBwGbps()-want) > 1e-9 {
					t.Errorf("busbw %v, want %v", p.GetBusBwGbps(), want)
				}
				if gs[5].req.GetCollective() != ginv1.Collective_COLLECTIVE_ALL_GATHER {
					t.Errorf("last group %v", gs[5].req.GetCollective())
				}
			}},
		{name: "nodes and ranks -1: --nodes and --gpus-per-node", in: tunerHeader + "allreduce,1024,ring,simple,-1,-1,-1,-1,-1,0,0,20\n", names: two, gpn: 4, groups: 1,
			check: func(t *testing.T, gs []tunerGroup) {
				if gs[0].req.GetGpusPerNode() != 4 {
					t.Errorf("%v", gs[0].req)
				}
			}},
		{name: "ranks -1 without --gpus-per-node", in: tunerHeader + "allreduce,1024,ring,simple,-1,2,-1,-1,-1,0,0,20\n", names: two,
			err: "line 2: all_reduce ring/simple: the rows say ranks -1 (any): give --gpus-per-node"},
		{name: "ranks not a multiple of nodes", in: tunerHeader + "allreduce,1024,ring,simple,-1,2,15,-1,-1,0,0,20\n", names: two,
			err: "15 ranks on 2 node(s) is no whole number of GPUs per node"},
		{name: "other node count", in: tunerHeader + "allreduce,1024,ring,simple,-1,4,32,-1,-1,0,0,20\n", names: two, groups: 1, diffs: 1,
			check: func(t *testing.T, gs []tunerGroup) {
				if d := gs[0].diffs[0]; d != "line 2: all_reduce ring/simple ran on 4 node(s), --nodes names 2" || gs[0].req.GetGpusPerNode() != 8 {
					t.Errorf("%q %v", d, gs[0].req)
				}
			}},
		{name: "other rank count", in: tunerHeader + "allreduce,1024,ring,simple,-1,2,16,-1,-1,0,0,20\n", names: two, gpn: 4, groups: 1, diffs: 1,
			check: func(t *testing.T, gs []tunerGroup) {
				if d := gs[0].diffs[0]; d != "line 2: all_reduce ring/simple ran 16 ranks, but 2 node(s) × 4 GPUs is 8" {
					t.Errorf("%q", d)
				}
			}},
		{name: "two groups stored as one", in: tunerHeader + "allreduce,1024,ring,simple,-1,2,16,-1,-1,0,0,20\nallreduce,2048,ring,simple,-1,-1,-1,-1,-1,0,0,20\n",
			names: two, gpn: 8, err: "line 3: all_reduce ring/simple: its rows (nodes -1, ranks -1) would be stored as the same measurement as those of line 2"},
		{name: "a size measured twice", in: tunerHeader +
			"allreduce,1024,ring,simple,4,2,16,-1,-1,0,0,20\n" +
			"allreduce,1024,ring,simple,4,2,16,-1,-1,0,0,18\n" +
			"allreduce,1024,ring,simple,8,2,16,-1,-1,0,0,30\n" +
			"allreduce,1024,ring,simple,4,2,16,-1,-1,0,0,25\n", names: two, groups: 1, notes: 1,
			check: func(t *testing.T, gs []tunerGroup) {
				pts := gs[0].req.GetPoints()
				if len(pts) != 1 || pts[0].GetTimeUs() != 18 || pts[0].GetSlowerTimeUs() != 25 {
					t.Errorf("%v", pts)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gs, notes, err := tunerRequests(parseTuner(t, tc.in), tc.names, strings.Join(tc.names, ","), tc.gpn, "2.21.5", "dir/measurements.csv")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			diffs := 0
			for _, g := range gs {
				diffs += len(g.diffs)
			}
			if len(gs) != tc.groups || diffs != tc.diffs || len(notes) != tc.notes {
				t.Fatalf("%d groups, %d differences, %d notes (%v); want %d, %d, %d", len(gs), diffs, len(notes), notes, tc.groups, tc.diffs, tc.notes)
			}
			if tc.check != nil {
				tc.check(t, gs)
			}
		})
	}
}

// TestCalibrateTunerCSV imports tuner CSVs on the dev cluster (the example
// as NCCL 2.21.5; the same with one size 40% slower and one 20% faster
// as 2.23.4, which warns) and compares the two releases.
func TestCalibrateTunerCSV(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dev cluster")
	}
	cl := startDev(t)
	addr := cl.Master.Addr()
	example := readTunerExample(t)
	// 2.23.4: nvls_tree/simple all_reduce at 256 MiB 40% slower, ring/simple
	// at 1 GiB 20% faster; ring/simple is B's fastest forced cell at 256 MiB.
	upgraded := scaleTunerRows(t, scaleTunerRows(t, example, "allreduce", "nvls_tree/simple", 256<<20, 1.4), "allreduce", "ring/simple", 1<<30, 0.8)
	// Rows of 4 nodes: refused on two, or stored flagged with --force (as
	// another release, so as not to replace the example's ring/simple).
	other := tunerHeader + "allreduce,1024,ring,simple,-1,4,32,-1,-1,0,0,40\nallreduce,1048576,ring,simple,-1,4,32,-1,-1,0,0,100\n"
	cases := []struct {
		ctlCase
		code int
	}{
		{ctlCase{"tunercsv-import", []string{"calibrate", "import", "--tuner-csv", tunerExample, "--nodes", "node[001-002]", "--nccl-version", "2.21.5"}, ""}, 0},
		{ctlCase{"tunercsv-import-json", []string{"calibrate", "import", "--tuner-csv", "-", "--nodes", "node[001-002]", "--nccl-version", "2.21.5", "-o", "json"},
			tunerHeader + "broadcast,1048576,ring,simple,-1,2,16,-1,-1,0,0,40.5\n"}, 0},
		{ctlCase{"tunercsv-import-other-nodes", []string{"calibrate", "import", "--tuner-csv", "-", "--nodes", "node[001-002]", "--nccl-version", "2.21.5"}, other}, exitErr},
		{ctlCase{"tunercsv-import-force", []string{"calibrate", "import", "--tuner-csv", "-", "--nodes", "node[003-004]", "--nccl-version", "2.19.3", "--force"}, other}, 0},
		{ctlCase{"tunercsv-import-too-many-gpus", []string{"calibrate", "import", "--tuner-csv", "-", "--nodes", "node[001-002]", "--gpus-per-node", "16"},
			tunerHeader + "allreduce,1024,ring,simple,-1,2,32,-1,-1,0,0,20\n"}, exitErr},
		{ctlCase{"tunercsv-import-bad", []string{"calibrate", "import", "--tuner-csv", "-", "--nodes", "node[001-002]"},
			tunerHeader + "allreduce,1024,ring,simple,-1,2,16,-1,-1,0,0,20\nalltoall,1024,ring,simple,-1,2,16,-1,-1,0,0,20\nallreduce,2048,auto,simple,-1,2,16,-1,-1,0,0,20\n"}, exitErr},
		{ctlCase{"tunercsv-import-algo", []string{"calibrate", "import", "--tuner-csv", "-", "--nodes", "node[001-002]", "--algo", "ring"}, ""}, exitUsage},
		{ctlCase{"tunercsv-import-no-version", []string{"calibrate", "import", "--tuner-csv", "-", "--nodes", "node[003-004]"},
			"# no header: the documented order\nreduce,4096,ring,ll,-1,2,16,-1,-1,0,0,12.5\n"}, 0},
		{ctlCase{"tunercsv-import-upgraded", []string{"calibrate", "import", "--tuner-csv", "-", "--nodes", "node[001-002]", "--nccl-version", "2.23.4"}, upgraded}, 0},
		{ctlCase{"compare", []string{"calibrate", "compare", "--nccl-version", "2.21.5", "--nccl-version", "2.23.4"}, ""}, exitErr},
		{ctlCase{"compare-json", []string{"calibrate", "compare", "--nccl-version", "2.21.5", "--nccl-version", "2.23.4", "-o", "json"}, ""}, exitErr},
		{ctlCase{"compare-nodes-exit-zero", []string{"calibrate", "compare", "--nccl-version", "2.21.5", "--nccl-version", "2.23.4", "--nodes", "node[001-002]", "--exit-zero"}, ""}, 0},
		{ctlCase{"compare-threshold", []string{"calibrate", "compare", "--nccl-version", "2.21.5", "--nccl-version", "2.23.4", "--threshold", "50"}, ""}, 0},
		{ctlCase{"compare-other-shape", []string{"calibrate", "compare", "--nccl-version", "2.21.5", "--nccl-version", "2.23.4", "--nodes", "node[001-002]", "--gpus-per-node", "4"}, ""}, exitErr},
		{ctlCase{"compare-unknown-version", []string{"calibrate", "compare", "--nccl-version", "2.21.5", "--nccl-version", "2.99.0"}, ""}, exitErr},
		{ctlCase{"compare-one-version", []string{"calibrate", "compare", "--nccl-version", "2.21.5"}, ""}, exitUsage},
	}
	results := map[string]ctlResult{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := check(t, addr, tc.ctlCase)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d: %s", r.code, tc.code, r.stderr)
			}
			results[tc.name] = r
		})
	}
	// What the goldens show, said as the sentinel's contract.
	imp := results["tunercsv-import-upgraded"]
	if !strings.Contains(imp.stderr, "warning: all_reduce nvls_tree/simple on NCCL 2.23.4 is 10% or more slower than on NCCL 2.21.5 at 1 of 8 size(s), worst +40% at 256 MiB") ||
		strings.Count(imp.stderr, "warning:") != 1 {
		t.Errorf("the upgraded import does not warn of the one regressed cell:\n%s", imp.stderr)
	}
	cmpOut := results["compare"].stdout
	var rows []string
	for _, l := range strings.Split(cmpOut, "\n") {
		if strings.HasPrefix(l, "1 ") {
			rows = append(rows, l)
		}
	}
	if len(rows) != 1 || !strings.Contains(rows[0], "all_reduce") || !strings.Contains(rows[0], "256MiB") || !strings.Contains(rows[0], "+40%") ||
		!strings.Contains(rows[0], "nvls_tree/simple") || !strings.Contains(rows[0], "ring/simple:") {
		t.Errorf("compare names not exactly the 256 MiB regression with ring/simple to force:\n%s", cmpOut)
	}
	if strings.Contains(cmpOut, "1GiB") {
		t.Errorf("compare names the improved size:\n%s", cmpOut)
	}
}
