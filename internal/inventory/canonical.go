package inventory

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/devid"
)

// idKind says what a device identity field holds, and so what its
// canonical form is and whether it may hold anything else.
type idKind int

const (
	// busID is a PCI bus id and nothing else (a device's own address, an
	// NVLink's remote end): canonical "0000:07:00.0".
	busID idKind = iota
	// busOrName is a PCI bus id or a name that is not one (a host bridge
	// "pci0000:15", an NVSwitch's UUID): bus ids are canonical, names kept.
	busOrName
	// guid is an InfiniBand GUID and nothing else (an HCA's node, system
	// image and port GUIDs): canonical "0x" and 16 lower-case hex digits
	// (devid.GUIDWire).
	guid
	// switchID is the switch an HCA port is cabled to: a GUID on
	// InfiniBand (canonical), an LLDP chassis id on Ethernet (kept as the
	// switch sent it: a MAC is not a GUID).
	switchID
)

// canonicalID returns the canonical form of s, a field of kind k, and
// whether s is acceptable for the field at all (when not, s itself). Empty
// means unknown and is kept.
func canonicalID(k idKind, s string) (string, bool) {
	if s == "" {
		return s, true
	}
	var c string
	var ok bool
	if k == busID || k == busOrName {
		c, ok = devid.PCIBusID(s)
	} else {
		c, ok = devid.GUIDWire(s)
	}
	switch {
	case ok:
		return c, true
	case k == busOrName || k == switchID: // a name, kept
		return s, true
	}
	return s, false // kept, for Validate to refuse
}

// idPath names an identity field as Validate does
// ("gpus[3].nvlinks[2].remote_pci_bus_id"), built only when asked for
// (Canonical runs on every inventory and needs no names).
type idPath struct {
	list  string // "gpus"
	i     int
	inner string // "nvlinks", or "" for a field of the list's element
	j     int
	leaf  string // "remote_pci_bus_id"
}

func (p idPath) String() string {
	s := fmt.Sprintf("%s[%d]", p.list, p.i)
	if p.inner != "" {
		s += fmt.Sprintf(".%s[%d]", p.inner, p.j)
	}
	return s + "." + p.leaf
}

// eachID calls fn with every device identity in inv: where it is, its
// kind and a pointer to its value. It is the one list of which fields are
// identities: Canonical rewrites them, Validate checks them.
func eachID(inv *ginv1.NodeInventory, fn func(at idPath, k idKind, p *string)) {
	for i, b := range inv.GetPcieBridges() {
		fn(idPath{list: "pcie_bridges", i: i, leaf: "id"}, busOrName, &b.Id)
		fn(idPath{list: "pcie_bridges", i: i, leaf: "parent_id"}, busOrName, &b.ParentId)
	}
	for i, s := range inv.GetNvswitches() {
		fn(idPath{list: "nvswitches", i: i, leaf: "id"}, busOrName, &s.Id)
		fn(idPath{list: "nvswitches", i: i, leaf: "pci_bus_id"}, busID, &s.PciBusId)
	}
	for i, g := range inv.GetGpus() {
		fn(idPath{list: "gpus", i: i, leaf: "pci_bus_id"}, busID, &g.PciBusId)
		fn(idPath{list: "gpus", i: i, leaf: "pcie_parent_id"}, busOrName, &g.PcieParentId)
		for j, l := range g.GetNvlinks() {
			fn(idPath{list: "gpus", i: i, inner: "nvlinks", j: j, leaf: "remote_pci_bus_id"}, busID, &l.RemotePciBusId)
		}
	}
	var ethernet map[string]map[uint32]bool // HCA name → its Ethernet (RoCE) ports
	for i, h := range inv.GetHcas() {
		fn(idPath{list: "hcas", i: i, leaf: "node_guid"}, guid, &h.NodeGuid)
		fn(idPath{list: "hcas", i: i, leaf: "sys_image_guid"}, guid, &h.SysImageGuid)
		fn(idPath{list: "hcas", i: i, leaf: "pci_bus_id"}, busID, &h.PciBusId)
		fn(idPath{list: "hcas", i: i, leaf: "pcie_parent_id"}, busOrName, &h.PcieParentId)
		for j, p := range h.GetPorts() {
			fn(idPath{list: "hcas", i: i, inner: "ports", j: j, leaf: "port_guid"}, guid, &p.PortGuid)
			if p.GetLinkLayer() == ginv1.LinkLayer_LINK_LAYER_ETHERNET {
				if ethernet == nil {
					ethernet = map[string]map[uint32]bool{}
				}
				if ethernet[h.GetName()] == nil {
					ethernet[h.GetName()] = map[uint32]bool{}
				}
				ethernet[h.GetName()][p.GetPort()] = true
			}
		}
	}
	for i, n := range inv.GetFabricNeighbors() {
		if !ethernet[n.GetHca()][n.GetPort()] {
			fn(idPath{list: "fabric_neighbors", i: i, leaf: "switch_guid"}, switchID, &n.SwitchGuid)
		}
	}
}

// Canonical returns inv with every device identity in its one canonical
// form (internal/devid): PCI bus ids "0000:07:00.0", GUIDs "0x" and 16
// lower-case hex digits ("0x0002c903004f1a2b"); host bridge names ("pci0000:15"), NVSwitch UUIDs and LLDP
// chassis ids are kept. It is the inventory edge: the agent applies it to
// what its source collected before hashing and sending, the master to what
// it receives before validating and hashing, and the replicated state to
// log entries and snapshots written before identities were canonical.
// When every identity already is canonical it returns inv itself and
// false; otherwise a rewritten copy and true (inv is never modified). A
// value that is no identity at all (a GPU's pci_bus_id "unknown") is kept
// as it is, for Validate to refuse.
func Canonical(inv *ginv1.NodeInventory) (*ginv1.NodeInventory, bool) {
	if inv == nil {
		return nil, false
	}
	changed := false
	eachID(inv, func(_ idPath, k idKind, p *string) {
		if c, _ := canonicalID(k, *p); c != *p {
			changed = true
		}
	})
	if !changed {
		return inv, false
	}
	out := proto.CloneOf(inv)
	eachID(out, func(_ idPath, k idKind, p *string) {
		*p, _ = canonicalID(k, *p)
	})
	return out, true
}

// validateIDs refuses an identity that is not one where only an identity
// belongs, and one not in its canonical form (the master canonicalises
// before validating, so that names a bug or a client that skipped it).
func validateIDs(v *validator, inv *ginv1.NodeInventory) {
	eachID(inv, func(at idPath, k idKind, p *string) {
		c, ok := canonicalID(k, *p)
		switch {
		case !ok && k == guid:
			v.add(at.String(), "%q is not an InfiniBand GUID", *p)
		case !ok:
			v.add(at.String(), "%q is not a PCI bus id", *p)
		case c != *p:
			v.add(at.String(), "%q is not in canonical form (%q)", *p, c)
		}
	})
}
