package graph

import (
	"fmt"
	"sort"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// nvPair is the NVLink connection between two GPUs of a node.
type nvPair struct {
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
		if g.pci != "" {
			byPCI[g.pci] = i
		}
	}
	direct := make([]int, k*k)   // UP links a→b
	reported := make([]int, k*k) // all links a→b
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
					key = "nvlink-domain:" + ga.domain
				}
				if !seen[key] {
					seen[key] = true
					ga.switches = append(ga.switches, key)
				}
			default:
				continue
			}
			if up {
				ga.linkMBps = minNZ(ga.linkMBps, l.BandwidthMbPerS)
			}
		}
		sort.Strings(ga.switches)
	}
	n.nv = make([]nvPair, k*k)
	for a := range k {
		for b := a + 1; b < k; b++ {
			d := max(direct[a*k+b], direct[b*k+a])
			if reported[a*k+b] > 0 && reported[b*k+a] > 0 {
				d = min(direct[a*k+b], direct[b*k+a])
			}
			p := nvPair{count: d}
			if sw := commonSwitch(n.gpus[a].switches, n.gpus[b].switches); sw != "" {
				if c := min(n.gpus[a].swUp, n.gpus[b].swUp); c > 0 {
					p.count += c
					p.viaSwitch = sw
				}
			}
			p.mbps = uint64(p.count) * minNZ(n.gpus[a].linkMBps, n.gpus[b].linkMBps)
			n.nv[a*k+b], n.nv[b*k+a] = p, p
		}
	}
	return nil
}

// commonSwitch returns the first element two sorted lists share, or "".
func commonSwitch(a, b []string) string {
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] == b[j]:
			return a[i]
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return ""
}

// nvlink returns the NVLink connection between GPUs a and b (slice indices).
func (n *node) nvlink(a, b int) nvPair { return n.nv[a*len(n.gpus)+b] }
