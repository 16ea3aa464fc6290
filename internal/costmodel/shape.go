package costmodel

import (
	"errors"
	"fmt"

	"github.com/gin-topology/gin/internal/graph"
)

// maxSampledPairs bounds the cross-node node pairs ShapeOf inspects: ring
// neighbours in the given order (node i → i+1, and last → first), spread
// evenly over the list when there are more nodes than this.
const maxSampledPairs = 2048

// ShapeOf derives the Shape of a communicator over gpusPerNode GPUs (0: all)
// of each node from the graph. The ranks are the first gpusPerNode GPUs (by
// NVML index) of every node, nodes in the order given.
//
//   - Intra-node: the paths GPU i → GPU i+1 (the ring) on every node; the
//     class is NVLink only when all of them are, the bandwidth is the worst.
//   - CompCap: the lowest GPU compute capability; inferred from the NVLink
//     generation (see inferCompCap) when an inventory does not report it.
//   - NVSwitch: every used GPU's UP NVLinks go to switches.
//   - MNNVL: more than one node, all in the same non-empty NVLink domain.
//   - Inter-node: the rail-aligned paths GPU k of node i → GPU k of its
//     ring neighbour: NICsPerNode is the larger of the distinct source
//     NICs of the first node and the fewest compute ports up on a sampled
//     node, at most gpusPerNode;
//     the slowest bottleneck (NICGbps), the most switch hops and the worst
//     oversubscription.
//   - Ethernet: some sampled GPU's nearest compute port is Ethernet (RoCE).
//   - NICPath: the worst GPU→NIC end of the sampled paths (PCIe switch <
//     Grace C2C < host).
//   - Nominal: the same facts where nothing is degraded: the fastest
//     NVLink ring step of the first node's GPUs (all of them, not only
//     the used ones), the fastest sampled NET path and rail path between
//     the first two nodes (all their GPUs), the compute ports up or down.
func ShapeOf(g *graph.Graph, nodes []string, gpusPerNode int) (Shape, error) {
	if g == nil {
		return Shape{}, errors.New("costmodel: nil graph")
	}
	idx, all0, err := ranksOf(g, nodes, gpusPerNode)
	if err != nil {
		return Shape{}, err
	}
	ppn := len(idx[0])
	s := Shape{NRanks: len(nodes) * ppn, NNodes: len(nodes), IntraNVLink: true, NVSwitch: true, CompCap: 1 << 30}
	ref := func(node, k int) graph.GPURef { return graph.GPURef{Node: nodes[node], Index: idx[node][k]} }
	if err := s.intraNode(g, nodes, ppn, ref, all0); err != nil {
		return Shape{}, err
	}
	if len(nodes) == 1 {
		return s, nil
	}
	if err := s.interNode(g, nodes, ppn, ref, all0); err != nil {
		return Shape{}, err
	}
	return s, nil
}

// ranksOf checks the node list and picks the ranks: the first gpusPerNode
// GPUs (0: all of the first node's) of every node (idx[i] for nodes[i]),
// and every GPU of the first node (all0, for the nominal links).
func ranksOf(g *graph.Graph, nodes []string, gpusPerNode int) (idx [][]int, all0 []int, err error) {
	if len(nodes) == 0 {
		return nil, nil, errors.New("costmodel: no nodes")
	}
	if gpusPerNode < 0 {
		return nil, nil, fmt.Errorf("costmodel: gpus per node %d", gpusPerNode)
	}
	idx = make([][]int, len(nodes))
	seen := make(map[string]bool, len(nodes))
	for i, name := range nodes {
		if seen[name] {
			return nil, nil, fmt.Errorf("costmodel: node %s listed twice", name)
		}
		seen[name] = true
		gpus, ok := g.NodeGPUs(name)
		if !ok {
			return nil, nil, fmt.Errorf("costmodel: no node %q in the graph", name)
		}
		if len(gpus) == 0 {
			return nil, nil, fmt.Errorf("costmodel: node %s has no GPUs", name)
		}
		if i == 0 {
			all0 = gpus
			if gpusPerNode == 0 {
				gpusPerNode = len(gpus)
			}
		}
		if gpusPerNode > len(gpus) {
			return nil, nil, fmt.Errorf("costmodel: node %s has %d GPUs, the job uses %d per node", name, len(gpus), gpusPerNode)
		}
		idx[i] = gpus[:gpusPerNode]
	}
	return idx, all0, nil
}

