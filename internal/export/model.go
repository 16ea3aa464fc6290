package export

import (
	"errors"
	"fmt"
	"sort"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/devid"
	"github.com/gin-topology/gin/internal/graph"
)

// Topology is the exports' one intermediate model (topograph's shape: the
// graph is translated once, engines only render): the cluster's nodes and
// their hardware, its compute fabric merged into a tree of Slurm switches,
// and its MNNVL NVLink domains as blocks. SlurmTree renders Tree,
// SlurmBlock renders Blocks, NCCLTopo one Host (with its inventory), and a
// node's labels come from Place.
//
// It is built once per graph and never changed after: engines only read
// it (one instance may serve every engine, concurrently), and every slice
// and pointer in it belongs to it alone, not to the graph.
type Topology struct {
	// Nodes are the cluster's node names in natural order (node2 before
	// node10), each a valid Slurm hostlist name when built by Build.
	Nodes []string
	// Tree is the compute fabric as Slurm's topology/tree sees it.
	Tree Tree
	// Blocks are the MNNVL NVLink domains, one block each, in the order
	// of their first node; NoDomain the nodes in none (natural order).
	Blocks   []*Block
	NoDomain []string
	// Hosts are every node's hardware, in byte-wise name order (the
	// graph's order, the one the JSON document writes).
	Hosts []*Host
	// Fabric is every switch the exports know: the fabric scan's and those
	// only nodes' fabric neighbours name (FromInventory, tier 1), highest
	// tier first, then by id (devid.GUIDText).
	Fabric []FabricSwitch
	// Cables are the switch-to-switch cabling, one per lower and upper
	// switch with the narrowest cable's rate, by lower then upper id
	// (devid.GUIDText).
	Cables []Cable

	// hostIndex finds a Host by name.
	hostIndex map[string]*Host
	// nameErr says why the node names cannot go into a Slurm hostlist (nil
	// when they can); set only on models built without Build's checks.
	nameErr error
}

// Host is one node's hardware as the graph holds it.
type Host struct {
	Name string
	// NVLinkDomain is the node's MNNVL clique "<cluster_uuid>.<clique_id>",
	// "" when it is in none.
	NVLinkDomain string
	// Leaf is the id (normalised GUID) of the switch its first compute port
	// (rail 0) is cabled to, and LeafName that switch's description (else
	// its id); "" unknown.
	Leaf, LeafName                    string
	NVLinksUp, NVLinksTotal           int
	ComputePortsUp, ComputePortsTotal int
	// GPUs by NVML index; HCAs in natural name order (mlx5_2 before
	// mlx5_10).
	GPUs []HostGPU
	HCAs []HostHCA
}

// HostGPU is one GPU of a node.
type HostGPU struct {
	Index    uint32
	UUID     string
	PCIBusID string // canonical, "" unknown
	NUMANode int32  // -1 unknown
	// NVLinkDomain is "<cluster_uuid>.<clique_id>" when the GPU is in a
	// completed MNNVL clique.
	NVLinkDomain string
	// NVSwitchLinksUp counts UP NVLinks to NVSwitches (local or off-node).
	NVSwitchLinksUp int
	// NVLinkMBps is the smallest per-link bandwidth of its UP NVLinks.
	NVLinkMBps uint64
	// Peers are the other GPUs of the node it reaches over NVLink.
	Peers []GPUPeer
	// NearestPort is the nearest compute port "<hca>/<port>" ("" none) and
	// NearestClass its PCIe path class ("PIX", "PXB", "PHB", "NODE", "SYS").
	NearestPort, NearestClass string
	// PCIe is the GPU's way up the PCIe tree: its parent bridge first, its
	// host bridge last; nil when the inventory does not place it.
	PCIe []Bridge
}

// GPUPeer is a GPU's NVLink connection to another GPU of its node.
type GPUPeer struct {
	GPU       uint32 // the peer's NVML index
	Count     int    // bonded UP links
	ViaSwitch bool   // through an NVSwitch both reach
	MBps      uint64
}

