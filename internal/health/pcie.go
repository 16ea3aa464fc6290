package health

import (
	"fmt"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// laneGBps is one PCIe lane's data rate per direction in GB/s, after line
// coding (PCI-SIG: 2.5/5 GT/s with 8b/10b, 8/16/32 GT/s with 128b/130b,
// 64 and 128 GT/s with FLIT/PAM4 at 242/256).
var laneGBps = map[uint32]float64{1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563, 7: 15.125}

// linkGBps is a link's per-direction data rate; 0 when unknown.
func linkGBps(gen, width uint32) float64 { return laneGBps[gen] * float64(width) }

func linkText(gen, width uint32) string {
	switch {
	case gen == 0 && width == 0:
		return "unknown"
	case gen == 0:
		return fmt.Sprintf("x%d", width)
	case width == 0:
		return fmt.Sprintf("Gen%d", gen)
	}
	return fmt.Sprintf("Gen%d x%d", gen, width)
}

// pcieTree is a node's PCIe bridges by id.
type pcieTree map[string]*ginv1.PcieBridge

func treeOf(inv *ginv1.NodeInventory) pcieTree {
	t := pcieTree{}
	for _, b := range inv.GetPcieBridges() {
		t[b.GetId()] = b
	}
	return t
}

// up lists the bridges from parent up to the host bridge, nearest first;
// bounded by the tree's size (the master refuses cycles, this does not
// rely on it).
func (t pcieTree) up(parent string) []*ginv1.PcieBridge {
	var out []*ginv1.PcieBridge
	for cur := parent; cur != "" && len(out) <= len(t); {
		b, ok := t[cur]
		if !ok {
			break
		}
		out = append(out, b)
		cur = b.GetParentId()
	}
	return out
}

// between returns the bridges on the PCIe path from a device under parent
// a to one under parent b, below and including their lowest common bridge,
// and whether that common bridge is a PCIe switch (the path does not
// cross the CPU). Host bridges are left out.
func (t pcieTree) between(a, b string) (path []*ginv1.PcieBridge, underSwitch bool) {
	ua, ub := t.up(a), t.up(b)
	inB := map[string]int{}
	for i, x := range ub {
		inB[x.GetId()] = i
	}
	for i, x := range ua {
		j, ok := inB[x.GetId()]
		if !ok {
			continue
		}
		seen := map[string]bool{}
		for _, y := range append(append([]*ginv1.PcieBridge{}, ua[:i+1]...), ub[:j]...) {
			if y.GetKind() != ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_HOST_BRIDGE && !seen[y.GetId()] {
				seen[y.GetId()] = true
				path = append(path, y)
			}
		}
		k := x.GetKind()
		return path, k == ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH || k == ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH_DOWNSTREAM_PORT
	}
	return nil, false
}

// ACS control bits (PCIe base spec 7.7.8.3; lspci's ACSCtl names).
const (
	acsReqRedir   = 1 << 2
	acsCmpltRedir = 1 << 3
	acsEgressCtrl = 1 << 5
)

func acsRedirects(ctl uint32) bool { return ctl&(acsReqRedir|acsCmpltRedir|acsEgressCtrl) != 0 }

func acsText(ctl uint32) string {
	names := []string{"SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans"}
	s := ""
	for i, n := range names {
		if i > 0 {
			s += " "
		}
		s += n
		if ctl&(1<<i) != 0 {
			s += "+"
		} else {
			s += "-"
		}
	}
	return s
}

// NearestNIC is the compute HCA closest to GPU g on its node's PCIe tree:
// one under a common PCIe switch before one that meets it only at the host
// bridge, then the shortest path; nil when no compute HCA shares a root
// complex with the GPU. NCCL pairs each GPU with such a NIC; a channel
// through another is traffic crossing the CPU or the other socket.
func NearestNIC(inv *ginv1.NodeInventory, g *ginv1.Gpu) *ginv1.Hca {
	h, _, _ := nearestNIC(treeOf(inv), g, inv.GetHcas())
	return h
}
