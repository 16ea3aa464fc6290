package costmodel

import (
	"errors"
	"fmt"
	"math"
)

// GIN's additions to NCCL's model. Each is a physical constant, documented
// in docs/CALIBRATION.md; none is fitted to a single calibration point
// except NVLinkLLStepUs, which is the slope of a 7-point series, and
// NVLSSwitchFactor and NVLSChunkUs, fitted on half of one published H100
// curve and checked on the other half, a held-out H100 run and the GB200 NVL72
// curve, and NVLSTreeFillUs, fitted on half of three published 10-node H100
// curves and checked on the other half.
const (
	// NICGBpsPerGbps is the effective busbw a NIC delivers per Gb/s of
	// line rate: 12 GB/s per 100 Gb/s (NCCL maintainers, nccl-tests#119,
	// #29; also NCCL's own NET_BW constant).
	NICGBpsPerGbps = 0.12
	// SwitchHopLatencyUs is the latency added per fabric switch crossed
	// beyond the first (a leaf): ~0.13-0.3 µs port-to-port on NDR/HDR IB
	// switches plus cable and queueing under collective load. NCCL's NET
	// latencies already contain one switch.
	SwitchHopLatencyUs = 0.5
	// EthernetLatencyUs is added per inter-node step on RoCE fabrics
	// (Ethernet switch cut-through latency and the RoCE NIC pipeline are
	// each several hundred ns above InfiniBand's).
	EthernetLatencyUs = 1.0
	// NVLinkLLStepUs is the latency of one LL/LL128 ring or tree step over
	// NVLink on pre-Hopper GPUs as measured with one channel on DGX-A100
	// (nccl-tests#123: 8-byte all_reduce 10.0 µs on 2 GPUs to 33.7 µs on
	// 8, i.e. ≈1.9 µs per step). NCCL's constant (0.6 µs) is the pipelined
	// per-step cost; GIN uses the larger of the two on SM < 90. Hopper and
	// later keep NCCL's constants (no public one-channel measurement).
	NVLinkLLStepUs = 1.9
	// NVLSSwitchFactor scales NCCL's NVLS efficiency (0.85 on SM90, 0.74
	// on SM100) in GIN's model: NVLink SHARP all_reduce is limited by the
	// NVSwitch's multimem load-reduce/store path, which NCCL's model prices
	// as 0.85 of the ring graph's channels. With NVLSChunkUs it is fitted
	// (linear least squares, TestNVLSFit) on every other size of the
	// published 1 × 8 H100 NCCL 2.29.2 all_reduce curve; held out: the
	// sizes between and nccl-tests#212's 8×H100 peak; checked on the
	// 72-GPU GB200 NVL72 curve (coreweave/nccl-tests#43), docs/CALIBRATION.md.
	NVLSSwitchFactor = 0.8604
	// NVLSChunkUs is the cost of one NVLS chunk (a loop is nvlsChannels ×
	// nHeads chunks, and a channel takes its nHeads chunks of a loop one
	// after another, each with its own flag handshake over NVLink) for the
	// loops beyond those of the full 128 KiB chunk: what makes NCCL's
	// smaller chunks for mid-size messages slower per byte (nvls.go).
	// Fitted with NVLSSwitchFactor.
	NVLSChunkUs = 0.4375
	// NVLSTreeFillUs scales the time an NVLSTree all_reduce across 4 or
	// more SM90 nodes takes beyond NCCL's α-β form: NVLSTreeFillUs × (1 −
	// 2/heads) per operation, heads the NVLS heads of a node (nvls.go,
	// nvlsTreeFillUs). Fitted, with the form, by weighted least squares
	// (TestNVLSTreeFit) on every other size of the published 10 × 8, 10 × 4
	// and 10 × 2 H100 NCCL 2.29.2 all_reduce curves; held out: the sizes
	// between.
	NVLSTreeFillUs = 536.2
)

// params is a Shape translated into NCCL's model inputs.
type params struct {
	gin            bool
	nRanks, nNodes int
	ppn            int
	cc, ccIdx      int
	scale          int
	treeScale      int // the scale of the tree caps (GIN: 3 nodes as 2)
	intraHW        int
	nCh            int     // ring (and NVLS) graph channels
	bw             float64 // ring graph per-channel GB/s
	treeCh         int
	treeBw         float64
	ll128          bool
	nvls, nvlsTree bool
	nvlsHeads      int // NVLS heads per node across nodes: one per NIC, at most ppn
	pat            bool
	latInter       float64 // graph.latencyInter (+ GIN's fabric latency)
	stepFloor      float64 // GIN: NVLink LL/LL128 step latency floor
}

