package calib

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// interpMethod predicts the time at bytes, strictly between the first and
// the last size of train (ascending, at least two), from train alone.
type interpMethod struct {
	name string
	at   func(sp heldOutSplit, train []sizeCols, bytes uint64) float64
}

// measurementOf is train as a measurement of sp's collective, each size's
// time taken by col.
func measurementOf(sp heldOutSplit, train []sizeCols, col func(sizeCols) float64) *ginv1.Measurement {
	m := &ginv1.Measurement{Collective: sp.train.GetCollective()}
	for _, c := range train {
		m.Points = append(m.Points, &ginv1.MeasuredPoint{Bytes: c.bytes, TimeUs: col(c)})
	}
	return m
}

// bracket is the index k of the first size of train at or above bytes.
func bracket(train []sizeCols, bytes uint64) int {
	return sort.Search(len(train), func(i int) bool { return train[i].bytes >= bytes })
}

// logFrac is where bytes lies between a and b in log-size (0 at a, 1 at b).
func logFrac(a, b, bytes uint64) float64 {
	return math.Log(float64(bytes)/float64(a)) / math.Log(float64(b)/float64(a))
}

// interpMethods are the ways to interpolate between imported sizes that
// TestInterpolationAlternatives compares; the first is At's.
var interpMethods = []interpMethod{
	{"the model calibrated by the measured ratio, in log-size, faster column (At, used)", func(sp heldOutSplit, train []sizeCols, bytes uint64) float64 {
		m := measurementOf(sp, train, sizeCols.faster)
		us, _, _ := At(m, bytes, CellCurve(sp.shape, m))
		return us
	}},
	{"linear in size", func(sp heldOutSplit, train []sizeCols, bytes uint64) float64 {
		us, _, _ := At(measurementOf(sp, train, sizeCols.faster), bytes, nil)
		return us
	}},
	{"linear in log-size/log-time", func(sp heldOutSplit, train []sizeCols, bytes uint64) float64 {
		k := bracket(train, bytes)
		a, b := train[k-1], train[k]
		return a.faster() * math.Pow(b.faster()/a.faster(), logFrac(a.bytes, b.bytes, bytes))
	}},
	{"monotone cubic in log-log", func(sp heldOutSplit, train []sizeCols, bytes uint64) float64 {
		return pchipLogLog(train, bracket(train, bytes), bytes)
	}},
	{"both columns as one measurement (their geometric mean), the model calibrated by its ratio", func(sp heldOutSplit, train []sizeCols, bytes uint64) float64 {
		m := measurementOf(sp, train, func(c sizeCols) float64 {
			if c.oop <= 0 || c.ip <= 0 {
				return c.faster()
			}
			return math.Sqrt(c.oop * c.ip)
		})
		us, _, _ := At(m, bytes, CellCurve(sp.shape, m))
		return us
	}},
	{"the model's own regime: where its cell changes between the two imported sizes, the ratio of the one with the size's cell", func(sp heldOutSplit, train []sizeCols, bytes uint64) float64 {
		m := measurementOf(sp, train, sizeCols.faster)
		curve := CellCurve(sp.shape, m)
		k := bracket(train, bytes)
		a, b := train[k-1], train[k]
		here, ca, cb := modelCell(sp, bytes), modelCell(sp, a.bytes), modelCell(sp, b.bytes)
		switch {
		case here == ca && here != cb:
			return curve(bytes) * a.faster() / curve(a.bytes)
		case here == cb && here != ca:
			return curve(bytes) * b.faster() / curve(b.bytes)
		}
		us, _, _ := At(m, bytes, curve)
		return us
	}},
	{"neighbours weighted: the log of the ratio fitted linearly in log-size over up to two imported sizes on each side", func(sp heldOutSplit, train []sizeCols, bytes uint64) float64 {
		m := measurementOf(sp, train, sizeCols.faster)
		curve := CellCurve(sp.shape, m)
		k := bracket(train, bytes)
		var xs, ys []float64
		for i := max(0, k-2); i < min(len(train), k+2); i++ {
			xs = append(xs, math.Log(float64(train[i].bytes)))
			ys = append(ys, math.Log(train[i].faster()/curve(train[i].bytes)))
		}
		slope, icept := lineFit(xs, ys)
		return curve(bytes) * math.Exp(icept+slope*math.Log(float64(bytes)))
	}},
}

// lineFit is the least-squares line y = slope·x + icept.
func lineFit(xs, ys []float64) (slope, icept float64) {
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i], my+ys[i]
	}
	mx, my = mx/float64(len(xs)), my/float64(len(ys))
	var sxx, sxy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
	}
	if sxx > 0 {
		slope = sxy / sxx
	}
	return slope, my - slope*mx
}

// methodScore is one method's errors (busbw) on one set of predictions.
type methodScore struct {
	n                                          int
	medFaster, worstFaster, medBand, worstBand float64
}

func score(t *testing.T, name string, preds []float64, truth []sizeCols) methodScore {
	t.Helper()
	var ef, eb []float64
	for i, us := range preds {
		if us <= 0 || math.IsNaN(us) || math.IsInf(us, 0) {
			t.Fatalf("%s at %d B: %v", name, truth[i].bytes, us)
		}
		ef = append(ef, busbwErr(us, truth[i].faster()))
		eb = append(eb, truth[i].beyondBand(us))
	}
	s := methodScore{n: len(preds)}
	s.medFaster, s.worstFaster = medianWorst(ef)
	s.medBand, s.worstBand = medianWorst(eb)
	return s
}

