package webui

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"net/http"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/webui/draw"
)

// workloads are the presets the estimate page offers (ginctl estimate's).
var workloads = []struct {
	value  string
	label  string
	preset ginv1.WorkloadPreset
}{
	{"training", "data-parallel training", ginv1.WorkloadPreset_WORKLOAD_PRESET_DATA_PARALLEL_TRAINING},
	{"inference", "tensor-parallel inference", ginv1.WorkloadPreset_WORKLOAD_PRESET_TENSOR_PARALLEL_INFERENCE},
}

// sweep is the GPU counts charted up to n: the powers of two below it, then n.
func sweep(n int) []int {
	var out []int
	for g := 1; g < n; g *= 2 {
		out = append(out, g)
	}
	return append(out, n)
}

// estimatePage is /ui/estimate?gpus=N&workload=W: the speedup of every
// placement class at each GPU count of the sweep up to N, one Estimate per
// count (at most 17).
func (h *handler) estimatePage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n, err := parseGPUs(q.Get("gpus"), 64, MaxEstimateGPUs)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	wl := 0
	if v := q.Get("workload"); v != "" {
		wl = -1
		for i, x := range workloads {
			if x.value == v {
				wl = i
			}
		}
		if wl < 0 {
			http.Error(w, fmt.Sprintf("workload: %q is not training or inference", v), http.StatusBadRequest)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	counts := sweep(n)
	var last *ginv1.EstimateResponse
	series := map[string]int{}
	offered := map[string]bool{} // available at some count of the sweep
	ch := draw.Chart{Title: fmt.Sprintf("Speedup per placement class, %s, up to %d GPUs", workloads[wl].label, n),
		XLabel: "GPUs", YLabel: "speedup (× one GPU)", Ideal: true}
	for _, g := range counts {
		resp, err := h.b.Estimate(ctx, &ginv1.EstimateRequest{Gpus: uint32(g), Workload: &ginv1.Workload{Preset: workloads[wl].preset}})
		if err != nil {
			h.fail(w, err)
			return
		}
		last = resp
		for _, pe := range resp.GetPlacements() {
			i, ok := series[pe.GetPlacement()]
			if !ok {
				if len(ch.Series) == 8 {
					continue // draw.Chart's bound; the service returns five classes
				}
				i = len(ch.Series)
				series[pe.GetPlacement()] = i
				ch.Series = append(ch.Series, draw.Series{Name: pe.GetPlacement()})
			}
			offered[pe.GetPlacement()] = offered[pe.GetPlacement()] || pe.GetAvailable()
			if pe.GetPrediction() != nil && pe.GetSpeedup() > 0 {
				ch.Series[i].Points = append(ch.Series[i].Points, draw.Point{X: float64(g), Y: pe.GetSpeedup()})
			}
		}
	}
	type row struct{ Placement, Available, Speedup, Efficiency, Why string }
	var rows []row
	for _, pe := range last.GetPlacements() {
		rw := row{Placement: pe.GetPlacement(), Available: "no", Speedup: "—", Efficiency: "—", Why: pe.GetReason()}
		if pe.GetAvailable() {
			rw.Available, rw.Why = "yes", pe.GetDescription()
		}
		if pe.GetPrediction() != nil && pe.GetSpeedup() > 0 {
			rw.Speedup, rw.Efficiency = fmt.Sprintf("%.1f×", pe.GetSpeedup()), fmt.Sprintf("%.0f%%", 100*pe.GetEfficiency())
		}
		rows = append(rows, rw)
	}
	for name, i := range series {
		ch.Series[i].Faint = !offered[name]
	}
	var b bytes.Buffer
	if err := draw.DrawChart(&b, ch); err != nil {
		h.fail(w, err)
		return
	}
	type option struct {
		Value, Label string
		Selected     bool
	}
	var opts []option
	for i, x := range workloads {
		opts = append(opts, option{x.value, x.label, i == wl})
	}
	h.render(w, "estimate.html", struct {
		pageHead
		GPUs, MaxGPUs int
		Workloads     []option
		Chart         template.HTML
		Rows          []row
	}{pageHead{"Estimate", false}, n, MaxEstimateGPUs, opts, svgHTML(b.Bytes()), rows})
}