// Bridge is one bridge of a node's PCIe tree. At most one kind is set (none
// when the inventory does not say).
type Bridge struct {
	ID                                           string // canonical bus id, or a host bridge's name
	HostBridge, RootPort, Switch, DownstreamPort bool
}

// HostHCA is one HCA (PCI function) of a node.
type HostHCA struct {
	Name     string
	Role     ginv1.HcaRole
	NUMANode int32 // -1 unknown
	Ports    []HostPort
	// PCIe is the HCA's way up the PCIe tree, as HostGPU.PCIe.
	PCIe []Bridge
}

// HostPort is one HCA port and where it meets the fabric.
type HostPort struct {
	Port     uint32
	GUID     string // normalised, "" unknown
	Active   bool
	RateMBps uint64
	// Rail is the port's position among the node's compute ports, -1 for
	// other ports.
	Rail int
	// Switch is the id (normalised GUID) of the switch the port is cabled
	// to, "" unknown; SwitchInFabric says whether the fabric scan knows it
	// (else only the node's fabric neighbours name it).
	Switch         string
	SwitchInFabric bool
	LinkMBps       uint64 // the cable's rate, 0 unknown
}

// Tree is the compute fabric merged into Slurm switches.
type Tree struct {
	// Switches lists every Slurm switch in the order topology.conf
	// writes them: leaf groups first, then level by level, the unknown
	// switch last.
	Switches []*TreeSwitch
	// Roots are the top switches: more than one when fabrics are not
	// connected (or nodes reach no known switch).
	Roots []*TreeSwitch
}

// TreeSwitch is one Slurm switch: a leaf group (Level 1, holding Nodes) or a
// merge of the fabric switches above its Children.
type TreeSwitch struct {
	Name     string
	Level    int      // 1 for leaf groups
	Nodes    []string // level 1: its nodes, natural order
	Children []*TreeSwitch
	Parent   *TreeSwitch // nil for a root
	// Fabric lists the fabric switches merged into it, by index order of
	// the graph's switch list (FromInventory ones after).
	Fabric  []FabricSwitch
	Comment []string // extra comment lines (the unknown switch's reason)
}

// FabricSwitch is one switch of the fabric.
type FabricSwitch struct {
	GUID        string // normalised (other identities lower-cased)
	Description string
	// Tier: 1 leaf, 2 spine, 3 core; 0 when nothing says.
	Tier uint32
	// FromInventory: named only by the nodes' own fabric neighbours, not
	// by a fabric scan.
	FromInventory bool
	// DownMBps and UpMBps are the capacities towards the hosts (or lower
	// tiers) and towards higher tiers; 0 for FromInventory switches.
	DownMBps, UpMBps uint64
}

// Cable is the cabling between a switch and one of a higher tier.
type Cable struct {
	Lower, Upper string // switch GUIDs
	MBps         uint64 // the narrowest of the parallel cables
}

// Block is one MNNVL NVLink domain.
type Block struct {
	Name   string // block01, block02, ... in the order of their first node
	Domain string // "<cluster_uuid>.<clique_id>"
	Nodes  []string
}

// ErrNoNodes: an empty graph has no topology to export (and an empty
// topology.conf would break slurmctld).
var ErrNoNodes = errors.New("the cluster has no nodes yet, and an empty topology.conf would break slurmctld")

// Build translates the graph into its Topology. It fails on an empty
// graph (ErrNoNodes) and on node names that are not valid hostlist names,
// which the Slurm formats and node labels cannot carry. (JSON, DOT and
// NCCLTopo, which can, render the same model built without the two checks:
// an empty cluster still has a JSON document.)
func Build(g *graph.Graph) (*Topology, error) {
	if g == nil || g.Len() == 0 {
		return nil, ErrNoNodes
	}
	t := newTopology(g)
	if t.nameErr != nil {
		return nil, t.nameErr
	}
	return t, nil
}