// intraNode sets the intra-node facts of s (ShapeOf's first five items,
// and the nominal NVLink step): the ring GPU k → k+1 on every node.
func (s *Shape) intraNode(g *graph.Graph, nodes []string, ppn int, ref func(node, k int) graph.GPURef, all0 []int) error {
	domain := ""
	sameDomain := len(nodes) > 1
	for i := range nodes {
		maxLinks := 0
		for k := range ppn {
			l, err := g.GPULinks(ref(i, k))
			if err != nil {
				return fmt.Errorf("costmodel: %w", err)
			}
			if l.SwitchLinks == 0 {
				s.NVSwitch = false
			}
			if i == 0 && k == 0 {
				domain = l.Domain
			}
			if l.Domain == "" || l.Domain != domain {
				sameDomain = false
			}
			var links int
			if ppn > 1 {
				pth, err := g.Path(ref(i, k), ref(i, (k+1)%ppn))
				if err != nil {
					return fmt.Errorf("costmodel: %w", err)
				}
				if pth.Class != graph.ClassNVLink {
					s.IntraNVLink = false
				}
				links = pth.NVLinks
				gbps := float64(pth.BottleneckMBps) / 1000
				if s.IntraGBps == 0 || (gbps > 0 && gbps < s.IntraGBps) {
					s.IntraGBps = gbps
				}
			}
			maxLinks = max(maxLinks, links, l.SwitchLinks)
			cc := l.SM
			if cc == 0 {
				cc = inferCompCap(l, maxLinks)
			}
			s.CompCap = min(s.CompCap, cc)
			s.Ethernet = s.Ethernet || l.EthernetNIC
		}
	}
	if ppn == 1 {
		// No intra-node traffic; describe the GPU's own NVLinks.
		l, _ := g.GPULinks(ref(0, 0))
		s.IntraNVLink = l.SwitchLinks > 0 || l.LinkMBps > 0
		s.IntraGBps = float64(uint64(l.SwitchLinks)*l.LinkMBps) / 1000
	}
	if !s.IntraNVLink {
		s.NVSwitch = false
	}
	if ppn > 1 && s.IntraNVLink {
		nominal, err := nominalIntra(g, nodes[0], all0)
		if err != nil {
			return err
		}
		s.Nominal.IntraGBps = max(nominal, s.IntraGBps)
	}
	s.MNNVL = sameDomain
	return nil
}

// netSample gathers the bottlenecks of the sampled NET paths.
type netSample struct{ minMBps, maxMBps uint64 }

// add counts one sampled NET path into s and n.
func (s *Shape) add(n *netSample, pth graph.Path) {
	if pth.BottleneckMBps > 0 && (n.minMBps == 0 || pth.BottleneckMBps < n.minMBps) {
		n.minMBps = pth.BottleneckMBps
	}
	n.maxMBps = max(n.maxMBps, pth.BottleneckMBps)
	s.InterHops = max(s.InterHops, pth.SwitchHops)
	s.Oversubscription = max(s.Oversubscription, pth.Oversubscription)
	s.NICPath = max(s.NICPath, nicPath(pth))
}