var errShape = errors.New("costmodel: invalid shape")

// derive translates a Shape; gin adds GIN's fabric adjustments.
func derive(s Shape, gin bool) (params, error) {
	if s.NRanks < 1 || s.NNodes < 1 || s.NRanks < s.NNodes || s.NRanks%s.NNodes != 0 {
		return params{}, fmt.Errorf("%w: %d ranks over %d nodes", errShape, s.NRanks, s.NNodes)
	}
	p := params{gin: gin, nRanks: s.NRanks, nNodes: s.NNodes, ppn: s.NRanks / s.NNodes, cc: s.CompCap}
	if p.cc == 0 {
		p.cc = 80
	}
	p.ccIdx = ccIndex(p.cc)
	// An MNNVL clique is one NVLink domain: NCCL (2.21+) runs it as one
	// node with nRanks local ranks over NVLink; both models see it so.
	mnnvl := s.MNNVL && s.NNodes > 1 && s.IntraNVLink
	if mnnvl {
		p.nNodes, p.ppn = 1, s.NRanks
	}
	p.scale = min(p.nNodes-1, 2)
	p.treeScale = p.scale
	if gin && p.nNodes == 3 {
		// A 3-node double binary tree is one level deep, as a 2-node one
		// is: GIN prices its channels with NCCL's 2-node tree caps, not
		// the caps NCCL tuned for deep (4+ node) trees.
		p.treeScale = 1
	}
	p.intraHW = hwPCI
	intraTotal := s.IntraGBps * pciFactor
	if s.IntraNVLink {
		p.intraHW = hwNVLink
		intraTotal = s.IntraGBps * nvlinkFactor(p.cc)
	}
	if s.IntraGBps <= 0 {
		intraTotal = 24 // NCCL's PCI_BW when nothing is known
	}
	if p.nNodes == 1 {
		p.nCh, p.bw = search(p.cc, false, limit{1, intraTotal})
		if p.ppn == 1 {
			p.nCh, p.bw = 1, intraTotal
		}
		p.treeCh, p.treeBw = p.nCh, p.bw
	} else {
		nic := s.NICGbps * NICGBpsPerGbps
		if gin && s.InterHops > 1 && s.Oversubscription > 1 {
			nic /= s.Oversubscription
		}
		nics := max(s.NICsPerNode, 1)
		lims := []limit{{nics, nic}}
		if p.ppn > 1 {
			lims = append(lims, limit{1, intraTotal})
		}
		p.nCh, p.bw = search(p.cc, true, lims...)
		p.treeCh, p.treeBw = p.nCh, p.bw
		if k := treeNICFactor(p.nNodes, p.nRanks); gin && k > 1 {
			// A double binary tree over 2 or 3 nodes sends fewer bytes per
			// node over the NICs than a ring: the tree graph's channels may
			// carry k times the NIC rate before the NICs bind.
			lims[0].bw *= k
			p.treeCh, p.treeBw = search(p.cc, true, lims...)
		}
		if gin {
			p.latInter = SwitchHopLatencyUs * float64(max(s.InterHops-1, 0))
			if s.Ethernet {
				p.latInter += EthernetLatencyUs
			}
		}
	}
	// LL128: on by default with NVLink inside the node (typeIntra ≤ NVB) or
	// one GPU per node and, across nodes, NICs the GPUs reach through a
	// PCIe switch (typeInter ≤ PXB) or, on SM90+, over C2C (P2C ≤ PXN).
	p.ll128 = (s.IntraNVLink || p.ppn == 1) && p.cc >= 70
	if p.nNodes > 1 && (s.NICPath == NICPathHost || s.NICPath == NICPathC2C && p.cc < 90) {
		p.ll128 = false
	}
	// NVLS needs NVSwitches, SM90+ and at least nvlsMinGPUs GPUs of the
	// NVLink domain in the communicator (NCCL's ncclNvlsInit); NVLS proper
	// on one NVLink domain, NVLSTree across nodes.
	nvlsOK := s.NVSwitch && s.IntraNVLink && p.cc >= 90 && p.ppn >= nvlsMinGPUs
	p.nvls = nvlsOK && p.nNodes == 1
	p.nvlsTree = nvlsOK && p.nNodes > 1
	p.nvlsHeads = min(max(s.NICsPerNode, 1), p.ppn)
	p.pat = p.ppn == 1 && p.nRanks > 1 && p.cc >= 60
	if gin && p.cc < 90 && p.intraHW == hwNVLink {
		p.stepFloor = NVLinkLLStepUs
	}
	return p, nil
}

