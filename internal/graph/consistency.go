package graph

import (
	"fmt"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// maxContradictions bounds what CheckFabric reports.
const maxContradictions = 20

// CheckFabric lists where a fabric scan contradicts the inventories the
// graph holds: an HCA end that names a node and HCA whose inventory has a
// different port GUID, or a port GUID that the inventories place on another
// node or HCA than the scan says. A fabric that names unknown nodes or only
// GUIDs is not a contradiction (scans see hosts GIN does not manage).
func (g *Graph) CheckFabric(f *ginv1.FabricTopology) []error {
	// Port GUID → "node/hca" from the inventories.
	owner := map[string]string{}
	byNIC := map[string][]string{} // "node/hca" → its port GUIDs
	for _, name := range g.names.all() {
		n, ok := g.nodes.get(name)
		if !ok {
			continue
		}
		for i := range n.ports {
			p := &n.ports[i]
			guid := p.guidString()
			if guid == "" {
				continue
			}
			nic := n.nic(p)
			owner[guid] = nic
			byNIC[nic] = append(byNIC[nic], guid)
		}
	}
	var errs []error
	for i, l := range f.GetLinks() {
		for _, end := range []struct {
			side string
			e    *ginv1.FabricEndpoint
		}{{"a", l.GetA()}, {"b", l.GetB()}} {
			side, e := end.side, end.e
			if len(errs) >= maxContradictions {
				return errs
			}
			if e.GetKind() != ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_HCA {
				continue
			}
			guid := normGUID(e.GetGuid())
			if e.GetNodeName() != "" && e.GetHca() != "" {
				nic := e.GetNodeName() + "/" + e.GetHca()
				if guids, known := byNIC[nic]; known && !contains(guids, guid) {
					errs = append(errs, fmt.Errorf("fabric: links[%d].%s: the scan cables port GUID %s as %s, but %s's inventory has port GUID(s) %v",
						i, side, e.GetGuid(), nic, nic, guids))
					continue
				}
				if o, ok := owner[guid]; ok && o != nic {
					errs = append(errs, fmt.Errorf("fabric: links[%d].%s: the scan says port GUID %s is %s, the inventories say it is %s",
						i, side, e.GetGuid(), nic, o))
				}
			}
		}
	}
	return errs
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
