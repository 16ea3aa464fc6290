package sysfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery"
)

// DevicePCIe is where one PCI device (GPU, HCA, NVSwitch) sits in the PCIe
// tree.
type DevicePCIe struct {
	// ParentID is the id of the bridge above the device in the bridges
	// PCIeTree returns ("0000:04:00.0", or "pci0000:15" for a device on a
	// host bridge); empty when the path could not be resolved.
	ParentID string
	// Link is the device's negotiated link to its parent
	// (current_link_speed, current_link_width, and what it is capable of:
	// max_link_speed, max_link_width); nil when neither current file was
	// readable. Note: GPUs idle at a lower speed to save power, so a
	// current speed below the slot's is not necessarily a fault.
	Link *ginv1.PcieLink
	// NUMANode is the device's numa_node; -1 unknown.
	NUMANode int32
}

// PCIeTree resolves the PCIe path of each device in busIDs (any form
// NormalizeBusID accepts) through sysRoot/bus/pci/devices/<bdf>, a symlink
// into sysRoot/devices/pci<domain>:<bus>/<root port>/.../<bdf>, and returns
// the bridges on those paths and, keyed by normalised bus id, each device's
// parent, link and NUMA node.
//
// The pci<domain>:<bus> component is a HOST_BRIDGE vertex (id "pci0000:15",
// no parent, NUMA node from the numa_node of the first PCI function below
// it); every PCI function between it and the device (root port, switch
// upstream and downstream ports) is a SWITCH vertex whose id is its bus id,
// whose parent is the component above it and whose link is read from its
// current_link_speed/current_link_width. Switch vertices carry the host
// bridge's NUMA node. Bridges shared by several devices are returned once,
// in order of first appearance. Path components that are neither (ACPI or
// VMD containers) are stepped over.
//
// Unreadable or malformed files yield ItemErrors naming the path; what is
// known is still returned. A device whose sysfs entry does not resolve is
// absent from devices.
func PCIeTree(sysRoot string, busIDs []string) (bridges []*ginv1.PcieBridge, devices map[string]DevicePCIe, errs []discovery.ItemError) {
	devices = map[string]DevicePCIe{}
	seen := map[string]bool{}
	devRoot, err := filepath.EvalSymlinks(filepath.Join(sysRoot, "devices"))
	if err != nil {
		return nil, devices, []discovery.ItemError{itemErr(filepath.Join(sysRoot, "devices"), err)}
	}
	add := func(b *ginv1.PcieBridge) {
		if !seen[b.Id] {
			seen[b.Id] = true
			bridges = append(bridges, b)
		}
	}
	for _, raw := range busIDs {
		bdf, ok := NormalizeBusID(raw)
		if !ok {
			errs = append(errs, itemErr(fmt.Sprintf("PCI bus id %q", clip(raw)), fmt.Errorf("%w: not a PCI address", errMalformed)))
			continue
		}
		if _, done := devices[bdf]; done {
			continue
		}
		link := pciDevPath(sysRoot, bdf)
		real, err := filepath.EvalSymlinks(link)
		if err != nil {
			errs = append(errs, itemErr(link, err))
			continue
		}
		rel, err := filepath.Rel(devRoot, real)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			errs = append(errs, itemErr(link, fmt.Errorf("%w: resolves to %s, outside %s", errMalformed, real, devRoot)))
			continue
		}
		comps := strings.Split(filepath.ToSlash(rel), "/")
		dev := DevicePCIe{NUMANode: -1}
		host := -1
		for i, c := range comps {
			if hostBridgeRe.MatchString(c) {
				host = i
				break
			}
		}
		if host < 0 || comps[len(comps)-1] != bdf {
			errs = append(errs, itemErr(link, fmt.Errorf("%w: %s has no pci<domain>:<bus> host bridge above %s", errMalformed, rel, bdf)))
		} else {
			hostNUMA := int32(-1)
			if host+1 < len(comps) {
				p := filepath.Join(devRoot, filepath.Join(comps[:host+2]...), "numa_node")
				n, err := readNUMA(p)
				if err != nil {
					errs = append(errs, itemErr(p, err))
				}
				hostNUMA = n
			}
			parent := comps[host]
			add(&ginv1.PcieBridge{Id: parent, Kind: ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_HOST_BRIDGE, NumaNode: hostNUMA})
			level := 0 // PCI functions seen below the host bridge
			for i := host + 1; i < len(comps)-1; i++ {
				c := comps[i]
				if !bdfRe.MatchString(c) {
					continue // VMD domain, ACPI container: transparent
				}
				if !seen[c] {
					dir := filepath.Join(devRoot, filepath.Join(comps[:i+1]...))
					l, lerrs := readLink(dir)
					errs = append(errs, lerrs...)
					add(&ginv1.PcieBridge{Id: c, Kind: portKind(dir, level), ParentId: parent, NumaNode: hostNUMA, Link: l})
				}
				parent = c
				level++
			}
			dev.ParentID = parent
		}
		l, lerrs := readLink(real)
		errs = append(errs, lerrs...)
		dev.Link = l
		p := filepath.Join(real, "numa_node")
		n, err := readNUMA(p)
		if err != nil {
			errs = append(errs, itemErr(p, err))
		}
		dev.NUMANode = n
		devices[bdf] = dev
	}
	return bridges, devices, errs
}

