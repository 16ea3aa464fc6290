package costmodel

// NVLS chunking (NCCL's calcCollChunking for NCCL_ALGO_NVLS, 2.19-2.30):
// the NVLS kernels move data in loops of nvlsChannels × nHeads chunks. The
// chunk starts at NCCL_NVLS_CHUNKSIZE (128 KiB) and drops to 64, 32 and
// 16 KiB for messages under 64, 8 and 2 loops of the larger chunk. Smaller
// chunks mean more loops per byte; each loop pays a fixed synchronisation
// cost per chunk a channel takes in it (NVLSChunkUs × nHeads), and the first
// loop fills the pipeline before data flows at the switch rate. That is the mid-size NVLS ramp the published
// curves show (H100: 321 GB/s busbw at 32 MiB, 444 at 512 MiB, 481 at
// 8 GiB), which NCCL's α-β model (one latency + size / bandwidth) has no
// term for.
const (
	nvlsMaxChunk = 128 << 10
	// nvlsMinFitChunk is the smallest chunk the fit saw (the H100 curve
	// from 32 MiB: 32, 64 and 128 KiB chunks). Messages small enough for
	// 16 KiB chunks (under 2 loops of 32 KiB: 8 MiB on 8 H100) keep NCCL's
	// α-β form: the ramp is not extrapolated below what was measured.
	nvlsMinFitChunk = 32 << 10
	// NCCL's NVLS channel counts (src/transport/nvls.cc): 16 on SM90; on
	// SM100 24 inside one NVLink domain (one node or one MNNVL clique), 32
	// across nodes.
	nvlsChannelsSM90      = 16
	nvlsChannelsSM100     = 24
	nvlsChannelsSM100Node = 32
)

// nvlsChannels is NCCL's nvlsChannels for p.
func (p *params) nvlsChannels() int {
	switch {
	case p.cc >= 100 && p.nNodes > 1:
		return nvlsChannelsSM100Node
	case p.cc >= 100:
		return nvlsChannelsSM100
	}
	return nvlsChannelsSM90
}

// nvlsChunk is the chunk NCCL picks for an NVLS operation of bytes with
// ops = nvlsChannels × nHeads concurrent chunks per loop.
func nvlsChunk(bytes uint64, ops int) uint64 {
	c := uint64(nvlsMaxChunk)
	o := uint64(ops)
	if bytes < 64*o*c && c > 64<<10 {
		c = 64 << 10
	}
	if bytes < 8*o*c && c > 32<<10 {
		c = 32 << 10
	}
	if bytes < 2*o*c && c > 16<<10 {
		c = 16 << 10
	}
	return c
}

// nvlsRampUs is what GIN adds to an NVLS cell of bytes at algorithm
// bandwidth algbw (GB/s, the switch-limited peak): one loop of pipeline
// fill, and NVLSChunkUs × nHeads for every loop beyond those a message of
// the same size would need at the full 128 KiB chunk (the peak already
// prices those). nHeads is the GPUs of the NVLink domain (every rank is a
// head on one node or one MNNVL clique).
func (p *params) nvlsRampUs(bytes uint64, algbw float64) float64 {
	ops := p.nvlsChannels() * p.ppn
	c := nvlsChunk(bytes, ops)
	if c < nvlsMinFitChunk {
		return 0
	}
	loop := float64(uint64(ops) * c)
	fill := loop / (1000 * algbw)
	extraLoops := float64(bytes)/loop - float64(bytes)/float64(uint64(ops)*nvlsMaxChunk)
	return fill + NVLSChunkUs*float64(p.ppn)*extraLoops
}

// nvlsMinGPUs is the fewest GPUs of one NVLink domain (one node, or one
// MNNVL clique) with which NCCL sets nvlsSupport: ncclNvlsInit
// (src/transport/nvls.cc) returns without NVLS when ncclTopoGetGpuCount is
// below it. NCCL 2.28.7 through 2.30.7 (the version this model follows):
// `gpuCount < 2`, so from 2 GPUs. NCCL 2.18.1 through 2.28.3: `gpuCount <= 2`
// (2.21-2.23: the clique size for MNNVL), from 3 GPUs. The rule in
// shared/reference/calibration.md ("NVLS beats ring only above 4 GPUs",
// which GIN's model used as "NVLS only with more than 4 GPUs") is a reading
// of nccl#1455's measurements, not NCCL's gate: NCCL offers NVLS on 2 to 4
// GPUs and its own model picks it there (its NVLS busbw does not fall with
// fewer GPUs); GIN's model prices it with nvlsGPUCount and finds ring faster
// on 2 and 3 GPUs, a near tie on 4.
const nvlsMinGPUs = 2

