package calib

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/nccltests"
)

// TestHeldOutInterpolation measures the out-of-sample error of measured
// calibration on published logs: every other size of each all_reduce,
// all_gather and reduce_scatter table is imported, the sizes between are
// predicted by At and compared with what the log measured. The numbers are
// quoted in docs/CALIBRATION.md, which this test checks.
func TestHeldOutInterpolation(t *testing.T) {
	var errs []float64
	for _, file := range []string{"xxrjun_N1_G8.log", "xxrjun_N10_G8.log", "xxrjun_smoke_N2_G1.log"} {
		f, err := os.Open("../nccltests/testdata/" + file)
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
			if _, ok := Collective(r.Collective); !ok {
				continue
			}
			pts, err := Points(r)
			if err != nil {
				t.Fatal(err)
			}
			train := &ginv1.Measurement{}
			var held []*ginv1.MeasuredPoint
			for j, p := range pts {
				if j%2 == 0 {
					train.Points = append(train.Points, p)
				} else {
					held = append(held, p)
				}
			}
			for _, h := range held {
				us, how, ok := At(train, h.GetBytes())
				if !ok {
					continue
				}
				e := math.Abs(us-h.GetTimeUs()) / h.GetTimeUs()
				errs = append(errs, e)
				t.Logf("%s %s %d B: %s %.1f µs, measured %.1f µs (%+.1f%%)", file, r.Collective, h.GetBytes(), how, us, h.GetTimeUs(), 100*(us-h.GetTimeUs())/h.GetTimeUs())
			}
		}
	}
	sort.Float64s(errs)
	if len(errs) < 10 {
		t.Fatalf("only %d held-out sizes", len(errs))
	}
	med, worst := errs[len(errs)/2], errs[len(errs)-1]
	if len(errs)%2 == 0 {
		med = (errs[len(errs)/2-1] + errs[len(errs)/2]) / 2
	}
	// The goal is median ≤ 7% and worst ≤ 15%. The median is met;
	// the worst is not (23.6%: the 10-node all_gather and reduce_scatter
	// curves are not monotonic in busbw between 64 MiB and 256 MiB, and
	// every-other-size leaves a 4× gap). This bound keeps it from growing.
	// TestInterpolationAlternatives measures log-log and monotone cubic
	// interpolation on the same split: neither meets 15% either.
	if med > 0.07 || worst > 0.25 {
		t.Errorf("held-out interpolation: median %.1f%%, worst %.1f%% (bounds 7%%, 25%%)", med*100, worst*100)
	}
	quote := fmt.Sprintf("%d held-out sizes: median absolute error %.1f%%, worst %.1f%%", len(errs), med*100, worst*100)
	doc, err := os.ReadFile("../../docs/CALIBRATION.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), quote) {
		t.Errorf("docs/CALIBRATION.md does not quote %q", quote)
	}
}