// interNode sets the inter-node facts of s (ShapeOf's last items, and the
// nominal NICs and rails) from the rail-aligned paths between ring
// neighbours, at most maxSampledPairs pairs spread over the list.
func (s *Shape) interNode(g *graph.Graph, nodes []string, ppn int, ref func(node, k int) graph.GPURef, all0 []int) error {
	pairs := len(nodes) // ring neighbours, including last → first
	step := 1
	if pairs > maxSampledPairs {
		step = (pairs + maxSampledPairs - 1) / maxSampledPairs
	}
	nics := map[string]bool{}
	ports := -1    // fewest compute ports up on a sampled node
	portsAll := -1 // fewest compute ports, up or down, on a sampled node
	var n netSample
	for i := 0; i < pairs; i += step {
		j := (i + 1) % len(nodes)
		if len(nodes) == 2 && i == 1 {
			break // the same pair twice
		}
		if info, ok := g.NodeInfo(nodes[i]); ok {
			if ports < 0 || info.ComputePortsUp < ports {
				ports = info.ComputePortsUp
			}
			if portsAll < 0 || info.ComputePortsTotal < portsAll {
				portsAll = info.ComputePortsTotal
			}
		}
		for k := range ppn {
			pth, err := g.Path(ref(i, k), ref(j, k))
			if err != nil {
				return fmt.Errorf("costmodel: %w", err)
			}
			if pth.Class == graph.ClassMNNVL {
				continue
			}
			if i == 0 && pth.FromNIC != "" {
				nics[pth.FromNIC] = true
			}
			s.add(&n, pth)
		}
	}
	// The last pair (last → first) is always sampled.
	if step > 1 {
		for k := range ppn {
			pth, err := g.Path(ref(len(nodes)-1, k), ref(0, k))
			if err == nil && pth.Class != graph.ClassMNNVL {
				s.add(&n, pth)
			}
		}
	}
	// NCCL's rings use every compute NIC of the node (through PXN where a
	// GPU's nearest NIC is shared), up to one per rank: the graph's nearest
	// NIC per GPU undercounts where two GPUs share a PCIe switch with two
	// NICs (DGX A100).
	s.NICsPerNode = min(max(len(nics), ports), ppn)
	s.NICGbps = float64(n.minMBps) * 8 / 1000
	rails, err := nominalRails(g, nodes[0], nodes[1], all0, ppn)
	if err != nil {
		return err
	}
	s.Nominal.NICsPerNode = min(max(len(nics), portsAll), ppn)
	s.Nominal.NICGbps = float64(max(n.maxMBps, rails)) * 8 / 1000
	return nil
}

// nominalIntra is the fastest NVLink ring step (GB/s) between the GPUs
// of one node, all of them in NVML order: what a used GPU's step would
// be if none of its NVLinks were down.
func nominalIntra(g *graph.Graph, node string, gpus []int) (float64, error) {
	best := 0.0
	for k := range gpus {
		pth, err := g.Path(graph.GPURef{Node: node, Index: gpus[k]}, graph.GPURef{Node: node, Index: gpus[(k+1)%len(gpus)]})
		if err != nil {
			return 0, fmt.Errorf("costmodel: %w", err)
		}
		if pth.Class == graph.ClassNVLink {
			best = max(best, float64(pth.BottleneckMBps)/1000)
		}
	}
	return best, nil
}

// nominalRails is the fastest bottleneck (MB/s) of the rail paths GPU k of
// node a → GPU k of node b for the GPUs the job does not use (k ≥ used):
// the other rails' NICs show the rate of a NIC the job uses when it is
// degraded.
func nominalRails(g *graph.Graph, a, b string, gpusA []int, used int) (uint64, error) {
	gpusB, _ := g.NodeGPUs(b)
	var best uint64
	for k := used; k < min(len(gpusA), len(gpusB)); k++ {
		pth, err := g.Path(graph.GPURef{Node: a, Index: gpusA[k]}, graph.GPURef{Node: b, Index: gpusB[k]})
		if err != nil {
			return 0, fmt.Errorf("costmodel: %w", err)
		}
		if pth.Class != graph.ClassMNNVL {
			best = max(best, pth.BottleneckMBps)
		}
	}
	return best, nil
}

// nicPath classifies the GPU→NIC ends of a NET path: C2C when an end goes
// over its Grace C2C link (GPUDirect kept), host when GPUDirect RDMA is not
// possible, else a PCIe switch. A path without NICs says nothing.
func nicPath(p graph.Path) NICPath {
	switch {
	case p.FromNIC == "" || p.ToNIC == "":
		return NICPathSwitch
	case !p.GPUDirect:
		return NICPathHost
	case p.C2C:
		return NICPathC2C
	}
	return NICPathSwitch
}

// inferCompCap guesses the SM version class from a GPU's NVLinks, since the
// graph does not keep the inventory's compute capability: NVLink5 (50 GB/s
// per link) is Blackwell (100); 18 NVLink4 links is Hopper (90); any other
// NVLink or none is Ampere-class (80, NCCL's index for SM 80-89, which
// covers A100, RTX 3090 and L40S). An H100 PCIe card is therefore seen as
// 80; when the graph exposes the compute capability this should use it.
func inferCompCap(l graph.GPULinks, links int) int {
	switch {
	case l.LinkMBps >= 50000:
		return 100
	case links >= 18 && l.LinkMBps >= 25000:
		return 90
	}
	return 80
}
