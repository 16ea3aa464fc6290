package sysfs

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/devid"
	"github.com/gin-topology/gin/internal/discovery"
)

// Bounds on what one port contributes (mirroring internal/inventory's
// validation limits).
const (
	maxGIDs  = 256 // GID table entries read per port
	maxAddrs = 64  // addresses per netdev and family
)

// AddrLookup returns the IPv4 and IPv6 addresses of a network interface in
// CIDR form ("10.0.0.1/16"). Addresses are not in sysfs; the default asks
// the kernel through net.InterfaceByName, tests inject a fake.
type AddrLookup func(ifname string) (v4, v6 []string, err error)

// DefaultAddrLookup is the AddrLookup of a real node: the addresses of the
// interface in the agent's network namespace.
func DefaultAddrLookup(ifname string) (v4, v6 []string, err error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, nil, err
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil, nil, err
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ipn.IP.To4() != nil {
			v4 = append(v4, ipn.String())
		} else {
			v6 = append(v6, ipn.String())
		}
	}
	return v4, v6, nil
}

// ibDevBasics are the device attributes procfs covers.
type ibDevBasics struct {
	fw, board, hcaType string
	ports              map[uint32]ibPortBasics
}

// ibPortBasics are the port attributes procfs covers.
type ibPortBasics struct {
	linkLayer       string
	stateID, physID uint32
	rateGbps        uint32
}

// HCAs reads every RDMA device under sysRoot/class/infiniband with
// DefaultAddrLookup for the netdevs' addresses. See HCAsWithLookup.
func HCAs(sysRoot string) ([]*ginv1.Hca, []discovery.ItemError) {
	return HCAsWithLookup(sysRoot, DefaultAddrLookup)
}

// HCAsWithLookup reads every RDMA device under sysRoot/class/infiniband,
// sorted by name: node_guid, sys_image_guid, hca_type, board_id, fw_ver, the
// PCI bus id (the "device" symlink) and its numa_node, and each port: lid,
// sm_lid, state, phys_state, rate, link_layer, the non-zero GIDs (at most
// the first 256 entries), the port GUID (low 64 bits of the link-local GID
// 0; also set for RoCE ports, as ibstat does), and the netdev (IPoIB or
// RoCE) with its MAC, MTU and, through lookup (nil: none), its addresses.
//
// The netdev of a port is the gid_attrs/ndevs entry of its first non-zero
// GID (RoCE); failing that, the interface under device/net whose dev_port
// (or, on old kernels, dev_id) is the port number − 1 (IPoIB, and RoCE
// ports with no GID yet). Roles are left unspecified: see Roles. PCIe
// parent and link come from PCIeTree (see AttachPCIe).
//
// No sysRoot/class/infiniband directory means no RDMA devices: no HCAs and
// no error. Every unreadable or malformed file is an ItemError and the
// device is still reported with what could be read.
func HCAsWithLookup(sysRoot string, lookup AddrLookup) ([]*ginv1.Hca, []discovery.ItemError) {
	return readHCAs(sysRoot, lookup, true)
}

func readHCAs(sysRoot string, lookup AddrLookup, viaProcfs bool) ([]*ginv1.Hca, []discovery.ItemError) {
	dir := filepath.Join(sysRoot, "class", "infiniband")
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, []discovery.ItemError{itemErr(dir, err)}
	}
	var (
		hcas []*ginv1.Hca
		errs []discovery.ItemError
	)
	for _, e := range ents {
		h, es := readHCA(sysRoot, e.Name(), lookup, viaProcfs)
		hcas = append(hcas, h)
		errs = append(errs, es...)
	}
	return hcas, errs
}

