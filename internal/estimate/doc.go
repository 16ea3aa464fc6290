// Package estimate answers PlanService's Estimate and OrderNodes from the
// canonical topology graph and the cost model: topology-ordered host lists,
// the prediction of one collective on a fixed placement, and, for a GPU
// count, every placement class the cluster can offer with the scaling of a
// workload on it. It holds no state: every call reads one immutable
// *graph.Graph.
//
// # Host ordering
//
// Order sorts nodes so that a ring over them (node i → i+1, last → first)
// crosses the spine the least: nodes are grouped by spine group (leaves
// that meet one tier up; only matters in fabrics of three or more tiers),
// then leaf switch, then MNNVL clique (a clique stays together), then name
// in natural order (node2 before node10). Groups follow each other in order
// of their first node's name, so the answer depends only on the set of
// nodes. A ring over L leaf groups then crosses the spine L times (none for
// one leaf) whatever order it was given in. A ring edge counts as a crossing
// when the path between the GPU0s of its two nodes is a NET path over more
// than one switch, or with unknown hops. The work is a sort plus 2n paths
// (the crossings of both rings) plus one path per leaf per spine group: no
// all-pairs table (10,000 nodes order in about 60 ms on one core).
//
// # Predictions
//
// ForPlacement runs costmodel.ShapeOf and costmodel.Predict and reports the
// answer as nccl-tests would: algbw = size / time and busbw = algbw ×
// costmodel.BusFactor (2(n−1)/n for all_reduce, (n−1)/n for all_gather and
// reduce_scatter, 1 for broadcast and reduce).
//
// # Placement classes
//
// ForGPUCount returns five classes, always in this order, each available or
// not (with the reason) from the nodes not marked busy:
//
//   - nvlink-domain: all N GPUs pairwise NVLinked: the first free node with
//     N such GPUs, else whole free nodes of one MNNVL clique (GB200 NVL72
//     trays);
//   - node-pcie: one free node with N GPUs and no NVLink between them;
//   - one-leaf: free InfiniBand nodes under one leaf switch;
//   - spine: free InfiniBand nodes taken round-robin over the leaf switches,
//     as a topology-blind scheduler would place them;
//   - ethernet: free nodes whose compute ports are Ethernet (RoCE), under
//     one leaf when one has enough.
//
// Nodes are considered healthy first (every NVLink and compute port up),
// then in natural name order; multi-node classes take whole nodes and put
// the partial node last. N GPUs that fit in one node are split over two
// nodes (⌈N/2⌉ + ⌊N/2⌋) in the multi-node classes, so that they show what
// leaving the node costs. The multi-node prediction uses the shape of the
// smallest per-node share (it drives the fewest NICs) with the true rank
// count. Nodes need GPUs numbered 0..k−1 and, for multi-node classes, an up
// compute port. Whether a node's fabric is Ethernet is the cost model's
// Shape.Ethernet for that node.
//
// # Scaling model
//
// Data-parallel training (the DATA_PARALLEL_TRAINING preset and every
// explicit workload) is weak scaling: every GPU runs the same per-GPU batch,
// so a step on N GPUs is the one-GPU compute time plus the collective, not
// overlapped with compute (a pessimistic bound: frameworks overlap bucketed
// gradient all_reduces with the backward pass):
//
//	t(1) = compute
//	t(N) = compute + calls × T_coll(N, bytes)
//	speedup = N × t(1) / t(N),  efficiency = speedup / N
//
// Tensor-parallel inference (TENSOR_PARALLEL_INFERENCE) is strong scaling:
// the one-GPU work of a token is split N ways, and every layer's
// all_reduces sit on the critical path:
//
//	t(1) = compute
//	t(N) = compute / N + calls × T_coll(N, bytes)
//	speedup = t(1) / t(N),  efficiency = speedup / N
//
// T_coll is the cost model's time for the collective on the placement; on
// one GPU it is 0 (speedup 1).
//
// # Presets
//
// DATA_PARALLEL_TRAINING: a 7B-parameter model trained in bf16, one
// all_reduce of its gradients per step: 7×10⁹ × 2 bytes = 14 GB (decimal);
// 1.0 s of compute per step per GPU. The compute time is an assumption: a
// step of 6 × 7×10⁹ FLOP per token over about 8,000 tokens per GPU is
// 3.4×10¹⁴ FLOP, about 1 s at 40 % of an H100's dense bf16 peak.
//
// TENSOR_PARALLEL_INFERENCE: a 70B-class decoder (Llama-2-70B shape: 80
// layers, hidden size 8192) decoding at batch 1 with Megatron-style tensor
// parallelism: 2 all_reduces per layer (after attention, after the MLP) of
// one token's activations, 8192 × 2 bytes (bf16) = 16 KiB, so 160 all_reduces
// of 16 KiB per token; 20 ms of compute per token on one GPU. The compute
// time is an assumption: decoding at batch 1 is memory-bound, and reading
// 140 GB of bf16 weights per token takes about 20 ms at 7 TB/s (a B200-class
// GPU; about 42 ms at an H100's 3.35 TB/s). At 16 KiB the all_reduces are
// latency-bound, which is what makes tensor parallelism across nodes slow.
//
// Explicit workloads give the collective, its bytes per step and the
// compute seconds per step on one GPU, and scale as data-parallel training
// (one collective per step). A nil workload is the DATA_PARALLEL_TRAINING
// preset.
package estimate
