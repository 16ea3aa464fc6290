package costmodel

import (
	"math"
	"math/bits"
)

// NCCL indices (nccl-plugin.md §1.2).
const (
	algoTree = iota
	algoRing
	algoCollNetDirect
	algoCollNetChain
	algoNVLS
	algoNVLSTree
	algoPAT
	numAlgos
)

const (
	protoLL = iota
	protoLL128
	protoSimple
	numProtos
)

const (
	hwNVLink = iota
	hwPCI
	hwNet
)

// Collective indices (ncclFunc_t).
const (
	collBroadcast = iota
	collReduce
	collAllGather
	collReduceScatter
	collAllReduce
)

// NCCL 2.30.7 defaults (ncclTunerConstantsDefaults, nccl-plugin.md §6.1).
var (
	baseLat = [numAlgos][numProtos]float64{
		algoTree: {6.8, 14.0, 8.4}, algoRing: {6.6, 14.0, 8.4},
		algoPAT: {8.0, 8.0, 8.0},
	}
	hwLat = [3][numAlgos][numProtos]float64{
		hwNVLink: {
			algoTree: {.6, 1.25, 4.0}, algoRing: {.6, 1.9, 3.4},
			algoCollNetDirect: {0, 0, 3.7}, algoCollNetChain: {0, 0, 2.8},
			algoNVLS: {0, 0, 25}, algoNVLSTree: {0, 0, 25}, algoPAT: {0, 0, 4.0},
		},
		hwPCI: {
			algoTree: {1.0, 1.9, 4.0}, algoRing: {1.0, 2.5, 5.7},
			algoCollNetDirect: {0, 0, 3.7}, algoCollNetChain: {0, 0, 2.8},
			algoPAT: {0, 0, 4.0},
		},
		hwNet: {
			algoTree: {5.0, 8.5, 14}, algoRing: {2.7, 4.0, 14.0},
			algoCollNetDirect: {0, 0, 31}, algoCollNetChain: {0, 0, 30},
			algoNVLS: {0, 0, 18}, algoNVLSTree: {0, 0, 20.9}, algoPAT: {0, 0, 14},
		},
	}
	// [compcap Volta/Ampere/Hopper/Blackwell][scale 1/2/4+ nodes]
	llMaxBws          = [4][3]float64{{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}}
	perChMaxRingLL128 = [4][3]float64{{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {40, 40, 40}}
	perChMaxTreeLL128 = [4][3]float64{{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}}
	perChMaxTree      = [4][3]float64{{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}}
	perChMaxNVLSTree  = [4][3]float64{{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0, 57.7, 45.5}, {0, 96.0, 80.0}}
	nvlsEfficiency    = [4]float64{0, 0, 0.85, 0.74}
	treeCorrection    = [numProtos][23]float64{
		{1, 1, 1, 1, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1, 1, 1, 1},
		{1, 1, 1, 1, 1, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1, 1},
		{.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9},
	}
	// Graph search speeds, GB/s per channel (src/graph/search.cc).
	speedIntra      = []float64{40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3}
	speedInter      = []float64{48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12}
	speedIntraSM90  = []float64{60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3}
	speedInterSM90  = []float64{48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12}
	speedIntraSM100 = []float64{90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18}
	speedInterSM100 = []float64{96, 86, 80, 48, 45.1, 42, 40, 30, 24, 20, 19, 18, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12}
)

// Other NCCL constants.
const (
	// netOverheadUs is NCCL_NET_OVERHEAD's default for Intel and other CPUs.
	netOverheadUs = 1.0
	// maxSearchChannels is the ring search's channel limit (MAXCHANNELS/2).
	maxSearchChannels = 32
)

// NCCL's view of link bandwidth per GB/s of line rate: NCCL counts SM80
// NVLink at 20 GB/s per 25 GB/s link, SM90 20.6, SM100 40.1 per 50 GB/s;
// PCIe Gen4 x16 (31.5 GB/s) as 24 GB/s.
func nvlinkFactor(cc int) float64 {
	switch {
	case cc >= 100:
		return 40.1 / 50
	case cc >= 90:
		return 20.6 / 25
	default:
		return 20.0 / 25
	}
}

const pciFactor = 24.0 / 31.5

func ccIndex(cc int) int {
	switch {
	case cc >= 100:
		return 3
	case cc >= 90:
		return 2
	case cc >= 80:
		return 1
	}
	return 0
}

func speeds(cc int, inter bool) []float64 {
	switch {
	case cc >= 100 && inter:
		return speedInterSM100
	case cc >= 100:
		return speedIntraSM100
	case cc >= 90 && inter:
		return speedInterSM90
	case cc >= 90:
		return speedIntraSM90
	case inter:
		return speedInter
	}
	return speedIntra
}

// limit is a set of equal links a channel must cross: count links of bw
// GB/s each (a GPU's NVLinks as one link, or a node's NICs).
type limit struct {
	count int
	bw    float64
}

// search picks a graph's channel count and per-channel speed as NCCL's
// search ends up doing: among its speeds, the most total bandwidth
// nChannels×speed where every limit packs floor(bw/speed) channels per
// link, ties to the higher speed; then NCCL's channel duplication
// (ncclTopoDupChannels).
func search(cc int, inter bool, limits ...limit) (int, float64) {
	bestN, bestS := 0, 0.0
	const eps = 1e-9
	for _, s := range speeds(cc, inter) {
		n := maxSearchChannels
		for _, l := range limits {
			n = min(n, l.count*int(math.Floor(l.bw/s+eps)))
		}
		if n >= 1 && float64(n)*s > float64(bestN)*bestS+eps {
			bestN, bestS = n, s
		}
	}
	if bestN == 0 {
		return 0, 0
	}
	if bestS >= 25 && !(cc > 80 && bestS < 50 && bestN > 4) {
		dup := min(bestN*2, maxSearchChannels)
		bestS /= float64((dup + bestN - 1) / bestN)
		bestN = dup
	}
	return bestN, bestS
}

// log2i is floor(log2(v)) for v ≥ 1, -1 for v = 0.
func log2i(v uint64) int { return 63 - bits.LeadingZeros64(v) }