// TestInterpolationAlternatives compares ways to interpolate between two
// imported sizes, and chooses among them on the imported (calibration)
// sizes alone: each interior imported size is left out in turn and
// predicted from the other imported sizes of its table (leave-one-out; the
// held-out sizes are not used). A method replaces At's only when it is
// better there on both the median and the worst busbw error beyond both
// columns; the test fails when one is. The held-out error of every method
// (interior held-out sizes: above the largest imported size every method
// extrapolates alike) is reported, not used to choose. Both are rendered
// into docs/CALIBRATION.md (block "interp-alternatives").
func TestInterpolationAlternatives(t *testing.T) {
	splits := heldOutSplits(t)
	var b strings.Builder
	b.WriteString("| method | leave-one-out on the imported sizes: median | worst | held out (interior): busbw error vs the faster column, median | worst | beyond both columns, median | worst |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	var loos []methodScore
	var nLOO, nHeld int
	for _, m := range interpMethods {
		var looPred, heldPred []float64
		var looTruth, heldTruth []sizeCols
		for _, sp := range splits {
			for j := 1; j+1 < len(sp.trainCols); j++ {
				rest := append(append([]sizeCols{}, sp.trainCols[:j]...), sp.trainCols[j+1:]...)
				looPred, looTruth = append(looPred, m.at(sp, rest, sp.trainCols[j].bytes)), append(looTruth, sp.trainCols[j])
			}
			for _, h := range sp.held {
				if k := bracket(sp.trainCols, h.bytes); k == 0 || k == len(sp.trainCols) {
					continue
				}
				heldPred, heldTruth = append(heldPred, m.at(sp, sp.trainCols, h.bytes)), append(heldTruth, h)
			}
		}
		loo, held := score(t, m.name, looPred, looTruth), score(t, m.name, heldPred, heldTruth)
		loos = append(loos, loo)
		fmt.Fprintf(&b, "| %s | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.1f%% |\n", m.name,
			100*loo.medBand, 100*loo.worstBand, 100*held.medFaster, 100*held.worstFaster, 100*held.medBand, 100*held.worstBand)
		nLOO, nHeld = loo.n, held.n
	}
	fmt.Fprintf(&b, "\nLeave-one-out: %d imported sizes, each predicted from the other imported sizes of its table (its neighbours 4× smaller and larger, a held-out size's 2×). Held out: %d sizes between imported ones.\n", nLOO, nHeld)
	var lowerMed, lowerWorst []string
	for i, s := range loos[1:] {
		name := interpMethods[i+1].name
		if s.medBand < loos[0].medBand && s.worstBand < loos[0].worstBand {
			t.Errorf("%q beats At's method on the imported sizes (median %.1f%% < %.1f%%, worst %.1f%% < %.1f%%): switch At to it",
				name, 100*s.medBand, 100*loos[0].medBand, 100*s.worstBand, 100*loos[0].worstBand)
		}
		if s.medBand < loos[0].medBand {
			lowerMed = append(lowerMed, strings.SplitN(name, ":", 2)[0])
		}
		if s.worstBand < loos[0].worstBand {
			lowerWorst = append(lowerWorst, strings.SplitN(name, ":", 2)[0])
		}
	}
	fmt.Fprintf(&b, "On the imported sizes, a lower median than At's method: %s; a lower worst case: %s.\n", joinAnd(lowerMed), joinAnd(lowerWorst))
	checkDocBlock(t, "interp-alternatives", b.String())
}

// pchipLogLog is a monotone piecewise cubic Hermite interpolant
// (Fritsch-Carlson slopes) of log(time) over log(size) through every size
// of train (the faster column), evaluated at bytes between train[k-1] and
// train[k].
func pchipLogLog(train []sizeCols, k int, bytes uint64) float64 {
	n := len(train)
	xs, ys := make([]float64, n), make([]float64, n)
	for i, c := range train {
		xs[i], ys[i] = math.Log(float64(c.bytes)), math.Log(c.faster())
	}
	d := make([]float64, n-1)
	for i := range d {
		d[i] = (ys[i+1] - ys[i]) / (xs[i+1] - xs[i])
	}
	m := make([]float64, n)
	m[0], m[n-1] = d[0], d[n-2]
	for i := 1; i < n-1; i++ {
		if d[i-1]*d[i] > 0 {
			h0, h1 := xs[i]-xs[i-1], xs[i+1]-xs[i]
			w1, w2 := 2*h1+h0, h1+2*h0
			m[i] = (w1 + w2) / (w1/d[i-1] + w2/d[i])
		}
	}
	i := k - 1
	h := xs[i+1] - xs[i]
	u := (math.Log(float64(bytes)) - xs[i]) / h
	h00, h10, h01, h11 := 2*u*u*u-3*u*u+1, u*u*u-2*u*u+u, -2*u*u*u+3*u*u, u*u*u-u*u
	return math.Exp(h00*ys[i] + h10*h*m[i] + h01*ys[i+1] + h11*h*m[i+1])
}
