package calib

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/costmodel"
	"github.com/gin-topology/gin/internal/nccltests"
)

var updateDoc = flag.Bool("update-doc", false, "rewrite this package's generated blocks of docs/CALIBRATION.md")

const calibrationDoc = "../../docs/CALIBRATION.md"

// heldOutLogs are the published logs the held-out tests import: every
// nccl-tests log in internal/nccltests/testdata (TestHeldOutLogsAreEveryFixture),
// with the model shape of each (docs/CALIBRATION.md: DGX-H100-like nodes;
// the NICs of the multi-node logs are assumed 400 Gb/s, the logs do not say).
var heldOutLogs = []struct {
	file  string
	shape costmodel.Shape
}{
	{"xxrjun_N1_G8.log", costmodel.Shape{NRanks: 8, NNodes: 1, CompCap: 90, IntraNVLink: true, IntraGBps: 450, NVSwitch: true}},
	{"xxrjun_N1_G4.log", costmodel.Shape{NRanks: 4, NNodes: 1, CompCap: 90, IntraNVLink: true, IntraGBps: 450, NVSwitch: true}},
	{"xxrjun_N10_G8.log", costmodel.Shape{NRanks: 80, NNodes: 10, CompCap: 90, IntraNVLink: true, IntraGBps: 450, NVSwitch: true,
		NICsPerNode: 8, NICGbps: 400, InterHops: 1, Oversubscription: 1}},
	{"xxrjun_N10_G1.log", tenNodes(1)},
	{"xxrjun_N10_G2.log", tenNodes(2)},
	{"xxrjun_N10_G4.log", tenNodes(4)},
	{"xxrjun_smoke_N2_G1.log", costmodel.Shape{NRanks: 2, NNodes: 2, CompCap: 90, IntraNVLink: true, IntraGBps: 450, NVSwitch: true,
		NICsPerNode: 1, NICGbps: 400, InterHops: 1, Oversubscription: 1}},
}

// tenNodes is the shape of the 10-node logs with g GPUs per node: each
// GPU's own 400 Gb/s NIC (the logs' peak busbw is 48.7, 98.3 and 196.7
// GB/s with 1, 2 and 4 GPUs per node: one NIC each).
func tenNodes(g int) costmodel.Shape {
	return costmodel.Shape{NRanks: 10 * g, NNodes: 10, CompCap: 90, IntraNVLink: true, IntraGBps: 450, NVSwitch: true,
		NICsPerNode: g, NICGbps: 400, InterHops: 1, Oversubscription: 1}
}

// TestHeldOutLogsAreEveryFixture keeps the held-out set a rule rather than
// a choice: every published log the repository keeps is evaluated, so a
// log cannot be left out after its results are seen.
func TestHeldOutLogsAreEveryFixture(t *testing.T) {
	files, err := filepath.Glob("../nccltests/testdata/*.log")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, lg := range heldOutLogs {
		listed[lg.file] = true
	}
	for _, f := range files {
		if !listed[filepath.Base(f)] {
			t.Errorf("%s is not in heldOutLogs: give it its shape there", f)
		}
	}
	if len(files) != len(heldOutLogs) {
		t.Errorf("%d fixture logs, %d held-out logs", len(files), len(heldOutLogs))
	}
}

// sizeCols is one size of a published table with both of its columns:
// out-of-place and in-place are the same collective on the same bytes,
// run one after the other, so the two are two samples of one time and
// their difference is the least run-to-run spread of that size.
type sizeCols struct {
	bytes   uint64
	oop, ip float64 // µs; 0 where the log has no such column
}

// faster is the column the import keeps (Points: the faster cell).
func (c sizeCols) faster() float64 {
	switch {
	case c.oop <= 0:
		return c.ip
	case c.ip <= 0:
		return c.oop
	}
	return min(c.oop, c.ip)
}

// band is the interval the two columns span.
func (c sizeCols) band() (lo, hi float64) {
	lo, hi = c.faster(), max(c.oop, c.ip)
	return lo, hi
}

// spread is how much the slower column is above the faster one.
func (c sizeCols) spread() float64 {
	lo, hi := c.band()
	return hi/lo - 1
}

