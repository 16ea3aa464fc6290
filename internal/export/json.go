package export

import (
	"encoding/json"
	"fmt"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/devid"
)

// JSONSchema names the schema of the document JSON writes. Fields may be
// added within a schema; renaming or removing one, or changing its meaning,
// changes the schema name.
const JSONSchema = "gin.topology.export/v1"

// Document is the JSON export of the model (its engine: Topology.Document
// and Topology.JSON). Network rates are in Gb/s
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

// Document is the JSON engine's document of the model. Ids are written as
// devid.GUIDText writes them; rates in Gb/s are the model's MB/s over 125.
func (t *Topology) Document() *Document {
	doc := &Document{Schema: JSONSchema, Nodes: make([]Node, 0, len(t.Hosts)), Switches: make([]Switch, 0, len(t.Fabric)), Links: []Link{}}
	for _, s := range t.Fabric {
		doc.Switches = append(doc.Switches, Switch{ID: devid.GUIDText(s.GUID), Name: s.Description, Tier: s.Tier, InFabric: !s.FromInventory,
			DownGbps: gbps(s.DownMBps), UpGbps: gbps(s.UpMBps)})
	}
	for _, h := range t.Hosts {
		n := Node{Name: h.Name, NVLinkDomain: h.NVLinkDomain, LeafName: h.LeafName,
			NVLinksUp: h.NVLinksUp, NVLinksTotal: h.NVLinksTotal,
			ComputePortsUp: h.ComputePortsUp, ComputePortsTotal: h.ComputePortsTotal,
			GPUs: make([]GPU, 0, len(h.GPUs)), NICs: make([]NIC, 0, len(h.HCAs))}
		if h.Leaf != "" {
			n.Leaf = devid.GUIDText(h.Leaf)
		}
		for _, gp := range h.GPUs {
			out := GPU{Index: gp.Index, UUID: gp.UUID, PCIBusID: gp.PCIBusID, NUMANode: gp.NUMANode, NVLinkDomain: gp.NVLinkDomain,
				NVSwitchLinksUp: gp.NVSwitchLinksUp, NVLinkMBps: gp.NVLinkMBps, NearestNIC: gp.NearestPort, NearestNICClass: gp.NearestClass}
			for _, p := range gp.Peers {
				out.Peers = append(out.Peers, NVLinkPeer{GPU: p.GPU, Count: p.Count, ViaSwitch: p.ViaSwitch, MBps: p.MBps})
			}
			n.GPUs = append(n.GPUs, out)
		}
		for _, hca := range h.HCAs {
			nic := NIC{Name: hca.Name, Role: roleText(hca.Role), NUMANode: hca.NUMANode, Ports: make([]Port, 0, len(hca.Ports))}
			for _, p := range hca.Ports {
				pt := Port{ID: portID(h, hca, p), Port: p.Port, Active: p.Active, RateGbps: gbps(p.RateMBps)}
				if p.GUID != "" {
					pt.GUID = devid.GUIDText(p.GUID)
				}
				if p.Rail >= 0 {
					r := p.Rail
					pt.Rail = &r
				}
				if p.Switch != "" {
					pt.Switch = devid.GUIDText(p.Switch)
					doc.Links = append(doc.Links, Link{Kind: "port", A: pt.ID, B: pt.Switch, RateGbps: gbps(p.LinkMBps)})
				}
				nic.Ports = append(nic.Ports, pt)
			}
			n.NICs = append(n.NICs, nic)
		}
		doc.Nodes = append(doc.Nodes, n)
	}
	for _, c := range t.Cables {
		doc.Links = append(doc.Links, Link{Kind: "switch", A: devid.GUIDText(c.Lower), B: devid.GUIDText(c.Upper), RateGbps: gbps(c.MBps)})
	}
	return doc
}

// JSON renders the model as an indented Document (schema JSONSchema),
// ending with a newline.
func (t *Topology) JSON() ([]byte, error) {
	out, err := json.MarshalIndent(t.Document(), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("export: json: %w", err)
	}
	return append(out, '\n'), nil
}

// portID is a port's id in the document: "<node>/<hca>/<port>".
func portID(h *Host, hca HostHCA, p HostPort) string {
	return fmt.Sprintf("%s/%s/%d", h.Name, hca.Name, p.Port)
}

// gbps is a rate in MB/s as Gb/s (cable signalling rates: 400 Gb/s is
// 50,000 MB/s).
func gbps(mbps uint64) uint64 { return mbps / 125 }

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
