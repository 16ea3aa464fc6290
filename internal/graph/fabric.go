package graph

import (
	"fmt"
	"sort"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// maxTierWalk bounds how many tiers a route climbs.
const maxTierWalk = 8

// fabricIndex is the scale-out network as the graph queries it: switches
// with tiers and uplink sets, and the switch each HCA port is cabled to.
type fabricIndex struct {
	switches []fswitch
	byGUID   map[string]int32
	attachN  map[uint64]portAttach // by HCA port GUID, when it is a 64-bit GUID
	attach   map[string]portAttach // by normalised port identity otherwise
}

// fswitch is one fabric switch.
type fswitch struct {
	guid, desc string
	tier       uint32
	parents    []int32  // switches one tier up, sorted
	parentMBps []uint64 // per parent: the narrowest cable to it
	downMBps   uint64   // capacity towards hosts / lower tiers
	upMBps     uint64   // capacity towards higher tiers
}

// oversub is the switch's downlink:uplink capacity ratio, 0 without uplinks.
func (s *fswitch) oversub() float64 {
	if s.upMBps == 0 {
		return 0
	}
	return float64(s.downMBps) / float64(s.upMBps)
}

// name is what operators call the switch: its description, else its GUID.
func (s *fswitch) name() string {
	if s.desc != "" {
		return s.desc
	}
	return "0x" + s.guid
}

// portAttach is where an HCA port is cabled.
type portAttach struct {
	sw   int32
	mbps uint64
}

// buildFabric indexes a fabric scan. Missing tiers (0) are derived: switches
// cabled to HCAs are leaves (1), and each further switch is one more than
// the lowest tier next to it. Links in state DOWN are left out.
func buildFabric(f *ginv1.FabricTopology) (*fabricIndex, error) {
	fx := &fabricIndex{byGUID: map[string]int32{}, attachN: map[uint64]portAttach{}, attach: map[string]portAttach{}}
	if f == nil {
		return fx, nil
	}
	fx.switches = make([]fswitch, len(f.Switches))
	for i, s := range f.Switches {
		if s == nil {
			return nil, fmt.Errorf("fabric: switches[%d]: null", i)
		}
		g := normGUID(s.Guid)
		if g == "" {
			return nil, fmt.Errorf("fabric: switches[%d].guid: empty", i)
		}
		if j, dup := fx.byGUID[g]; dup {
			return nil, fmt.Errorf("fabric: switches[%d].guid: %q is also switches[%d]", i, s.Guid, j)
		}
		fx.byGUID[g] = int32(i)
		fx.switches[i] = fswitch{guid: g, desc: s.Description, tier: s.Tier}
	}
	type swLink struct {
		a, b int32
		mbps uint64
	}
	var swLinks []swLink
	adj := make([][]int32, len(fx.switches))
	endpoint := func(i int, side string, e *ginv1.FabricEndpoint) (int32, bool, error) {
		if e == nil {
			return 0, false, fmt.Errorf("fabric: links[%d].%s: null", i, side)
		}
		switch e.Kind {
		case ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH:
			s, ok := fx.byGUID[normGUID(e.Guid)]
			if !ok {
				return 0, false, fmt.Errorf("fabric: links[%d].%s.guid: %q is not in switches", i, side, e.Guid)
			}
			return s, true, nil
		case ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_HCA:
			if normGUID(e.Guid) == "" {
				return 0, false, fmt.Errorf("fabric: links[%d].%s.guid: empty HCA port GUID", i, side)
			}
			return -1, false, nil
		default:
			return 0, false, fmt.Errorf("fabric: links[%d].%s.kind: %v is neither SWITCH nor HCA", i, side, e.Kind)
		}
	}
	for i, l := range f.Links {
		if l == nil {
			return nil, fmt.Errorf("fabric: links[%d]: null", i)
		}
		sa, aSw, err := endpoint(i, "a", l.A)
		if err != nil {
			return nil, err
		}
		sb, bSw, err := endpoint(i, "b", l.B)
		if err != nil {
			return nil, err
		}
		if l.State == ginv1.LinkState_LINK_STATE_DOWN {
			continue
		}
		mbps := uint64(l.RateGbps) * 125
		switch {
		case aSw && bSw:
			if sa != sb {
				swLinks = append(swLinks, swLink{sa, sb, mbps})
				adj[sa] = append(adj[sa], sb)
				adj[sb] = append(adj[sb], sa)
			}
		case aSw || bSw:
			sw, hcaEnd := sa, l.B
			if bSw {
				sw, hcaEnd = sb, l.A
			}
			g := normGUID(hcaEnd.Guid)
			pa := portAttach{sw: sw, mbps: mbps}
			dup := false
			if v, ok := guidNumber(g); ok {
				_, dup = fx.attachN[v]
				fx.attachN[v] = pa
			} else {
				_, dup = fx.attach[g]
				fx.attach[g] = pa
			}
			if dup {
				return nil, fmt.Errorf("fabric: links[%d]: HCA port %s is cabled twice", i, hcaEnd.Guid)
			}
			fx.switches[sw].downMBps += mbps
			if fx.switches[sw].tier == 0 {
				fx.switches[sw].tier = 1
			}
		default:
			return nil, fmt.Errorf("fabric: links[%d]: both ends are HCA ports", i)
		}
	}
	fx.deriveTiers(adj)
	type parentKey struct{ child, parent int32 }
	cable := map[parentKey]uint64{}
	for _, l := range swLinks {
		lo, hi := l.a, l.b
		tl, th := fx.switches[lo].tier, fx.switches[hi].tier
		if tl == th || tl == 0 || th == 0 {
			continue
		}
		if tl > th {
			lo, hi = hi, lo
		}
		fx.switches[lo].upMBps += l.mbps
		fx.switches[hi].downMBps += l.mbps
		k := parentKey{lo, hi}
		if old, ok := cable[k]; !ok || (l.mbps != 0 && l.mbps < old) {
			cable[k] = l.mbps
		}
	}
	for k := range cable {
		s := &fx.switches[k.child]
		s.parents = append(s.parents, k.parent)
	}
	for i := range fx.switches {
		s := &fx.switches[i]
		sort.Slice(s.parents, func(a, b int) bool { return s.parents[a] < s.parents[b] })
		s.parentMBps = make([]uint64, len(s.parents))
		for j, p := range s.parents {
			s.parentMBps[j] = cable[parentKey{int32(i), p}]
		}
	}
	return fx, nil
}

// deriveTiers gives tier-0 switches a tier by breadth-first search from the
// switches whose tier is known.
func (fx *fabricIndex) deriveTiers(adj [][]int32) {
	var queue []int32
	for i := range fx.switches {
		if fx.switches[i].tier != 0 {
			queue = append(queue, int32(i))
		}
	}
	sort.Slice(queue, func(a, b int) bool { return fx.switches[queue[a]].tier < fx.switches[queue[b]].tier })
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, t := range adj[s] {
			if fx.switches[t].tier == 0 {
				fx.switches[t].tier = fx.switches[s].tier + 1
				queue = append(queue, t)
			}
		}
	}
}