// newTopology builds the model of g (not nil), whatever its node names. The
// graph is read here and in hostTopology only (buildTree gets its switch
// list from here); everything else works on the model.
func newTopology(g *graph.Graph) *Topology {
	names := g.Nodes() // byte-wise order
	t := &Topology{nameErr: checkNodeNames(names), hostIndex: make(map[string]*Host, len(names))}
	for _, name := range names {
		h := hostTopology(g, name).Hosts[0]
		t.Hosts = append(t.Hosts, h)
		t.hostIndex[name] = h
	}
	t.Nodes = append([]string(nil), names...)
	sortNatural(t.Nodes)
	sws := g.Switches()
	t.Fabric, t.Cables = t.buildFabric(sws)
	t.Tree = buildTree(sws, t)
	t.Blocks, t.NoDomain = t.buildBlocks()
	return t
}

// hostTopology is the part of g's model that one node's NCCL topology
// reads: that node's Host alone (as Build's model holds it), nothing of the
// cluster. NCCLTopo(g, inv) renders it so that one node's file does not
// copy every node's hardware (100 times the work at 256 nodes).
func hostTopology(g *graph.Graph, node string) *Topology {
	t := &Topology{hostIndex: map[string]*Host{}}
	if v, ok := g.NodeView(node); ok {
		h := hostOf(v)
		if leaf, ok := g.NodeLeaf(node); ok {
			h.Leaf = leaf
		}
		t.Hosts = []*Host{h}
		t.hostIndex[node] = h
	}
	return t
}

// hostOf copies one node's view into the model.
func hostOf(v graph.NodeView) *Host {
	h := &Host{Name: v.Name, NVLinkDomain: v.Info.NVLinkDomain, LeafName: v.Info.LeafSwitch,
		NVLinksUp: v.Info.NVLinksUp, NVLinksTotal: v.Info.NVLinksTotal,
		ComputePortsUp: v.Info.ComputePortsUp, ComputePortsTotal: v.Info.ComputePortsTotal,
		GPUs: make([]HostGPU, 0, len(v.GPUs)), HCAs: make([]HostHCA, 0, len(v.HCAs))}
	for _, gp := range v.GPUs {
		out := HostGPU{Index: gp.Index, UUID: gp.UUID, PCIBusID: gp.PCIBusID, NUMANode: gp.NUMANode, NVLinkDomain: gp.NVLinkDomain,
			NVSwitchLinksUp: gp.NVSwitchLinksUp, NVLinkMBps: gp.NVLinkMBps, NearestPort: gp.NearestPort, PCIe: bridgesOf(gp.PCIe)}
		if gp.NearestPort != "" {
			out.NearestClass = gp.NearestClass.String()
		}
		for _, p := range gp.Peers {
			out.Peers = append(out.Peers, GPUPeer{GPU: p.GPU, Count: p.Count, ViaSwitch: p.ViaSwitch != "", MBps: p.MBps})
		}
		h.GPUs = append(h.GPUs, out)
	}
	for _, hv := range v.HCAs {
		hca := HostHCA{Name: hv.Name, Role: hv.Role, NUMANode: hv.NUMANode, Ports: make([]HostPort, 0, len(hv.Ports)), PCIe: bridgesOf(hv.PCIe)}
		for _, p := range hv.Ports {
			hca.Ports = append(hca.Ports, HostPort{Port: p.Port, GUID: p.GUID, Active: p.Active, RateMBps: p.RateMBps, Rail: p.Rail,
				Switch: p.Switch, SwitchInFabric: p.SwitchInFabric, LinkMBps: p.LinkMBps})
		}
		h.HCAs = append(h.HCAs, hca)
	}
	return h
}