// treeNICFactor is how many times the NIC rate a tree graph's channels
// may carry in GIN's model, from the bytes per node a double binary tree
// all_reduce sends over the NICs against a ring of nRanks (2(n-1)/n·S per
// node). Each tree carries half the data, S/2 up and S/2 down an edge; a
// node's NICs carry its edges of both trees: on 2 nodes one edge in each
// tree (S per node), on 3 nodes the root of one tree (2 edges) is a leaf
// of the other (1 edge), 1.5·S; from 4 nodes on some node has a parent and
// two children in one tree and is a leaf in the other, 2·S: no gain (1,
// NCCL's own tree bandwidth stands). The ratio is divided by NCCL's tree
// efficiency (0.92), which prices the tree's intra-node chain, not its
// NICs: NIC-bound trees measure the NIC rate over their bytes
// (nccl-tests#22: 2 nodes × 8 GPUs, tree 2.0× ring; nccl#1801: 3 nodes,
// tree 1.19-1.23× ring).
func treeNICFactor(nNodes, nRanks int) float64 {
	var treeBytes float64
	switch nNodes {
	case 2:
		treeBytes = 1
	case 3:
		treeBytes = 1.5
	default:
		return 1
	}
	return 2 * float64(nRanks-1) / float64(nRanks) / treeBytes / treeEfficiency
}

// treeEfficiency is NCCL's tree bandwidth factor (busBw × 0.92).
const treeEfficiency = 0.92

func nsteps(coll, n int) int {
	switch coll {
	case collAllReduce:
		return 2 * (n - 1)
	case collAllGather, collReduceScatter:
		return n - 1
	}
	return n
}

// busBW is NCCL's bus bandwidth of a cell converted to algorithm bandwidth
// (GB/s); 0 marks the cell unusable.
func (p *params) algBW(coll, a, pr int, bytes uint64) (float64, int) {
	nCh, bw := p.nCh, p.bw
	if a == algoTree {
		nCh, bw = p.treeCh, p.treeBw
	}
	if nCh == 0 || bw <= 0 {
		return 0, 0
	}
	busBw := float64(nCh) * bw
	llIdx := p.ccIdx
	if p.nNodes > 1 {
		llIdx = 0 // NCCL's multi-node row: 0 for Intel CPUs (assumed)
	}
	llMax := llMaxBws[llIdx][p.scale]
	ar := coll == collAllReduce
	agrs := coll == collAllGather || coll == collReduceScatter
	switch a {
	case algoRing:
		switch pr {
		case protoLL:
			busBw = min(llMax, busBw*0.5)
		case protoLL128:
			if !p.ll128 {
				return 0, 0
			}
			busBw = min(busBw*0.92, float64(nCh)*perChMaxRingLL128[p.ccIdx][p.scale])
		}
	case algoTree:
		if !ar {
			return 0, 0
		}
		busBw = min(busBw*treeEfficiency, float64(nCh)*perChMaxTree[p.ccIdx][p.treeScale])
		switch pr {
		case protoLL:
			busBw = min(busBw/3.8, llMax)
		case protoLL128:
			if !p.ll128 {
				return 0, 0
			}
			f := 120.0 / 128
			if p.nNodes == 1 {
				f = 7.0 / 9
			}
			busBw = min(busBw*f, float64(nCh)*perChMaxTreeLL128[p.ccIdx][p.treeScale])
		}
		if ls := log2i(bytes >> 6); ls >= 0 && ls < len(treeCorrection[pr]) {
			busBw *= treeCorrection[pr][ls]
		}
	case algoNVLS, algoNVLSTree:
		if pr != protoSimple || nCh < 2 {
			return 0, 0
		}
		if a == algoNVLS && (!p.nvls || !(ar || agrs)) || a == algoNVLSTree && (!p.nvlsTree || !ar) {
			return 0, 0
		}
		intra := bw * nvlsEfficiency[p.ccIdx] * float64(nCh-1) / float64(nCh)
		if p.gin {
			intra *= NVLSSwitchFactor
		}
		if ar {
			intra *= 2
			if p.gin && a == algoNVLS {
				intra *= nvlsGPUCount(p.ppn)
			}
		} else {
			intra *= float64(p.ppn-1) / float64(p.ppn)
		}
		per := intra
		if a == algoNVLSTree {
			inter := bw
			if p.nNodes <= 2 {
				inter *= 2
			}
			per = min(intra, inter, perChMaxNVLSTree[p.ccIdx][p.scale])
		}
		busBw = float64(nCh) * per
	case algoPAT:
		if pr != protoSimple || !p.pat || !agrs {
			return 0, 0
		}
		busBw *= 0.75
	default: // CollNet: not enabled (no SHARP switches modelled)
		return 0, 0
	}
	if busBw <= 0 {
		return 0, 0
	}
	switch {
	case agrs && a != algoRing:
		// NCCL skips the conversion for non-ring AG/RS.
	case a == algoRing || a == algoNVLS || a == algoNVLSTree:
		busBw *= float64(p.nRanks) / float64(nsteps(coll, p.nRanks))
	default:
		busBw *= 0.5
	}
	return busBw, nCh
}

