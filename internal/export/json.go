package export

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/devid"
	"github.com/gin-topology/gin/internal/graph"
)

// JSONSchema names the schema of the document JSON writes. Fields may be
// added within a schema; renaming or removing one, or changing its meaning,
// changes the schema name.
const JSONSchema = "gin.topology.export/v1"

// Document is the JSON export of the graph. Network rates are in Gb/s
// (cable signalling rates), NVLink bandwidths in MB/s per direction.
// Switches are identified by "0x" + their 16-hex-digit node GUID (other
// identities, such as LLDP chassis ids, as they are), HCA ports by
// "<node>/<hca>/<port>".
type Document struct {
	Schema string `json:"schema"`
	// Nodes in name order.
	Nodes []Node `json:"nodes"`
	// Switches by tier (highest first), then id.
	Switches []Switch `json:"switches"`
	// Links: port–switch cables in node, HCA and port order, then
	// switch–switch cabling by lower switch and upper switch id.
	Links []Link `json:"links"`
}

// Node is one node.
type Node struct {
	Name string `json:"name"`
	// NVLinkDomain is the MNNVL clique "<cluster_uuid>.<clique_id>".
	NVLinkDomain string `json:"nvlink_domain,omitempty"`
	// Leaf is the switch id of the node's first compute port (rail 0), and
	// LeafName its description (or id).
	Leaf              string `json:"leaf,omitempty"`
	LeafName          string `json:"leaf_name,omitempty"`
	NVLinksUp         int    `json:"nvlinks_up"`
	NVLinksTotal      int    `json:"nvlinks_total"`
	ComputePortsUp    int    `json:"compute_ports_up"`
	ComputePortsTotal int    `json:"compute_ports_total"`
	GPUs              []GPU  `json:"gpus"`
	NICs              []NIC  `json:"nics"`
}

// GPU is one GPU of a node.
type GPU struct {
	Index        uint32 `json:"index"`
	UUID         string `json:"uuid"`
	PCIBusID     string `json:"pci_bus_id,omitempty"`
	NUMANode     int32  `json:"numa_node"` // -1 unknown
	NVLinkDomain string `json:"nvlink_domain,omitempty"`
	// NVSwitchLinksUp counts UP NVLinks to NVSwitches (local or off-node).
	NVSwitchLinksUp int `json:"nvswitch_links_up"`
	// NVLinkMBps is the smallest per-link bandwidth of its UP NVLinks.
	NVLinkMBps uint64       `json:"nvlink_mb_per_s,omitempty"`
	Peers      []NVLinkPeer `json:"nvlink_peers,omitempty"`
	// NearestNIC is the nearest compute port "<hca>/<port>", and
	// NearestNICClass its PCIe path class ("PIX", "PXB", "PHB", "NODE", "SYS").
	NearestNIC      string `json:"nearest_nic,omitempty"`
	NearestNICClass string `json:"nearest_nic_class,omitempty"`
}

// NVLinkPeer is a GPU's NVLink connection to another GPU of its node.
type NVLinkPeer struct {
	GPU       uint32 `json:"gpu"`
	Count     int    `json:"count"`
	ViaSwitch bool   `json:"via_nvswitch,omitempty"`
	MBps      uint64 `json:"mb_per_s,omitempty"`
}

// NIC is one HCA (PCI function).
type NIC struct {
	Name string `json:"name"`
	// Role: "compute", "storage" or "unspecified".
	Role     string `json:"role"`
	NUMANode int32  `json:"numa_node"`
	Ports    []Port `json:"ports"`
}

// Port is one HCA port.
type Port struct {
	ID       string `json:"id"`
	Port     uint32 `json:"port"`
	GUID     string `json:"guid,omitempty"`
	Active   bool   `json:"active"`
	RateGbps uint64 `json:"rate_gbps,omitempty"`
	// Rail is the port's position among the node's compute ports; absent
	// for other ports.
	Rail *int `json:"rail,omitempty"`
	// Switch is the id of the switch the port is cabled to.
	Switch string `json:"switch,omitempty"`
}

// Switch is one fabric switch.
type Switch struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// Tier: 1 leaf, 2 spine, 3 core; 0 unknown.
	Tier uint32 `json:"tier"`
	// InFabric is false for a switch known only from node inventories
	// (fabric neighbours) and not from a fabric scan.
	InFabric bool `json:"in_fabric"`
	// DownGbps and UpGbps are the capacities towards hosts (lower tiers)
	// and towards higher tiers.
	DownGbps uint64 `json:"down_gbps"`
	UpGbps   uint64 `json:"up_gbps"`
}

// Link is cabling between two endpoints.
type Link struct {
	// Kind: "port" (HCA port A to switch B) or "switch" (lower switch A to
	// upper switch B; parallel cables are one link with the narrowest rate).
	Kind     string `json:"kind"`
	A        string `json:"a"`
	B        string `json:"b"`
	RateGbps uint64 `json:"rate_gbps,omitempty"`
}