// buildFabric lists the fabric's switches, then those known only from the
// hosts' ports (in host, HCA and port order), sorted by tier and id, and
// the switches' uplinks.
func (t *Topology) buildFabric(sws []graph.SwitchView) ([]FabricSwitch, []Cable) {
	fabric := make([]FabricSwitch, 0, len(sws))
	var cables []Cable
	known := make(map[string]bool, len(sws))
	for _, s := range sws {
		known[s.GUID] = true
		fabric = append(fabric, FabricSwitch{GUID: s.GUID, Description: s.Description, Tier: s.Tier, DownMBps: s.DownMBps, UpMBps: s.UpMBps})
		for _, u := range s.Uplinks {
			cables = append(cables, Cable{Lower: s.GUID, Upper: u.GUID, MBps: u.MBps})
		}
	}
	for _, h := range t.Hosts {
		for _, hca := range h.HCAs {
			for _, p := range hca.Ports {
				if p.Switch != "" && !p.SwitchInFabric && !known[p.Switch] {
					known[p.Switch] = true
					fabric = append(fabric, FabricSwitch{GUID: p.Switch, Tier: 1, FromInventory: true})
				}
			}
		}
	}
	// Sorted by the ids the formats write (computed once per switch).
	ids := make(map[string]string, len(fabric))
	id := func(guid string) string {
		s, ok := ids[guid]
		if !ok {
			s = devid.GUIDText(guid)
			ids[guid] = s
		}
		return s
	}
	sort.SliceStable(fabric, func(i, j int) bool {
		a, b := &fabric[i], &fabric[j]
		if a.Tier != b.Tier {
			return a.Tier > b.Tier
		}
		return id(a.GUID) < id(b.GUID)
	})
	sort.SliceStable(cables, func(i, j int) bool {
		la, lb := id(cables[i].Lower), id(cables[j].Lower)
		if la != lb {
			return la < lb
		}
		return id(cables[i].Upper) < id(cables[j].Upper)
	})
	return fabric, cables
}

func bridgesOf(bs []graph.PCIeBridgeView) []Bridge {
	if bs == nil {
		return nil
	}
	out := make([]Bridge, len(bs))
	for i, b := range bs {
		out[i] = Bridge{ID: b.ID, HostBridge: b.HostBridge, RootPort: b.RootPort, Switch: b.Switch, DownstreamPort: b.DownstreamPort}
	}
	return out
}

// Host is the named node's hardware; ok is false for a node not in the
// topology.
func (t *Topology) Host(name string) (h *Host, ok bool) {
	h, ok = t.hostIndex[name]
	return h, ok
}

// Place is where node sits: its Slurm switches from its leaf group up to
// its root, and its block (nil when it is in no NVLink domain). ok is
// false for a node not in the topology.
func (t *Topology) Place(node string) (path []*TreeSwitch, block *Block, ok bool) {
	for _, s := range t.Tree.Switches {
		if s.Level == 1 && contains(s.Nodes, node) {
			for v := s; v != nil; v = v.Parent {
				path = append(path, v)
			}
			break
		}
	}
	for _, b := range t.Blocks {
		if contains(b.Nodes, node) {
			block = b
			break
		}
	}
	return path, block, path != nil
}

// slurmReady says why t cannot be written for Slurm: no nodes, or a node
// name no hostlist can carry.
func (t *Topology) slurmReady() error {
	if len(t.Nodes) == 0 {
		return ErrNoNodes
	}
	return t.nameErr
}

// blockName is the i-th block's name (from 0).
func blockName(i int) string { return fmt.Sprintf("block%02d", i+1) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// buildBlocks groups the nodes (natural order) by NVLink domain.
func (t *Topology) buildBlocks() (blocks []*Block, none []string) {
	byDomain := map[string]*Block{}
	for _, n := range t.Nodes {
		d := t.hostIndex[n].NVLinkDomain
		if d == "" {
			none = append(none, n)
			continue
		}
		b := byDomain[d]
		if b == nil {
			b = &Block{Domain: d}
			byDomain[d] = b
			blocks = append(blocks, b)
		}
		b.Nodes = append(b.Nodes, n)
	}
	for i, b := range blocks {
		b.Name = blockName(i)
	}
	return blocks, none
}
