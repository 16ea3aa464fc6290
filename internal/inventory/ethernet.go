package inventory

import ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"

// ComputeEthernet reports whether a node's compute ports (the ports of its
// HCAs of role COMPUTE, else of unspecified role; never storage) are all
// Ethernet (RoCE); false for a node without such ports. The placement
// estimate (internal/estimate) and the master's node heads
// (internal/state) read it.
func ComputeEthernet(inv *ginv1.NodeInventory) bool {
	for _, role := range []ginv1.HcaRole{ginv1.HcaRole_HCA_ROLE_COMPUTE, ginv1.HcaRole_HCA_ROLE_UNSPECIFIED} {
		ports, ethernet := 0, 0
		for _, h := range inv.GetHcas() {
			if h.GetRole() != role {
				continue
			}
			for _, p := range h.GetPorts() {
				ports++
				if p.GetLinkLayer() == ginv1.LinkLayer_LINK_LAYER_ETHERNET {
					ethernet++
				}
			}
		}
		if ports > 0 {
			return ethernet == ports
		}
	}
	return false
}
