package draw

import (
	"bytes"
	"math"
	"testing"
)

func TestChart(t *testing.T) {
	ch := Chart{Title: "all_reduce on 16 ranks over 2 nodes", XLabel: "message size (bytes)", YLabel: "busbw GB/s", XBytes: true,
		Series: []Series{
			{Name: "ring", Points: []Point{{1 << 10, 0.5}, {1 << 20, 60}, {1 << 30, 350}}},
			{Name: "tree", Points: []Point{{1 << 10, 0.7}, {1 << 20, 80}, {1 << 30, 300}, {1 << 31, math.NaN()}}},
			{Name: "pale", Faint: true, Points: []Point{{1 << 10, 1}, {1 << 30, 10}}},
		},
		Choices:  []Mark{{X: 1 << 20, Y: 80, Label: "1M: tree/ll128 (GIN)", Series: -1}},
		Measured: []Mark{{X: 1 << 20, Y: 75, Label: "measured tree 1M", Series: 1}, {X: 1 << 30, Y: 340, Label: "measured default", Series: -1}},
	}
	var b bytes.Buffer
	if err := DrawChart(&b, ch); err != nil {
		t.Fatal(err)
	}
	wellFormed(t, b.Bytes())
	golden(t, "chart.svg", b.Bytes())
	for _, want := range []string{`data-series="ring"`, `data-series="tree"`, `data-choice="1M: tree/ll128 (GIN)"`, `class="meas f1"`, `class="series s2 unavail"`, ">1G<", ">1K<"} {
		if !bytes.Contains(b.Bytes(), []byte(want)) {
			t.Errorf("chart lacks %s", want)
		}
	}
	if bytes.Contains(b.Bytes(), []byte("NaN")) {
		t.Error("a NaN point reached the SVG")
	}
}

func TestChartBounds(t *testing.T) {
	many := make([]Series, maxSeries+1)
	if err := DrawChart(&bytes.Buffer{}, Chart{Series: many}); err == nil {
		t.Error("chart past the series bound drawn")
	}
	var b bytes.Buffer
	if err := DrawChart(&b, Chart{Title: "empty"}); err != nil || !bytes.Contains(b.Bytes(), []byte("Nothing to draw")) {
		t.Errorf("empty chart: %v %s", err, b.Bytes())
	}
}