// Model builds the JSON document of the graph (also the model DOT draws).
func Model(g *graph.Graph) (*Document, error) {
	if g == nil {
		return nil, errors.New("export: nil graph")
	}
	doc := &Document{Schema: JSONSchema, Nodes: []Node{}, Switches: []Switch{}, Links: []Link{}}
	sws := g.Switches()
	known := make(map[string]bool, len(sws))
	for _, s := range sws {
		known[s.GUID] = true
		doc.Switches = append(doc.Switches, Switch{ID: devid.GUIDText(s.GUID), Name: s.Description, Tier: s.Tier, InFabric: true,
			DownGbps: s.DownMBps / 125, UpGbps: s.UpMBps / 125})
	}
	for _, name := range g.Nodes() {
		v, _ := g.NodeView(name)
		n := Node{Name: name, NVLinkDomain: v.Info.NVLinkDomain, LeafName: v.Info.LeafSwitch,
			NVLinksUp: v.Info.NVLinksUp, NVLinksTotal: v.Info.NVLinksTotal,
			ComputePortsUp: v.Info.ComputePortsUp, ComputePortsTotal: v.Info.ComputePortsTotal,
			GPUs: make([]GPU, 0, len(v.GPUs)), NICs: make([]NIC, 0, len(v.HCAs))}
		if leaf, ok := g.NodeLeaf(name); ok {
			n.Leaf = devid.GUIDText(leaf)
		}
		for _, gp := range v.GPUs {
			out := GPU{Index: gp.Index, UUID: gp.UUID, PCIBusID: gp.PCIBusID, NUMANode: gp.NUMANode, NVLinkDomain: gp.NVLinkDomain,
				NVSwitchLinksUp: gp.NVSwitchLinksUp, NVLinkMBps: gp.NVLinkMBps, NearestNIC: gp.NearestPort}
			if gp.NearestPort != "" {
				out.NearestNICClass = gp.NearestClass.String()
			}
			for _, p := range gp.Peers {
				out.Peers = append(out.Peers, NVLinkPeer{GPU: p.GPU, Count: p.Count, ViaSwitch: p.ViaSwitch != "", MBps: p.MBps})
			}
			n.GPUs = append(n.GPUs, out)
		}
		for _, h := range v.HCAs {
			nic := NIC{Name: h.Name, Role: roleText(h.Role), NUMANode: h.NUMANode, Ports: make([]Port, 0, len(h.Ports))}
			for _, p := range h.Ports {
				id := fmt.Sprintf("%s/%s/%d", name, h.Name, p.Port)
				pt := Port{ID: id, Port: p.Port, Active: p.Active, RateGbps: p.RateMBps / 125}
				if p.GUID != "" {
					pt.GUID = devid.GUIDText(p.GUID)
				}
				if p.Rail >= 0 {
					r := p.Rail
					pt.Rail = &r
				}
				if p.Switch != "" {
					pt.Switch = devid.GUIDText(p.Switch)
					if !p.SwitchInFabric && !known[p.Switch] {
						known[p.Switch] = true
						doc.Switches = append(doc.Switches, Switch{ID: pt.Switch, Tier: 1})
					}
					doc.Links = append(doc.Links, Link{Kind: "port", A: id, B: pt.Switch, RateGbps: p.LinkMBps / 125})
				}
				nic.Ports = append(nic.Ports, pt)
			}
			n.NICs = append(n.NICs, nic)
		}
		doc.Nodes = append(doc.Nodes, n)
	}
	var up []Link
	for _, s := range sws {
		for _, u := range s.Uplinks {
			up = append(up, Link{Kind: "switch", A: devid.GUIDText(s.GUID), B: devid.GUIDText(u.GUID), RateGbps: u.MBps / 125})
		}
	}
	sort.Slice(up, func(i, j int) bool {
		if up[i].A != up[j].A {
			return up[i].A < up[j].A
		}
		return up[i].B < up[j].B
	})
	doc.Links = append(doc.Links, up...)
	sort.SliceStable(doc.Switches, func(i, j int) bool {
		a, b := doc.Switches[i], doc.Switches[j]
		if a.Tier != b.Tier {
			return a.Tier > b.Tier
		}
		return a.ID < b.ID
	})
	return doc, nil
}

// JSON writes the graph as an indented Document (schema JSONSchema),
// ending with a newline.
func JSON(g *graph.Graph) ([]byte, error) {
	doc, err := Model(g)
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("export: json: %w", err)
	}
	return append(out, '\n'), nil
}

func roleText(r ginv1.HcaRole) string {
	switch r {
	case ginv1.HcaRole_HCA_ROLE_COMPUTE:
		return "compute"
	case ginv1.HcaRole_HCA_ROLE_STORAGE:
		return "storage"
	default:
		return "unspecified"
	}
}