// readHCA reads one device; it always returns an Hca.
func readHCA(sysRoot, name string, lookup AddrLookup, viaProcfs bool) (*ginv1.Hca, []discovery.ItemError) {
	var errs []discovery.ItemError
	fail := func(item string, err error) { errs = append(errs, itemErr(item, err)) }
	dir := filepath.Join(sysRoot, "class", "infiniband", name)
	h := &ginv1.Hca{Name: name, NumaNode: -1}

	var basics *ibDevBasics
	if viaProcfs {
		// On error (one bad file fails the device in procfs) the own
		// readers below report exactly which file.
		basics, _ = procfsDevice(sysRoot, name)
	}
	if basics != nil {
		h.FirmwareVersion, h.BoardId, h.HcaType = basics.fw, basics.board, basics.hcaType
	} else {
		p := filepath.Join(dir, "fw_ver")
		if s, err := readFile(p); err != nil {
			fail(p, err)
		} else {
			h.FirmwareVersion = s
		}
		// Not every driver has board_id and hca_type.
		for _, f := range []struct {
			file string
			dst  *string
		}{{"board_id", &h.BoardId}, {"hca_type", &h.HcaType}} {
			p := filepath.Join(dir, f.file)
			s, err := readFile(p)
			switch {
			case err == nil:
				*f.dst = s
			case !errors.Is(err, os.ErrNotExist):
				fail(p, err)
			}
		}
	}
	for _, f := range []struct {
		file string
		dst  *string
	}{{"node_guid", &h.NodeGuid}, {"sys_image_guid", &h.SysImageGuid}} {
		p := filepath.Join(dir, f.file)
		s, err := readFile(p)
		if err == nil {
			s, err = parseGUID(s)
		}
		if err != nil {
			fail(p, err)
			continue
		}
		*f.dst = s
	}

	// device -> ../../../0000:17:00.0; absent for software devices (rxe, siw).
	p := filepath.Join(dir, "device")
	if target, err := os.Readlink(p); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			fail(p, err)
		}
	} else {
		if bdf, ok := NormalizeBusID(filepath.Base(target)); ok {
			h.PciBusId = bdf
		} else {
			fail(p, fmt.Errorf("%w: links to %q, not a PCI device", errMalformed, clip(target)))
		}
		p := filepath.Join(p, "numa_node")
		n, err := readNUMA(p)
		if err != nil {
			fail(p, err)
		}
		h.NumaNode = n
	}

	pdir := filepath.Join(dir, "ports")
	ports, err := sortedNumeric(pdir)
	if err != nil {
		fail(pdir, err)
	}
	for _, n := range ports {
		var pb *ibPortBasics
		if basics != nil {
			if b, ok := basics.ports[uint32(n)]; ok {
				pb = &b
			}
		}
		port, es := readPort(sysRoot, name, dir, uint32(n), pb, lookup)
		h.Ports = append(h.Ports, port)
		errs = append(errs, es...)
	}
	return h, errs
}

// readPort reads one port; pb holds procfs's values, nil to read them here.
func readPort(sysRoot, dev, devDir string, n uint32, pb *ibPortBasics, lookup AddrLookup) (*ginv1.HcaPort, []discovery.ItemError) {
	var errs []discovery.ItemError
	fail := func(item string, err error) { errs = append(errs, itemErr(item, err)) }
	dir := filepath.Join(devDir, "ports", strconv.FormatUint(uint64(n), 10))
	p := &ginv1.HcaPort{Port: n}

	// Rate text is not kept by procfs: always read it.
	rp := filepath.Join(dir, "rate")
	rateText, rateErr := readFile(rp)
	if rateErr != nil {
		fail(rp, rateErr)
	} else {
		p.RateText = clip(rateText)
	}
	var linkLayer string
	if pb != nil {
		linkLayer = pb.linkLayer
		p.RateGbps = pb.rateGbps
		setState(p, pb.stateID, pb.physID, dir, fail)
	} else {
		lp := filepath.Join(dir, "link_layer")
		if s, err := readFile(lp); err != nil {
			fail(lp, err)
		} else {
			linkLayer = s
		}
		var sid, pid uint32
		for _, f := range []struct {
			file string
			dst  *uint32
		}{{"state", &sid}, {"phys_state", &pid}} {
			fp := filepath.Join(dir, f.file)
			s, err := readFile(fp)
			if err == nil {
				*f.dst, _, err = ParseState(s)
			}
			if err != nil {
				fail(fp, err)
			}
		}
		setState(p, sid, pid, dir, fail)
		if rateErr == nil {
			if g, err := ParseRate(rateText); err != nil {
				fail(rp, err)
			} else {
				p.RateGbps = g
			}
		}
	}
	switch linkLayer {
	case "InfiniBand":
		p.LinkLayer = ginv1.LinkLayer_LINK_LAYER_INFINIBAND
	case "Ethernet":
		p.LinkLayer = ginv1.LinkLayer_LINK_LAYER_ETHERNET
	}
	ib := p.LinkLayer == ginv1.LinkLayer_LINK_LAYER_INFINIBAND

	for _, f := range []struct {
		file string
		dst  *uint32
	}{{"lid", &p.Lid}, {"sm_lid", &p.SmLid}} {
		fp := filepath.Join(dir, f.file)
		s, err := readFile(fp)
		if err == nil {
			*f.dst, err = parseLID(s)
		}
		// RoCE ports have no LIDs worth reporting; only a read failure on
		// an IB port or a malformed value is an error.
		if err != nil && (ib || errors.Is(err, errMalformed)) {
			fail(fp, err)
		}
	}

	// GIDs: non-zero entries of the first maxGIDs.
	gdir := filepath.Join(dir, "gids")
	idx, err := sortedNumeric(gdir)
	if err != nil {
		fail(gdir, err)
	}
	if len(idx) > maxGIDs {
		idx = idx[:maxGIDs]
	}
	var gidIdx []uint64
	reported := err != nil // the GID table, or its entry 0, already failed
	for _, i := range idx {
		gp := filepath.Join(gdir, strconv.FormatUint(i, 10))
		s, err := readFile(gp)
		var (
			gid  string
			zero bool
		)
		if err == nil {
			gid, zero, err = parseGID(s)
		}
		if err != nil {
			fail(gp, err)
			reported = reported || i == 0
			continue
		}
		if zero {
			continue
		}
		if i == 0 && strings.HasPrefix(gid, "fe80:") {
			p.PortGuid = gidGUID(gid)
		}
		p.Gids = append(p.Gids, gid)
		gidIdx = append(gidIdx, i)
	}
	if ib && p.PortGuid == "" && !reported {
		fail(filepath.Join(gdir, "0"), fmt.Errorf("%w: no link-local GID 0, so no port GUID", errMalformed))
	}

	// Netdev: the RoCE GID's ndev, else the PCI function's netdev for this port.
	ifname := ""
	for _, i := range gidIdx {
		s, err := readFile(filepath.Join(dir, "gid_attrs", "ndevs", strconv.FormatUint(i, 10)))
		if err == nil && s != "" { // EINVAL on IB ports and unused entries
			ifname = s
			break
		}
	}
	if ifname == "" {
		ifname = netdevForPort(filepath.Join(devDir, "device", "net"), n)
	}
	if ifname != "" {
		p.Netdev = readNetdev(sysRoot, ifname, fmt.Sprintf("%s port %d netdev %s addresses", dev, n, ifname), lookup, fail)
	}
	return p, errs
}

