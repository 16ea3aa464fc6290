package graph

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// nvPair is how the node keeps the NVLink connection between two GPUs
// (4 bytes; nvlink derives the rest).
type nvPair struct {
	count uint16 // UP links in the bonded set: at most 2 × maxNVLinksPerGPU
	via   uint16 // a switch both reach: index into node.nvsw plus one, 0 for direct links only
}

// nvLink is the NVLink connection between two GPUs of a node.
type nvLink struct {
	count     int    // UP links in the bonded set
	mbps      uint64 // count × per-link bandwidth
	viaSwitch string // a switch both reach ("" for direct links)
}

// buildNVLinks computes the NVLink adjacency of every GPU pair: direct links
// count on both ends (the smaller count when both ends report the pair);
// links through switches count min(UP switch links of A, of B) when both
// reach a common switch. Off-node switches (empty remote_pci_bus_id, MNNVL)
// count as one domain switch.
func (n *node) buildNVLinks(gs []*ginv1.Gpu) error {
	k := len(n.gpus)
	byPCI := make(map[string]int, k)
	for i, g := range n.gpus {
		if pci := g.pci.String(); pci != "" {
			byPCI[pci] = i
		}
	}
	direct := make([]int, k*k)   // UP links a→b
	reported := make([]int, k*k) // all links a→b
	keys := make([][]string, k)  // per GPU: the switches its UP links reach
	for _, g := range gs {
		a, _ := n.gpuSlot(g.Index)
		ga := &n.gpus[a]
		seen := map[string]bool{}
		for li, l := range g.Nvlinks {
			if l == nil {
				return fmt.Errorf("gpus[GPU%d].nvlinks[%d]: null", g.Index, li)
			}
			up := l.State == ginv1.LinkState_LINK_STATE_UP
			switch l.RemoteType {
			case ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_GPU:
				b, ok := byPCI[normPCI(l.RemotePciBusId)]
				if !ok {
					return fmt.Errorf("gpus[GPU%d].nvlinks[%d].remote_pci_bus_id: %q is not a GPU of the node", g.Index, li, l.RemotePciBusId)
				}
				if b == a {
					return fmt.Errorf("gpus[GPU%d].nvlinks[%d].remote_pci_bus_id: %q is the GPU itself", g.Index, li, l.RemotePciBusId)
				}
				reported[a*k+b]++
				if up {
					direct[a*k+b]++
				}
			case ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_SWITCH:
				if !up {
					continue
				}
				ga.swUp++
				key := normPCI(l.RemotePciBusId)
				if key == "" {
					key = "nvlink-domain:" + ga.domain.String()
				}
				if !seen[key] {
					seen[key] = true
					keys[a] = append(keys[a], key)
				}
			default:
				continue
			}
			if up {
				ga.linkMBps = minNZ(ga.linkMBps, l.BandwidthMbPerS)
			}
		}
	}
	n.indexSwitches(keys)
	n.nv = make([]nvPair, k*k)
	for a := range k {
		for b := a + 1; b < k; b++ {
			d := max(direct[a*k+b], direct[b*k+a])
			if reported[a*k+b] > 0 && reported[b*k+a] > 0 {
				d = min(direct[a*k+b], direct[b*k+a])
			}
			p := nvPair{count: uint16(d)}
			if sw, ok := commonSwitch(n.gpus[a].switches, n.gpus[b].switches); ok {
				if c := min(n.gpus[a].swUp, n.gpus[b].swUp); c > 0 {
					p.count += c
					p.via = sw + 1
				}
			}
			n.nv[a*k+b], n.nv[b*k+a] = p, p
		}
	}
	return nil
}

// indexSwitches makes node.nvsw the sorted union of the GPUs' switch keys
// and gives each GPU its switches as indices into it (ascending, so in key
// order). GPUs that reach the same switches share one index slice.
func (n *node) indexSwitches(keys [][]string) {
	var all []string
	for _, ks := range keys {
		all = append(all, ks...)
	}
	sort.Strings(all)
	all = slices.Compact(all)
	n.nvsw = make([]istr, len(all))
	for i, k := range all {
		n.nvsw[i] = intern(k)
	}
	shared := map[string][]uint16{}
	for a, ks := range keys {
		if len(ks) == 0 {
			continue
		}
		sort.Strings(ks)
		set := strings.Join(ks, "\x00")
		if idx, ok := shared[set]; ok {
			n.gpus[a].switches = idx
			continue
		}
		idx := make([]uint16, len(ks))
		for i, k := range ks {
			j, _ := slices.BinarySearch(all, k)
			idx[i] = uint16(j)
		}
		shared[set] = idx
		n.gpus[a].switches = idx
	}
}

// commonSwitch returns the first element two ascending index lists share.
func commonSwitch(a, b []uint16) (uint16, bool) {
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] == b[j]:
			return a[i], true
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return 0, false
}

// nvlink returns the NVLink connection between GPUs a and b (slice indices).
func (n *node) nvlink(a, b int) nvLink {
	p := n.nv[a*len(n.gpus)+b]
	l := nvLink{count: int(p.count), mbps: uint64(p.count) * minNZ(n.gpus[a].linkMBps, n.gpus[b].linkMBps)}
	if p.via > 0 {
		l.viaSwitch = n.nvsw[p.via-1].String()
	}
	return l
}

// switchKeys are a GPU's switch keys, in order.
func (n *node) switchKeys(g *gpu) []string {
	if len(g.switches) == 0 {
		return nil
	}
	out := make([]string, len(g.switches))
	for i, s := range g.switches {
		out[i] = n.nvsw[s].String()
	}
	return out
}