// latency is NCCL's latency of a cell, µs.
func (p *params) latency(coll, a, pr int, bytes uint64, nCh int) float64 {
	intraLat := hwLat[p.intraHW][a][pr]
	if p.stepFloor > 0 && pr != protoSimple && (a == algoRing || a == algoTree) {
		intraLat = math.Max(intraLat, p.stepFloor)
	}
	hw := p.intraHW
	if p.nNodes > 1 {
		hw = hwNet
	}
	interLat := hwLat[hwNet][a][pr]
	if p.ppn == 1 {
		interLat = hwLat[hwNet][algoTree][pr]
	}
	interLat += p.latInter
	if pr == protoSimple {
		interLat += p.latInter
	}
	base := baseLat[a][pr]
	n := p.nRanks
	lg := float64(max(log2i(uint64(p.nNodes)), 0))
	var lat float64
	switch a {
	case algoRing:
		if coll == collBroadcast || coll == collReduce {
			lat = base + hwLat[hw][algoRing][pr] // sameChannels graphs
			if p.nNodes > 1 {
				lat += p.latInter
			}
			break
		}
		steps := nsteps(coll, n)
		inter := 0
		if p.nNodes > 1 {
			inter = p.nNodes - 1
			if coll == collAllReduce {
				inter *= 2
			}
		}
		overhead := 0.0
		if p.nNodes > 1 {
			overhead = netOverheadUs
			if pr == protoSimple {
				overhead *= 3
			}
		}
		lat = base + float64(steps-inter)*math.Max(intraLat, overhead) + float64(inter)*interLat
		if pr == protoSimple && coll == collAllReduce && p.nNodes > 1 && nCh > 0 && bytes/uint64(nCh*n) >= 64 {
			if p.cc >= 80 {
				lat *= 1.4
			} else {
				lat *= 1.9
			}
		}
	case algoTree:
		lat = base + 2*(float64(p.ppn-1)*intraLat+lg*interLat)
	case algoNVLS:
		lat = hwLat[hwNVLink][algoNVLS][pr]
		if p.nNodes > 1 {
			lat += interLat
		}
	case algoNVLSTree:
		lat = base + hwLat[hwNVLink][algoNVLSTree][pr] + 2*lg*interLat
	case algoPAT:
		lat = base + lg*interLat/3.5 + float64(n)*2.8
	}
	return lat
}

// cell is the time of one (algo, proto) in µs and the channels NCCL would
// use; ok is false for cells NCCL marks -1.
func (p *params) cell(coll, a, pr int, bytes uint64) (us float64, ch int, ok bool) {
	if p.nRanks == 1 {
		return 0, 1, a == algoRing && pr == protoSimple
	}
	bw, ch := p.algBW(coll, a, pr, bytes)
	if bw <= 0 {
		return 0, 0, false
	}
	us = p.latency(coll, a, pr, bytes, ch)*numPipeOpsLat + float64(bytes)/(1000*bw)
	if p.gin && a == algoNVLS {
		us += p.nvlsRampUs(bytes, bw)
	}
	if p.gin && a == algoNVLSTree {
		us += p.nvlsTreeFillUs()
	}
	return us, ch, true
}

// numPipeOpsLat is latCount for a lone collective (numPipeOps = 1) for
// every algorithm.
const numPipeOpsLat = 1