// route is the fabric part of a NET path between two switches.
type route struct {
	hops    int // switches crossed; 0 when no common ancestor was found
	mbps    uint64
	oversub float64
	via     []int32 // the switches above the leaves, in path order (for hops)
}

// route climbs from leaves a and b tier by tier until their ancestor sets
// meet. withVia records the switches crossed (one per tier).
func (fx *fabricIndex) route(a, b int32, withVia bool) route {
	if a == b {
		return route{hops: 1, oversub: 1}
	}
	sa, sb := &fx.switches[a], &fx.switches[b]
	over := max(sa.oversub(), sb.oversub())
	// Common case: two leaves under a common spine, no allocation.
	for i, j := 0, 0; i < len(sa.parents) && j < len(sb.parents); {
		switch {
		case sa.parents[i] == sb.parents[j]:
			r := route{hops: 3, oversub: over, mbps: minNZ(sa.parentMBps[i], sb.parentMBps[j])}
			if withVia {
				r.via = []int32{sa.parents[i]}
			}
			return r
		case sa.parents[i] < sb.parents[j]:
			i++
		default:
			j++
		}
	}
	// Higher tiers: grow both ancestor sets until they meet.
	setA, setB := []int32{a}, []int32{b}
	var mbps uint64
	var pathA, pathB []int32
	for level := 1; level <= maxTierWalk; level++ {
		var ma, mb uint64
		setA, ma = fx.parentsOf(setA, &over)
		setB, mb = fx.parentsOf(setB, &over)
		mbps = minNZ(mbps, minNZ(ma, mb))
		if len(setA) == 0 || len(setB) == 0 {
			break
		}
		if withVia {
			pathA, pathB = append(pathA, setA[0]), append(pathB, setB[0])
		}
		if c := commonID(setA, setB); c >= 0 {
			r := route{hops: 2*level + 1, mbps: mbps, oversub: over}
			if withVia {
				pathA[len(pathA)-1] = c
				r.via = append(r.via, pathA...)
				for i := len(pathB) - 2; i >= 0; i-- {
					r.via = append(r.via, pathB[i])
				}
			}
			return r
		}
	}
	return route{}
}

// parentsOf returns the sorted union of the parents of set, the narrowest
// uplink cable among them, and raises over to the worst oversubscription of
// the switches in set.
func (fx *fabricIndex) parentsOf(set []int32, over *float64) ([]int32, uint64) {
	seen := map[int32]bool{}
	var out []int32
	var mbps uint64
	for _, s := range set {
		sw := &fx.switches[s]
		*over = max(*over, sw.oversub())
		for j, p := range sw.parents {
			mbps = minNZ(mbps, sw.parentMBps[j])
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, mbps
}

func commonID(a, b []int32) int32 {
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
	return -1
}