// readLink reads a PCI function's negotiated link; nil when neither file
// could be read.
func readLink(dir string) (*ginv1.PcieLink, []discovery.ItemError) {
	var errs []discovery.ItemError
	l := &ginv1.PcieLink{}
	okSpeed, okWidth := false, false
	p := filepath.Join(dir, "current_link_speed")
	if s, err := readFile(p); err != nil {
		errs = append(errs, itemErr(p, err))
	} else if g, err := ParseLinkSpeed(s); err != nil {
		errs = append(errs, itemErr(p, err))
	} else {
		l.Generation, okSpeed = g, true
	}
	p = filepath.Join(dir, "current_link_width")
	if s, err := readFile(p); err != nil {
		errs = append(errs, itemErr(p, err))
	} else if w, err := parseLinkWidth(s); err != nil {
		errs = append(errs, itemErr(p, err))
	} else {
		l.Width, okWidth = w, true
	}
	if !okSpeed && !okWidth {
		return nil, errs
	}
	// What the link could train to. Older kernels and some virtual
	// functions have no max_* files: left 0 (unknown), not an error.
	if s, err := readFile(filepath.Join(dir, "max_link_speed")); err == nil {
		if g, err := ParseLinkSpeed(s); err == nil {
			l.MaxGeneration = g
		} else {
			errs = append(errs, itemErr(filepath.Join(dir, "max_link_speed"), err))
		}
	}
	if s, err := readFile(filepath.Join(dir, "max_link_width")); err == nil {
		if w, err := parseLinkWidth(s); err == nil {
			l.MaxWidth = w
		} else {
			errs = append(errs, itemErr(filepath.Join(dir, "max_link_width"), err))
		}
	}
	return l, errs
}

// GPUNUMA returns the numa_node of the PCI device busID (any form
// NormalizeBusID accepts); -1 when the kernel reports none or the file
// cannot be read.
func GPUNUMA(sysRoot, busID string) int32 {
	bdf, ok := NormalizeBusID(busID)
	if !ok {
		return -1
	}
	n, err := readNUMA(filepath.Join(pciDevPath(sysRoot, bdf), "numa_node"))
	if err != nil {
		return -1
	}
	return n
}

// AttachPCIe copies the PCIe placement PCIeTree found for each HCA's
// pci_bus_id into the HCA: parent bridge, link, and the NUMA node when the
// HCA's own is unknown.
func AttachPCIe(hcas []*ginv1.Hca, devices map[string]DevicePCIe) {
	for _, h := range hcas {
		d, ok := devices[h.GetPciBusId()]
		if !ok {
			continue
		}
		h.PcieParentId = d.ParentID
		h.PcieLink = d.Link
		if h.NumaNode < 0 {
			h.NumaNode = d.NUMANode
		}
	}
}

// portKind says what a bridge on a device's sysfs path is: from the PCIe
// capability's Device/Port Type in its config space when readable (root),
// else from its place in the path, which in a PCIe hierarchy is always root
// port, then upstream and downstream port of each switch in turn.
func portKind(dir string, level int) ginv1.PcieBridgeKind {
	if k, ok := configPortKind(filepath.Join(dir, "config")); ok {
		return k
	}
	switch {
	case level == 0:
		return ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_ROOT_PORT
	case level%2 == 1:
		return ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH
	default:
		return ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH_DOWNSTREAM_PORT
	}
}

// configPortKind reads the Device/Port Type of a bridge's PCI Express
// capability (config space: capability pointer at 0x34, capability id 0x10,
// type in bits 7:4 of the capabilities register).
func configPortKind(path string) (ginv1.PcieBridgeKind, bool) {
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 0x40 {
		return 0, false
	}
	ptr := int(b[0x34]) &^ 3
	for n := 0; ptr >= 0x40 && ptr+3 < len(b) && n < 48; n++ {
		if b[ptr] == 0x10 {
			switch (b[ptr+2] >> 4) & 0xf {
			case 0x4:
				return ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_ROOT_PORT, true
			case 0x5:
				return ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH, true
			case 0x6:
				return ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH_DOWNSTREAM_PORT, true
			}
			return 0, false
		}
		ptr = int(b[ptr+1]) &^ 3
	}
	return 0, false
}