// busbwErr is the relative error of the busbw a predicted time implies
// against the busbw of a measured time (busbw ∝ bytes / time): positive
// when the prediction is faster than measured.
func busbwErr(predUs, measUs float64) float64 { return measUs/predUs - 1 }

// beyondBand is busbwErr against the nearer column when the prediction
// lies outside the two, 0 when it lies between them: the error left once
// the measurement's own spread is taken as its error bar.
func (c sizeCols) beyondBand(predUs float64) float64 {
	lo, hi := c.band()
	switch {
	case predUs < lo:
		return busbwErr(predUs, lo)
	case predUs > hi:
		return busbwErr(predUs, hi)
	}
	return 0
}

// heldOutSplit is one run of a held-out log: every other size imported
// (train, as ginctl calibrate import stores it: the faster column), the
// sizes between held out. The split is fixed: the 1st, 3rd, … size of each
// table imported, the 2nd, 4th, … held out.
type heldOutSplit struct {
	file       string
	collective string
	shape      costmodel.Shape
	train      *ginv1.Measurement
	trainCols  []sizeCols
	held       []sizeCols
}

func heldOutSplits(t *testing.T) []heldOutSplit {
	t.Helper()
	var out []heldOutSplit
	for _, lg := range heldOutLogs {
		f, err := os.Open("../nccltests/testdata/" + lg.file)
		if err != nil {
			t.Fatal(err)
		}
		l, err := nccltests.Parse(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for i := range l.Runs {
			r := &l.Runs[i]
			coll, ok := Collective(r.Collective)
			if !ok {
				continue
			}
			pts, err := Points(r)
			if err != nil {
				t.Fatal(err)
			}
			cols := map[uint64]sizeCols{}
			for _, row := range r.Rows {
				c := sizeCols{bytes: row.Bytes}
				if row.OutOfPlace != nil {
					c.oop = row.OutOfPlace.TimeUs
				}
				if row.InPlace != nil {
					c.ip = row.InPlace.TimeUs
				}
				cols[row.Bytes] = c
			}
			s := heldOutSplit{file: lg.file, collective: r.Collective, shape: lg.shape, train: &ginv1.Measurement{Collective: coll}}
			for j, p := range pts {
				c := cols[p.GetBytes()]
				if c.faster() != p.GetTimeUs() {
					t.Fatalf("%s %s %d B: stored %v µs is not the faster column of %+v", lg.file, r.Collective, p.GetBytes(), p.GetTimeUs(), c)
				}
				if j%2 == 0 {
					s.train.Points = append(s.train.Points, p)
					s.trainCols = append(s.trainCols, c)
				} else {
					s.held = append(s.held, c)
				}
			}
			out = append(out, s)
		}
	}
	return out
}

// heldOutGoal is issue #13's goal on out-of-sample busbw error.
const (
	goalMedian = 0.07
	goalWorst  = 0.15
)

// knownMisses are the held-out sizes that miss the worst-case goal even
// with the measurement's spread as its error bar, each with the error it
// has now (rounded up): TestHeldOutInterpolation fails when another size
// misses the goal, when one of these grows past its bound, or when one of
// them meets the goal (then it is no longer a miss and leaves this list).
// They are counted in every figure; docs/CALIBRATION.md says why they
// miss.
var knownMisses = map[string]float64{
	"xxrjun_N10_G8.log all_gather 268435200":     0.25,
	"xxrjun_N10_G8.log reduce_scatter 268435200": 0.16,
}

// heldRow is one held-out size predicted by the method At uses.
type heldRow struct {
	sp   heldOutSplit
	c    sizeCols
	us   float64
	how  string
	cell string // GIN's model cell at the size, then at the imported neighbours
}

func (r heldRow) key() string { return fmt.Sprintf("%s %s %d", r.sp.file, r.sp.collective, r.c.bytes) }

// heldRows predicts every held-out size with At.
func heldRows(t *testing.T) []heldRow {
	t.Helper()
	var rows []heldRow
	for _, sp := range heldOutSplits(t) {
		for _, c := range sp.held {
			us, how, ok := At(sp.train, c.bytes, CellCurve(sp.shape, sp.train))
			if !ok {
				continue
			}
			k := sort.Search(len(sp.trainCols), func(i int) bool { return sp.trainCols[i].bytes >= c.bytes })
			nb := []string{"—", "—"}
			if k > 0 {
				nb[0] = modelCell(sp, sp.trainCols[k-1].bytes)
			}
			if k < len(sp.trainCols) {
				nb[1] = modelCell(sp, sp.trainCols[k].bytes)
			}
			rows = append(rows, heldRow{sp: sp, c: c, us: us, how: how,
				cell: fmt.Sprintf("%s (%s, %s)", modelCell(sp, c.bytes), nb[0], nb[1])})
		}
	}
	return rows
}

// modelCell names the cell CellCurve prices for a default run at bytes:
// the one NCCL's own model picks.
func modelCell(sp heldOutSplit, bytes uint64) string {
	n, err := costmodel.PredictNCCL(sp.shape, sp.train.GetCollective(), bytes)
	if err != nil {
		return "none"
	}
	return strings.ToLower(strings.TrimPrefix(n.Algorithm.String(), "ALGORITHM_") + "/" + strings.TrimPrefix(n.Protocol.String(), "PROTOCOL_"))
}

// medianWorst returns the median and the largest of |e|.
func medianWorst(es []float64) (med, worst float64) {
	a := make([]float64, len(es))
	for i, e := range es {
		a[i] = math.Abs(e)
	}
	sort.Float64s(a)
	n := len(a)
	if n == 0 {
		return 0, 0
	}
	med = a[n/2]
	if n%2 == 0 {
		med = (a[n/2-1] + a[n/2]) / 2
	}
	return med, a[n-1]
}

// sizeName is bytes in MiB or GiB, rounded to the MiB (nccl-tests'
// all_gather sizes are a multiple of the rank count, a little under the
// power of two).
func sizeName(b uint64) string {
	mib := math.Round(float64(b) / (1 << 20))
	if mib >= 1024 {
		return fmt.Sprintf("%g GiB", mib/1024)
	}
	return fmt.Sprintf("%g MiB", mib)
}

func pct(e float64) string { return fmt.Sprintf("%+.1f%%", 100*e) }

// TestHeldOutInterpolation measures the out-of-sample error of measured
// calibration on published logs: every other size of each all_reduce,
// all_gather and reduce_scatter table is imported, the sizes between and
// above are predicted by At and compared with both columns the log
// measured. It renders the per-size table and the summary of
// docs/CALIBRATION.md (block "heldout"), and fails when the goal
// is missed anywhere but at the knownMisses.
func TestHeldOutInterpolation(t *testing.T) {
	rows := heldRows(t)
	if len(rows) < 30 {
		t.Fatalf("only %d held-out sizes", len(rows))
	}
	var b strings.Builder
	b.WriteString("| log | collective | size | GIN's cell (imported neighbours' cells) | how | predicted µs | out-of-place µs | in-place µs | columns differ | busbw error vs out-of-place | vs in-place | vs the faster (stored) | beyond both columns | time error vs the faster |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	var vsFaster, beyond, timeErr []float64
	var misses []string
	for _, r := range rows {
		col := func(us float64) string {
			if us <= 0 {
				return "—"
			}
			return pct(busbwErr(r.us, us))
		}
		ef, eb, et := busbwErr(r.us, r.c.faster()), r.c.beyondBand(r.us), (r.us-r.c.faster())/r.c.faster()
		vsFaster, beyond, timeErr = append(vsFaster, ef), append(beyond, eb), append(timeErr, et)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.1f | %.1f | %.1f | %.1f%% | %s | %s | %s | %s | %s |\n",
			strings.TrimSuffix(r.sp.file, ".log"), r.sp.collective, sizeName(r.c.bytes), r.cell, r.how, r.us, r.c.oop, r.c.ip,
			100*r.c.spread(), col(r.c.oop), col(r.c.ip), pct(ef), pct(eb), pct(et))
		bound, known := knownMisses[r.key()]
		switch {
		case known && math.Abs(eb) > bound:
			t.Errorf("%s: busbw error beyond both columns %s, past its known-miss bound %.0f%%", r.key(), pct(eb), 100*bound)
		case known && math.Abs(eb) <= goalWorst:
			t.Errorf("%s: busbw error beyond both columns %s now meets the goal: remove it from knownMisses", r.key(), pct(eb))
		case !known && math.Abs(eb) > goalWorst:
			t.Errorf("%s: busbw error beyond both columns %s misses the %.0f%% goal", r.key(), pct(eb), 100*goalWorst)
		}
		if math.Abs(eb) > goalWorst {
			misses = append(misses, fmt.Sprintf("%s %s %s (%s)", strings.TrimSuffix(r.sp.file, ".log"), r.sp.collective, sizeName(r.c.bytes), pct(eb)))
		}
	}
	for k := range knownMisses {
		found := false
		for _, r := range rows {
			found = found || r.key() == k
		}
		if !found {
			t.Errorf("known miss %q is not a held-out size", k)
		}
	}
	mf, wf := medianWorst(vsFaster)
	mb, wb := medianWorst(beyond)
	mt, wt := medianWorst(timeErr)
	if mf > goalMedian || mb > goalMedian {
		t.Errorf("median busbw error %.1f%% (faster column), %.1f%% (beyond both columns): goal %.0f%%", 100*mf, 100*mb, 100*goalMedian)
	}
	fmt.Fprintf(&b, "\n%d held-out sizes. Busbw error against the faster column (the point the import stores): median %.1f%%, worst %.1f%%. "+
		"Beyond both columns (the measurement's own spread taken as its error bar): median %.1f%%, worst %.1f%%. "+
		"Time error against the faster column: median %.1f%%, worst %.1f%%. "+
		"Goal (median ≤ %.0f%%, worst ≤ %.0f%%, busbw): the median is met; the worst is met at every size but %s.\n",
		len(rows), 100*mf, 100*wf, 100*mb, 100*wb, 100*mt, 100*wt, 100*goalMedian, 100*goalWorst, joinAnd(misses))
	for _, r := range rows {
		if _, known := knownMisses[r.key()]; known {
			b.WriteString("\n" + ratioLine(r))
		}
	}
	checkDocBlock(t, "heldout", b.String())
}

// ratioLine is the measured/model ratio of a held-out size and of its
// imported neighbours, both columns each, with the model's cell at each:
// what At interpolates between (it stores the faster column).
func ratioLine(r heldRow) string {
	curve := CellCurve(r.sp.shape, r.sp.train)
	k := bracket(r.sp.trainCols, r.c.bytes)
	at := func(c sizeCols) string {
		return fmt.Sprintf("%s (%s) %.2f out-of-place, %.2f in-place", sizeName(c.bytes), modelCell(r.sp, c.bytes), c.oop/curve(c.bytes), c.ip/curve(c.bytes))
	}
	parts := []string{at(r.sp.trainCols[k-1]) + " (imported)", at(r.c) + " (held out)"}
	if k < len(r.sp.trainCols) {
		parts = append(parts, at(r.sp.trainCols[k])+" (imported)")
	}
	return fmt.Sprintf("Measured ÷ model, %s %s: %s.\n", strings.TrimSuffix(r.sp.file, ".log"), r.sp.collective, strings.Join(parts, "; "))
}

func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return "none"
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// checkDocBlock compares the text between docs/CALIBRATION.md's markers
// "<!-- begin NAME -->" and "<!-- end NAME -->" with text, or rewrites it
// with -update-doc. The rest of the file is internal/costmodel
// TestCalibration's, which keeps these blocks as they are.
func checkDocBlock(t *testing.T, name, text string) {
	t.Helper()
	doc, err := os.ReadFile(calibrationDoc)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- begin "+name+" (go test ./internal/calib -update-doc) -->\n", "<!-- end "+name+" -->"
	i := strings.Index(string(doc), begin)
	j := strings.Index(string(doc), end)
	if i < 0 || j < i {
		t.Fatalf("%s has no block %q … %q", calibrationDoc, begin, end)
	}
	got := string(doc[i+len(begin) : j])
	if got == text {
		return
	}
	if *updateDoc {
		out := string(doc[:i+len(begin)]) + text + string(doc[j:])
		if err := os.WriteFile(calibrationDoc, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s block %q is out of date: run go test ./internal/calib -update-doc", calibrationDoc, name)
}