// setState maps kernel state ids onto the enums.
func setState(p *ginv1.HcaPort, sid, pid uint32, dir string, fail func(string, error)) {
	if sid <= uint32(ginv1.PortState_PORT_STATE_ACTIVE_DEFER) {
		p.State = ginv1.PortState(sid)
	} else {
		fail(filepath.Join(dir, "state"), fmt.Errorf("%w: unknown port state %d", errMalformed, sid))
	}
	if pid <= uint32(ginv1.PortPhysState_PORT_PHYS_STATE_PHY_TEST) {
		p.PhysState = ginv1.PortPhysState(pid)
	} else {
		fail(filepath.Join(dir, "phys_state"), fmt.Errorf("%w: unknown physical state %d", errMalformed, pid))
	}
}

// netdevForPort picks the interface under a PCI function's net/ directory
// that serves port n: dev_port == n-1 (kernel ≥ 3.15), else dev_id ==
// n-1 (older mlx4). Names are tried in sorted order; "" when none fits.
func netdevForPort(netDir string, n uint32) string {
	ents, err := os.ReadDir(netDir)
	if err != nil {
		return ""
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	want := uint64(n) - 1
	for _, name := range names {
		if v, err := readUint(filepath.Join(netDir, name, "dev_port"), 32); err == nil {
			if v == want {
				return name
			}
			continue
		}
		if s, err := readFile(filepath.Join(netDir, name, "dev_id")); err == nil {
			if v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 32); err == nil && v == want {
				return name
			}
		}
	}
	return ""
}

// readNetdev reads sysRoot/class/net/<ifname>/{address,mtu} and the addresses.
func readNetdev(sysRoot, ifname, addrItem string, lookup AddrLookup, fail func(string, error)) *ginv1.NetDevice {
	nd := &ginv1.NetDevice{Name: ifname}
	dir := filepath.Join(sysRoot, "class", "net", ifname)
	p := filepath.Join(dir, "address")
	if s, err := readFile(p); err != nil {
		fail(p, err)
	} else {
		nd.Mac = clip(s)
	}
	p = filepath.Join(dir, "mtu")
	if v, err := readUint(p, 32); err != nil {
		fail(p, err)
	} else {
		nd.Mtu = uint32(v)
	}
	if lookup != nil {
		v4, v6, err := lookup(ifname)
		if err != nil {
			fail(addrItem, err)
		}
		nd.Ipv4Addresses = v4[:min(len(v4), maxAddrs)]
		nd.Ipv6Addresses = v6[:min(len(v6), maxAddrs)]
	}
	return nd
}

// Roles sets each HCA's role. An HCA whose name or node GUID (any GUID
// spelling: "0x0c42a10300123456", "0c42:a103:0012:3456") is in
// storageNames is STORAGE; else one in computeNames is COMPUTE; else, when
// computeNames is non-empty it is an exhaustive list and the HCA is
// STORAGE; else (the default) the HCA is COMPUTE whatever its link layer:
// InfiniBand HCAs carry NCCL traffic, and RoCE HCAs do too on RoCE
// clusters, so an Ethernet HCA used for storage or in-band management must
// be listed in storageNames.
func Roles(hcas []*ginv1.Hca, computeNames, storageNames []string) {
	in := func(h *ginv1.Hca, list []string) bool {
		g := normGUID(h.GetNodeGuid())
		for _, s := range list {
			if s == h.GetName() || (g != "" && normGUID(s) == g) {
				return true
			}
		}
		return false
	}
	for _, h := range hcas {
		switch {
		case in(h, storageNames):
			h.Role = ginv1.HcaRole_HCA_ROLE_STORAGE
		case in(h, computeNames):
			h.Role = ginv1.HcaRole_HCA_ROLE_COMPUTE
		case len(computeNames) > 0:
			h.Role = ginv1.HcaRole_HCA_ROLE_STORAGE
		default:
			h.Role = ginv1.HcaRole_HCA_ROLE_COMPUTE
		}
	}
}

// normGUID reduces a GUID to 16 lower-case hex digits; "" when s is not one.
func normGUID(s string) string {
	g, _ := devid.GUID(s)
	return g
}