// nvlsFitGPUs is the GPU count the NVLS constants were fitted at (one
// 8-GPU NVSwitch baseboard).
const nvlsFitGPUs = 8

// nvlsGPUCount scales an NVLS all_reduce of n GPUs of one NVLink domain
// from the fitted 8. NCCL's conversion makes NVLS algbw grow as n/(n-1)
// when GPUs are fewer (its busbw does not depend on n). Each GPU's NVLink
// carries S·(1+1/n) each way (the switch reads its whole buffer for the
// reductions and it takes its own 1/n back; it stores its 1/n and receives
// the others' multicasts), so algbw goes as n/(n+1): fewer GPUs, less. The
// published 8×H100 sweep (NVIDIA/nccl#1455: NVLS algbw 258, ~265, ~270,
// ~273 GB/s on 5 to 8 GPUs; busbw 365-370 like ring on 2 to 4) follows
// n/(n+1) on 4 to 8 GPUs; on 3 the reporter's NVLS busbw ("365-370", as
// ring) is ~16% above it, a known miss (TestNVLSPairs). It is applied up
// to 8 GPUs: above, in multi-node NVLink domains,
// NCCL's form stands (the 72-GPU GB200 NVL72 curve agrees with it,
// not with n/(n+1)).
func nvlsGPUCount(n int) float64 {
	if n >= nvlsFitGPUs {
		return 1
	}
	at := func(n int) float64 { return float64(n-1) / float64(n+1) }
	return at(n) / at(nvlsFitGPUs)
}

// nvlsTreeFillMinNodes is the node count from which NCCL caps the NVLSTree
// chunk at 64 KiB (NCCL_NVLSTREE_MAX_CHUNKSIZE's default, -2: 64 KiB on 4
// or more nodes, else the 128 KiB NVLS chunk; 2.29.2's calcCollChunking,
// 2.30's ncclNvlsTuning) and the double binary tree is more than one level
// deep: the regime the published curves were measured in.
const nvlsTreeFillMinNodes = 4

// nvlsTreeFillUs is what GIN adds to an NVLSTree all_reduce on 4 or more
// SM90 nodes: a fixed time per operation, NVLSTreeFillUs × (1 − 2/heads)
// with heads the NVLS heads of a node (one per NIC): 0 with 2 heads, 268
// µs with 4, 402 µs with 8. The published 10-node H100 curves (NCCL
// 2.29.2) take a fixed ~230-600 µs more than NCCL's α-β form below ~1 GiB
// with 4 and 8 heads, and next to nothing with 2: 32 MiB takes 799 µs on
// 10 × 8, 725 on 10 × 4, where the NIC-bound rate gives ~330 and ~490.
// NCCL's NVLSTree latency (tens of µs) has no such term, and the chunk
// stays 64 KiB over that range (concurrentOps = nvlsChannels × nHeads
// chunks a loop), so it is not the NVLS chunk ramp of nvlsRampUs. The
// form is the one of six one-parameter forms in the heads (constant,
// heads, log2, heads − 1, heads − 2, 1 − 2/heads) with the smallest error
// on the fit half; no mechanism is claimed for it: the constant and its
// form are empirical, from one cluster (one node count, 400 Gb/s NICs
// assumed). Not applied on 2 and 3 nodes (128 KiB chunks, a one-level
// tree; no published mid-size curve) nor on SM100, whose multi-node
// NVLSTree NCCL tunes apart (ncclNvlsTreeSm100Tuning).
func (p *params) nvlsTreeFillUs() float64 {
	if p.nNodes < nvlsTreeFillMinNodes || p.cc >= 100 {
		return 0
	}
	return NVLSTreeFillUs * (1 - 2/float64(max(p.nvlsHeads, 2)))
}
