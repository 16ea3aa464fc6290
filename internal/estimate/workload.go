package estimate

import (
	"fmt"
	"math"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// Preset workloads (see the package documentation for where the numbers
// come from).
const (
	// DataParallelGradientBytes is the gradient all_reduce of one
	// data-parallel step: 7×10⁹ parameters × 2 bytes (bf16).
	DataParallelGradientBytes = 14_000_000_000
	// DataParallelComputeSeconds is one step's forward and backward pass on
	// one GPU (the same per-GPU batch on every GPU count).
	DataParallelComputeSeconds = 1.0

	// TensorParallelLayers and TensorParallelAllReducesPerLayer: a 70B-class
	// decoder (80 layers), Megatron-style tensor parallelism (one all_reduce
	// after attention, one after the MLP).
	TensorParallelLayers             = 80
	TensorParallelAllReducesPerLayer = 2
	// TensorParallelActivationBytes is one token's activations at batch 1:
	// hidden size 8192 × 2 bytes (bf16) = 16 KiB.
	TensorParallelActivationBytes = 8192 * 2
	// TensorParallelComputeSeconds is one decode step (one token) of the
	// whole model on one GPU.
	TensorParallelComputeSeconds = 0.020
)

// scaling is how step time grows with the GPU count.
type scaling uint8

const (
	// weakScaling (data parallel): every GPU does the one-GPU step on its
	// own batch, then the collective runs, not overlapped.
	weakScaling scaling = iota + 1
	// strongScaling (tensor parallel): the one-GPU step is split N ways,
	// plus the collectives on the critical path.
	strongScaling
)

// workload is a resolved Workload.
type workload struct {
	name    string
	scaling scaling
	coll    ginv1.Collective
	bytes   uint64  // per collective call
	calls   int     // collective calls per step
	compute float64 // seconds per step on one GPU
}

// resolveWorkload checks a Workload and fills in a preset. A nil workload is
// the data-parallel training preset.
func resolveWorkload(w *ginv1.Workload) (workload, error) {
	if w == nil {
		w = &ginv1.Workload{Preset: ginv1.WorkloadPreset_WORKLOAD_PRESET_DATA_PARALLEL_TRAINING}
	}
	explicit := w.Collective != ginv1.Collective_COLLECTIVE_UNSPECIFIED || w.BytesPerStep != 0 || w.ComputeSecondsPerStep != 0
	switch w.Preset {
	case ginv1.WorkloadPreset_WORKLOAD_PRESET_UNSPECIFIED:
	case ginv1.WorkloadPreset_WORKLOAD_PRESET_DATA_PARALLEL_TRAINING, ginv1.WorkloadPreset_WORKLOAD_PRESET_TENSOR_PARALLEL_INFERENCE:
		if explicit {
			return workload{}, fmt.Errorf("workload: preset %v and explicit collective/bytes/compute both set: set one", w.Preset)
		}
		if w.Preset == ginv1.WorkloadPreset_WORKLOAD_PRESET_DATA_PARALLEL_TRAINING {
			return workload{
				name: "data-parallel training (7B parameters, bf16 gradients)", scaling: weakScaling,
				coll: ginv1.Collective_COLLECTIVE_ALL_REDUCE, bytes: DataParallelGradientBytes, calls: 1,
				compute: DataParallelComputeSeconds,
			}, nil
		}
		return workload{
			name: "tensor-parallel inference (80 layers, hidden 8192, batch 1)", scaling: strongScaling,
			coll: ginv1.Collective_COLLECTIVE_ALL_REDUCE, bytes: TensorParallelActivationBytes,
			calls: TensorParallelLayers * TensorParallelAllReducesPerLayer, compute: TensorParallelComputeSeconds,
		}, nil
	default:
		return workload{}, fmt.Errorf("workload: unknown preset %v", w.Preset)
	}
	if !explicit {
		return workload{}, fmt.Errorf("workload: neither a preset nor collective, bytes_per_step and compute_seconds_per_step")
	}
	if err := checkCollective(w.Collective); err != nil {
		return workload{}, fmt.Errorf("workload: %w", err)
	}
	if w.BytesPerStep == 0 {
		return workload{}, fmt.Errorf("workload: bytes_per_step: want more than 0")
	}
	if c := w.ComputeSecondsPerStep; !(c > 0) || math.IsInf(c, 0) {
		return workload{}, fmt.Errorf("workload: compute_seconds_per_step %g: want a finite time above 0", c)
	}
	return workload{
		name: "explicit (data-parallel scaling)", scaling: weakScaling,
		coll: w.Collective, bytes: w.BytesPerStep, calls: 1, compute: w.ComputeSecondsPerStep,
	}, nil
}

// scale returns the speedup of n GPUs over one and the efficiency
// (speedup / n) for a collective call of commUs µs.
//
//	weak:   t1 = compute, tN = compute + calls × comm, speedup = N × t1 / tN
//	strong: t1 = compute, tN = compute/N + calls × comm, speedup = t1 / tN
func (w workload) scale(n int, commUs float64) (speedup, efficiency float64) {
	if n <= 1 {
		return 1, 1
	}
	comm := float64(w.calls) * commUs * 1e-6
	switch w.scaling {
	case strongScaling:
		speedup = w.compute / (w.compute/float64(n) + comm)
	default:
		speedup = float64(n) * w.compute / (w.compute + comm)
	}
	return speedup, speedup / float64(n)
}
