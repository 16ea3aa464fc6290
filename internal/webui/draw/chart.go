package draw

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Point is one point of a chart.
type Point struct{ X, Y float64 }

// Series is one line of a chart.
type Series struct {
	Name   string
	Points []Point
	// Faint draws it dashed and pale (a placement class not available now).
	Faint bool
}

// Mark is a labelled point on a chart: GIN's choice at a size, or a
// measured point.
type Mark struct {
	X, Y  float64
	Label string
	// Series is the index of the series whose colour it takes; -1 none.
	Series int
}

// Chart is a line chart with a log2 x axis.
type Chart struct {
	Title, XLabel, YLabel string
	// XBytes labels the x axis as sizes (1K, 1M, ...), else as counts.
	XBytes bool
	Series []Series
	// Choices are drawn as rings (data-choice), Measured as dots
	// (data-measured), both on top of the lines.
	Choices  []Mark
	Measured []Mark
	// Ideal draws y = x (linear scaling), for speedups.
	Ideal bool
}

// Bounds of a chart: series and points drawn.
const (
	maxSeries      = 8
	maxChartPoints = 4096
)

// Layout of a chart, px.
const (
	cW, cH                 = 760, 340
	cLeft, cRight, cTop, c = 64, 200, 48, 44
)

// DrawChart draws c.
func DrawChart(w io.Writer, ch Chart) error {
	if len(ch.Series) > maxSeries {
		return fmt.Errorf("draw: chart of %d series: at most %d", len(ch.Series), maxSeries)
	}
	n := len(ch.Choices) + len(ch.Measured)
	for _, s := range ch.Series {
		n += len(s.Points)
	}
	if n > maxChartPoints {
		return fmt.Errorf("draw: chart of %d points: at most %d", n, maxChartPoints)
	}
	// Extent over every finite positive x and finite y.
	minX, maxX, maxY := math.Inf(1), math.Inf(-1), 0.0
	see := func(p Point) {
		if p.X > 0 && !math.IsInf(p.X, 0) && !math.IsNaN(p.X) && !math.IsNaN(p.Y) && !math.IsInf(p.Y, 0) {
			minX, maxX, maxY = math.Min(minX, p.X), math.Max(maxX, p.X), math.Max(maxY, p.Y)
		}
	}
	for _, s := range ch.Series {
		for _, p := range s.Points {
			see(p)
		}
	}
	for _, m := range append(append([]Mark(nil), ch.Choices...), ch.Measured...) {
		see(Point{m.X, m.Y})
	}
	var s svg
	s.start(cW, cH, "chart", ch.Title)
	s.text(ch.Title, "x", itoa(cLeft), "y", "18", "class", "h")
	if math.IsInf(minX, 1) {
		s.text("Nothing to draw.", "x", itoa(cLeft), "y", itoa(cTop+20), "class", "note")
		s.close("svg")
		_, err := w.Write(s.b.Bytes())
		return err
	}
	lx0, lx1 := math.Floor(math.Log2(minX)), math.Ceil(math.Log2(maxX))
	if lx1 == lx0 {
		lx1 = lx0 + 1
	}
	yTop := niceCeil(maxY * 1.05)
	pw, ph := float64(cW-cLeft-cRight), float64(cH-cTop-c)
	px := func(x float64) float64 { return float64(cLeft) + (math.Log2(x)-lx0)/(lx1-lx0)*pw }
	py := func(y float64) float64 { return float64(cTop) + ph - math.Max(0, y)/yTop*ph }
	ok := func(p Point) bool {
		return p.X > 0 && !math.IsNaN(p.Y) && !math.IsInf(p.Y, 0) && !math.IsInf(p.X, 0)
	}

	// Grid and axes: x every power of two (labelled every step that fits),
	// y in five steps.
	step := 1
	for (lx1-lx0)/float64(step) > 12 {
		step *= 2
	}
	for e := lx0; e <= lx1; e += float64(step) {
		x := px(math.Exp2(e))
		s.empty("line", "x1", ftoa(x), "y1", itoa(cTop), "x2", ftoa(x), "y2", ftoa(float64(cTop)+ph), "class", "grid")
		s.text(axisWord(math.Exp2(e), ch.XBytes), "x", ftoa(x), "y", ftoa(float64(cTop)+ph+14), "class", "ct")
	}
	for i := 0; i <= 5; i++ {
		v := yTop * float64(i) / 5
		y := py(v)
		s.empty("line", "x1", itoa(cLeft), "y1", ftoa(y), "x2", ftoa(float64(cLeft)+pw), "y2", ftoa(y), "class", "grid")
		s.text(numWord(v), "x", itoa(cLeft-6), "y", ftoa(y+4), "class", "ct yl")
	}
	s.empty("path", "d", fmt.Sprintf("M%d %dV%sH%s", cLeft, cTop, ftoa(float64(cTop)+ph), ftoa(float64(cLeft)+pw)), "class", "axis", "fill", "none")
	s.text(ch.XLabel, "x", ftoa(float64(cLeft)+pw/2), "y", itoa(cH-8), "class", "ct")
	s.text(ch.YLabel, "x", itoa(cLeft-6), "y", itoa(cTop-12), "class", "gs yl")

	if ch.Ideal {
		var d strings.Builder
		for e := lx0; e <= lx1; e += 0.25 {
			x := math.Exp2(e)
			if x > yTop {
				break
			}
			fmt.Fprintf(&d, "%s%s %s", map[bool]string{true: "M", false: "L"}[d.Len() == 0], ftoa(px(x)), ftoa(py(x)))
		}
		if d.Len() > 0 {
			s.empty("path", "d", d.String(), "class", "series s5 unavail")
		}
	}
	for i, se := range ch.Series {
		var d strings.Builder
		for _, p := range se.Points {
			if !ok(p) {
				continue
			}
			cmd := "L"
			if d.Len() == 0 {
				cmd = "M"
			}
			d.WriteString(cmd + ftoa(px(p.X)) + " " + ftoa(py(p.Y)))
		}
		cls := fmt.Sprintf("series s%d", i)
		if se.Faint {
			cls += " unavail"
		}
		s.open("g", "data-series", se.Name)
		if d.Len() > 0 {
			s.open("path", "d", d.String(), "class", cls)
			s.title(se.Name)
			s.close("path")
		}
		s.close("g")
		// Legend.
		ly := cTop + 8 + i*18
		s.line(cW-cRight+16, ly, cW-cRight+40, ly, "class", cls)
		s.text(se.Name, "x", itoa(cW-cRight+46), "y", itoa(ly+4), "class", "lg")
	}
	ly := cTop + 8 + len(ch.Series)*18 + 6
	if len(ch.Choices) > 0 {
		s.empty("circle", "cx", itoa(cW-cRight+28), "cy", itoa(ly), "r", "5", "class", "choice")
		s.text("GIN's choice", "x", itoa(cW-cRight+46), "y", itoa(ly+4), "class", "lg")
		ly += 18
	}
	if len(ch.Measured) > 0 {
		s.empty("circle", "cx", itoa(cW-cRight+28), "cy", itoa(ly), "r", "3", "class", "meas")
		s.text("measured", "x", itoa(cW-cRight+46), "y", itoa(ly+4), "class", "lg")
	}
	for _, m := range ch.Choices {
		if !ok(Point{m.X, m.Y}) {
			continue
		}
		s.open("circle", "cx", ftoa(px(m.X)), "cy", ftoa(py(m.Y)), "r", "5", "class", "choice", "data-choice", m.Label)
		s.title(m.Label)
		s.close("circle")
	}
	for _, m := range ch.Measured {
		if !ok(Point{m.X, m.Y}) {
			continue
		}
		cls := "meas"
		if m.Series >= 0 && m.Series < len(ch.Series) {
			cls = fmt.Sprintf("meas f%d", m.Series)
		}
		s.open("circle", "cx", ftoa(px(m.X)), "cy", ftoa(py(m.Y)), "r", "3.5", "class", cls, "data-measured", m.Label)
		s.title(m.Label)
		s.close("circle")
	}
	s.close("svg")
	_, err := w.Write(s.b.Bytes())
	return err
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (1 for v <= 0).
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// axisWord labels a power of two: sizes as 1K, 64M, 4G; counts as numbers.
func axisWord(v float64, bytes bool) string {
	if !bytes {
		return numWord(v)
	}
	for _, u := range []struct {
		div  float64
		unit string
	}{{1 << 40, "T"}, {1 << 30, "G"}, {1 << 20, "M"}, {1 << 10, "K"}} {
		if v >= u.div {
			return numWord(v/u.div) + u.unit
		}
	}
	return numWord(v)
}

// numWord prints a number with at most three significant digits.
func numWord(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 100 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// SizeWord is a byte size as charts and tables print it (4K, 64M).
func SizeWord(b uint64) string { return axisWord(float64(b), true) }
