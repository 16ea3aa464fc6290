package calib

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// TestInterpolationAlternatives measures other ways to interpolate between
// two measured sizes on the same held-out split as TestHeldOutInterpolation
// (every other size imported, the interior sizes between predicted; sizes
// above the largest imported one are extrapolated the same way by every
// method, so they are left out here): linear in size (At, used), linear in
// log-size/log-time (a power law between neighbours), and a monotone cubic
// (Fritsch-Carlson PCHIP) in log-log space through all imported sizes. The
// numbers are quoted in docs/CALIBRATION.md, which this test checks; At is
// kept linear (see the doc for why).
func TestInterpolationAlternatives(t *testing.T) {
	splits := heldOutSplits(t)
	methods := []struct {
		name string
		at   func(sp heldOutSplit, k int, bytes uint64) float64
	}{
		{"the model calibrated by the measured ratio, in log-size (used)", func(sp heldOutSplit, k int, bytes uint64) float64 {
			us, _, _ := At(sp.train, bytes, CellCurve(sp.shape, sp.train))
			return us
		}},
		{"linear in size", func(sp heldOutSplit, k int, bytes uint64) float64 {
			us, _, _ := At(sp.train, bytes, nil)
			return us
		}},
		{"linear in log-size/log-time", func(sp heldOutSplit, k int, bytes uint64) float64 {
			a, b := sp.train.Points[k-1], sp.train.Points[k]
			f := math.Log(float64(bytes)/float64(a.GetBytes())) / math.Log(float64(b.GetBytes())/float64(a.GetBytes()))
			return a.GetTimeUs() * math.Pow(b.GetTimeUs()/a.GetTimeUs(), f)
		}},
		{"monotone cubic in log-log", func(sp heldOutSplit, k int, bytes uint64) float64 {
			return pchipLogLog(sp.train.Points, k, bytes)
		}},
	}
	var quotes []string
	for _, m := range methods {
		var errs []float64
		for _, sp := range splits {
			train := sp.train.Points
			for _, h := range sp.held {
				k := sort.Search(len(train), func(i int) bool { return train[i].GetBytes() >= h.GetBytes() })
				if k == 0 || k == len(train) {
					continue
				}
				us := m.at(sp, k, h.GetBytes())
				if us <= 0 || math.IsNaN(us) {
					t.Fatalf("%s at %d B: %v", m.name, h.GetBytes(), us)
				}
				errs = append(errs, math.Abs(us-h.GetTimeUs())/h.GetTimeUs())
			}
		}
		sort.Float64s(errs)
		if len(errs) < 10 {
			t.Fatalf("%s: only %d interior held-out sizes", m.name, len(errs))
		}
		med := errs[len(errs)/2]
		if len(errs)%2 == 0 {
			med = (errs[len(errs)/2-1] + errs[len(errs)/2]) / 2
		}
		quotes = append(quotes, fmt.Sprintf("%s: median %.1f%%, worst %.1f%%", m.name, med*100, errs[len(errs)-1]*100))
		if len(quotes) == 1 {
			quotes[0] = fmt.Sprintf("%d interior held-out sizes, ", len(errs)) + quotes[0]
		}
	}
	quote := strings.Join(quotes, "; ")
	t.Log(quote)
	doc, err := os.ReadFile("../../docs/CALIBRATION.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(string(doc)), " "), quote) {
		t.Errorf("docs/CALIBRATION.md does not quote %q", quote)
	}
}

// pchipLogLog is a monotone piecewise cubic Hermite interpolant
// (Fritsch-Carlson slopes) of log(time) over log(size) through every point
// of train, evaluated at bytes between train[k-1] and train[k].
func pchipLogLog(train []*ginv1.MeasuredPoint, k int, bytes uint64) float64 {
	n := len(train)
	xs, ys := make([]float64, n), make([]float64, n)
	for i, p := range train {
		xs[i], ys[i] = math.Log(float64(p.GetBytes())), math.Log(p.GetTimeUs())
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
