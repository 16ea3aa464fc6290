package estimate

import (
	"math"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

func TestResolveWorkload(t *testing.T) {
	const (
		dp = ginv1.WorkloadPreset_WORKLOAD_PRESET_DATA_PARALLEL_TRAINING
		tp = ginv1.WorkloadPreset_WORKLOAD_PRESET_TENSOR_PARALLEL_INFERENCE
		ar = ginv1.Collective_COLLECTIVE_ALL_REDUCE
		ag = ginv1.Collective_COLLECTIVE_ALL_GATHER
	)
	for _, tc := range []struct {
		name string
		w    *ginv1.Workload
		want workload // compared without name
		err  string
	}{
		{name: "nil is data parallel", w: nil, want: workload{scaling: weakScaling, coll: ar, bytes: 14e9, calls: 1, compute: 1}},
		{name: "data parallel", w: &ginv1.Workload{Preset: dp}, want: workload{scaling: weakScaling, coll: ar, bytes: 14e9, calls: 1, compute: 1}},
		{name: "tensor parallel", w: &ginv1.Workload{Preset: tp}, want: workload{scaling: strongScaling, coll: ar, bytes: 16384, calls: 160, compute: 0.02}},
		{name: "explicit", w: &ginv1.Workload{Collective: ag, BytesPerStep: 1 << 30, ComputeSecondsPerStep: 0.5}, want: workload{scaling: weakScaling, coll: ag, bytes: 1 << 30, calls: 1, compute: 0.5}},
		{name: "unknown preset", w: &ginv1.Workload{Preset: 99}, err: "unknown preset"},
		{name: "preset and explicit", w: &ginv1.Workload{Preset: dp, BytesPerStep: 10}, err: "both set"},
		{name: "empty", w: &ginv1.Workload{}, err: "neither a preset"},
		{name: "zero compute", w: &ginv1.Workload{Collective: ar, BytesPerStep: 1 << 20}, err: "compute_seconds_per_step 0"},
		{name: "negative compute", w: &ginv1.Workload{Collective: ar, BytesPerStep: 1 << 20, ComputeSecondsPerStep: -1}, err: "compute_seconds_per_step -1"},
		{name: "NaN compute", w: &ginv1.Workload{Collective: ar, BytesPerStep: 1 << 20, ComputeSecondsPerStep: math.NaN()}, err: "compute_seconds_per_step NaN"},
		{name: "infinite compute", w: &ginv1.Workload{Collective: ar, BytesPerStep: 1 << 20, ComputeSecondsPerStep: math.Inf(1)}, err: "compute_seconds_per_step +Inf"},
		{name: "zero bytes", w: &ginv1.Workload{Collective: ar, ComputeSecondsPerStep: 1}, err: "bytes_per_step"},
		{name: "no collective", w: &ginv1.Workload{BytesPerStep: 1 << 20, ComputeSecondsPerStep: 1}, err: "collective"},
		{name: "bad collective", w: &ginv1.Workload{Collective: 42, BytesPerStep: 1 << 20, ComputeSecondsPerStep: 1}, err: "collective 42"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveWorkload(tc.w)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.name == "" {
				t.Error("no name")
			}
			got.name = ""
			if got != tc.want {
				t.Errorf("workload = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestScale(t *testing.T) {
	dp := workload{scaling: weakScaling, calls: 1, compute: 1}
	tp := workload{scaling: strongScaling, calls: 160, compute: 0.02}
	for _, tc := range []struct {
		name           string
		w              workload
		n              int
		commUs         float64
		speedup, effic float64
	}{
		{"one GPU", dp, 1, 0, 1, 1},
		{"dp free comm", dp, 8, 0, 8, 1},
		{"dp comm = compute", dp, 8, 1e6, 4, 0.5},
		{"dp 0.25 s comm", dp, 16, 250e3, 12.8, 0.8},
		{"tp free comm", tp, 8, 0, 8, 1},
		// t(8) = 2.5 ms + 160 × 12.5 µs = 4.5 ms; 20 / 4.5.
		{"tp 12.5 µs", tp, 8, 12.5, 20.0 / 4.5, 20.0 / 4.5 / 8},
		// Comm larger than the compute saved: slower than one GPU.
		{"tp slower", tp, 2, 100, 0.02 / (0.01 + 0.016), 0.02 / (0.01 + 0.016) / 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, e := tc.w.scale(tc.n, tc.commUs)
			if math.Abs(s-tc.speedup) > 1e-9 || math.Abs(e-tc.effic) > 1e-9 {
				t.Errorf("scale(%d, %g) = %g, %g; want %g, %g", tc.n, tc.commUs, s, e, tc.speedup, tc.effic)
			}
		})
	}
}
