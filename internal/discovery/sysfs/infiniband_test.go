package sysfs

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sysfs/sysfstest"
)

const (
	ib  = ginv1.LinkLayer_LINK_LAYER_INFINIBAND
	eth = ginv1.LinkLayer_LINK_LAYER_ETHERNET
	up  = ginv1.PortPhysState_PORT_PHYS_STATE_LINK_UP
	act = ginv1.PortState_PORT_STATE_ACTIVE
)

// fakeLookup serves addresses from a table; unknown names fail as
// net.InterfaceByName does.
func fakeLookup(table map[string][2][]string) AddrLookup {
	return func(ifname string) ([]string, []string, error) {
		a, ok := table[ifname]
		if !ok {
			return nil, nil, fmt.Errorf("route ip+net: no such network interface %s", ifname)
		}
		return a[0], a[1], nil
	}
}

var nodeAddrs = map[string][2][]string{
	"ibp23s0":   {{"192.168.17.10/24"}, {"fe80::a288:c203:45:2e10/64"}},
	"ens1f0np0": {{"10.0.0.1/16"}, {"fd00::1/64", "fe80::e42:a1ff:fe12:3456/64"}},
	"ens1f1np1": {nil, nil},
}

// withAddrs is nodeAddrs plus one interface.
func withAddrs(ifname string, v4, v6 []string) map[string][2][]string {
	m := maps.Clone(nodeAddrs)
	m[ifname] = [2][]string{v4, v6}
	return m
}

func ll(g string) string { return "fe80:0000:0000:0000:" + g }

// wantNodeHCAs is what testdata/node.txtar holds.
func wantNodeHCAs() []*ginv1.Hca {
	ibPort := func(lid uint32, rate uint32, text, guid string) *ginv1.HcaPort {
		return &ginv1.HcaPort{
			Port: 1, PortGuid: "0x" + guid[0:4] + guid[5:9] + guid[10:14] + guid[15:19],
			Lid: lid, SmLid: 1, State: act, PhysState: up, RateGbps: rate, RateText: text,
			LinkLayer: ib, Gids: []string{ll(guid)},
		}
	}
	hca := func(name, guid, sys, bus string, numa int32, board string, p *ginv1.HcaPort) *ginv1.Hca {
		return &ginv1.Hca{Name: name, NodeGuid: guid, SysImageGuid: sys, PciBusId: bus, NumaNode: numa,
			HcaType: "MT4129", BoardId: board, FirmwareVersion: "28.39.1002", Ports: []*ginv1.HcaPort{p}}
	}
	p0 := ibPort(0x1a, 400, "400 Gb/sec (4X NDR)", "a088:c203:0045:2e10")
	p0.Netdev = &ginv1.NetDevice{Name: "ibp23s0", Mac: "00:00:10:49:fe:80:00:00:00:00:00:00:a0:88:c2:03:00:45:2e:10", Mtu: 4092,
		Ipv4Addresses: []string{"192.168.17.10/24"}, Ipv6Addresses: []string{"fe80::a288:c203:45:2e10/64"}}
	v4gid := "0000:0000:0000:0000:0000:ffff:0a00:0001"
	p2 := &ginv1.HcaPort{Port: 1, PortGuid: "0x0e42a1fffe123456", State: act, PhysState: up, RateGbps: 100,
		RateText: "100 Gb/sec (4X EDR)", LinkLayer: eth,
		Gids: []string{ll("0e42:a1ff:fe12:3456"), ll("0e42:a1ff:fe12:3456"), v4gid, v4gid},
		Netdev: &ginv1.NetDevice{Name: "ens1f0np0", Mac: "0c:42:a1:12:34:56", Mtu: 9000,
			Ipv4Addresses: []string{"10.0.0.1/16"}, Ipv6Addresses: []string{"fd00::1/64", "fe80::e42:a1ff:fe12:3456/64"}}}
	p3 := &ginv1.HcaPort{Port: 1, PortGuid: "0x0e42a1fffe123457", State: ginv1.PortState_PORT_STATE_DOWN,
		PhysState: ginv1.PortPhysState_PORT_PHYS_STATE_DISABLED, RateGbps: 10, RateText: "10 Gb/sec (4X SDR)",
		LinkLayer: eth, Gids: []string{ll("0e42:a1ff:fe12:3457")},
		Netdev: &ginv1.NetDevice{Name: "ens1f1np1", Mac: "0c:42:a1:12:34:57", Mtu: 1500}}
	p4 := ibPort(0x1c, 0, "fast", "a088:c203:0045:2e40")
	return []*ginv1.Hca{
		hca("mlx5_0", "0xa088c20300452e10", "0xa088c20300452e10", "0000:17:00.0", 0, "MT_0000000838", p0),
		hca("mlx5_1", "0xa088c20300452e20", "0xa088c20300452e20", "0000:18:00.0", 0, "MT_0000000838",
			ibPort(0x1b, 200, "200 Gb/sec (4X HDR)", "a088:c203:0045:2e20")),
		hca("mlx5_2", "0x0c42a10300123456", "0x0c42a10300123456", "0000:81:00.0", 1, "MT_0000000970", p2),
		hca("mlx5_3", "0x0c42a10300123457", "0x0c42a10300123456", "0000:81:00.1", 1, "MT_0000000970", p3),
		hca("mlx5_4", "0xa088c20300452e40", "0xa088c20300452e40", "0000:82:00.0", 1, "MT_0000000838", p4),
		hca("mlx5_5", "", "0xa088c20300452e50", "0000:83:00.0", 1, "MT_0000000838",
			ibPort(0x1d, 400, "400 Gb/sec (4X NDR)", "a088:c203:0045:2e50")),
	}
}

func compareHCAs(t *testing.T, got, want []*ginv1.Hca) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d HCAs, want %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		protoDiff(t, want[i].GetName(), got[i], want[i])
	}
}

func TestHCAs(t *testing.T) {
	root := nodeFixture(t)
	got, errs := HCAsWithLookup(root+"/sys", fakeLookup(nodeAddrs))
	// The malformed rate of mlx5_4 and the missing node_guid of mlx5_5 are
	// reported, and hide nothing else.
	wantErrItems(t, root, errs,
		"<root>/sys/class/infiniband/mlx5_4/ports/1/rate",
		"<root>/sys/class/infiniband/mlx5_5/node_guid",
	)
	for _, e := range errs {
		if e.Item == root+"/sys/class/infiniband/mlx5_5/node_guid" && !errors.Is(e, errNotExist) {
			t.Errorf("missing node_guid: error %v does not wrap ErrNotExist", e)
		}
	}
	compareHCAs(t, got, wantNodeHCAs())
}

// The procfs path and the own readers agree on every device.
func TestHCAsProcfsAndOwnReadersAgree(t *testing.T) {
	root := nodeFixture(t)
	a, errsA := readHCAs(root+"/sys", fakeLookup(nodeAddrs), true)
	b, errsB := readHCAs(root+"/sys", fakeLookup(nodeAddrs), false)
	compareHCAs(t, a, b)
	if !slices.Equal(errItems(t, root, errsA), errItems(t, root, errsB)) {
		t.Errorf("errors differ: %v vs %v", errsA, errsB)
	}
}

func TestHCAsNoInfiniband(t *testing.T) {
	root := materialize(t, "-- sys/class/net/lo/mtu --\n65536\n")
	hcas, errs := HCAs(root + "/sys")
	if hcas != nil || errs != nil {
		t.Errorf("HCAs without class/infiniband = %v, %v; want nothing", hcas, errs)
	}
}

// Damaged files, one at a time: each is one ItemError naming the file, and
// the six devices are all still reported.
func TestHCAsDamaged(t *testing.T) {
	const (
		m0 = "sys/class/infiniband/mlx5_0"
		p0 = m0 + "/ports/1"
	)
	type check func(t *testing.T, h []*ginv1.Hca)
	port0 := func(f func(p *ginv1.HcaPort) bool) check {
		return func(t *testing.T, h []*ginv1.Hca) {
			if p := h[0].GetPorts(); len(p) != 1 || !f(p[0]) {
				t.Errorf("mlx5_0 ports = %v", p)
			}
		}
	}
	tests := []struct {
		name     string
		overlay  string
		remove   []string
		lookup   map[string][2][]string // nil: nodeAddrs
		wantErrs []string
		check    check
		// othersDiffer: the lookup changes the other devices too.
		othersDiffer bool
	}{
		{
			name:     "state without id",
			overlay:  "-- " + p0 + "/state --\nACTIVE\n",
			wantErrs: []string{"<root>/" + p0 + "/state"},
			check: port0(func(p *ginv1.HcaPort) bool {
				return p.State == ginv1.PortState_PORT_STATE_UNSPECIFIED && p.PhysState == up && p.RateGbps == 400
			}),
		},
		{
			name:     "unknown state id",
			overlay:  "-- " + p0 + "/state --\n9: WEIRD\n-- " + p0 + "/phys_state --\n12: Odd\n",
			wantErrs: []string{"<root>/" + p0 + "/state", "<root>/" + p0 + "/phys_state"},
			check:    port0(func(p *ginv1.HcaPort) bool { return p.State == 0 && p.PhysState == 0 && p.Lid == 0x1a }),
		},
		{
			name:     "malformed lid and GID 0",
			overlay:  "-- " + p0 + "/lid --\n26\n-- " + p0 + "/gids/0 --\nfe80::1\n",
			wantErrs: []string{"<root>/" + p0 + "/lid", "<root>/" + p0 + "/gids/0"},
			check:    port0(func(p *ginv1.HcaPort) bool { return p.Lid == 0 && p.SmLid == 1 && p.PortGuid == "" && len(p.Gids) == 0 }),
		},
		{
			name:     "missing fw_ver and malformed sys_image_guid",
			remove:   []string{m0 + "/fw_ver"},
			overlay:  "-- " + m0 + "/sys_image_guid --\na088c20300452e10\n",
			wantErrs: []string{"<root>/" + m0 + "/fw_ver", "<root>/" + m0 + "/sys_image_guid"},
			check: func(t *testing.T, h []*ginv1.Hca) {
				if h[0].FirmwareVersion != "" || h[0].SysImageGuid != "" || h[0].NodeGuid != "0xa088c20300452e10" || len(h[0].Ports) != 1 {
					t.Errorf("mlx5_0 = %v", h[0])
				}
			},
		},
		{
			name:     "zero GID 0 on an IB port: no port GUID",
			overlay:  "-- " + p0 + "/gids/0 --\n0000:0000:0000:0000:0000:0000:0000:0000\n",
			wantErrs: []string{"<root>/" + p0 + "/gids/0"},
			check: port0(func(p *ginv1.HcaPort) bool {
				return p.PortGuid == "" && len(p.Gids) == 0 && p.Netdev.GetName() == "ibp23s0"
			}),
		},
		{
			name:     "no ports directory",
			remove:   []string{m0 + "/ports"},
			wantErrs: []string{"<root>/" + m0 + "/ports"},
			check: func(t *testing.T, h []*ginv1.Hca) {
				if len(h[0].Ports) != 0 || h[0].PciBusId != "0000:17:00.0" {
					t.Errorf("mlx5_0 = %v", h[0])
				}
			},
		},
		{
			name:         "netdev without address, lookup failing",
			remove:       []string{"sys/class/net/ibp23s0/address"},
			lookup:       map[string][2][]string{},
			wantErrs:     []string{"<root>/sys/class/net/ibp23s0/address", "mlx5_0 port 1 netdev ibp23s0 addresses", "mlx5_2 port 1 netdev ens1f0np0 addresses", "mlx5_3 port 1 netdev ens1f1np1 addresses"},
			othersDiffer: true,
			check: port0(func(p *ginv1.HcaPort) bool {
				return p.Netdev.GetName() == "ibp23s0" && p.Netdev.GetMac() == "" && p.Netdev.GetMtu() == 4092
			}),
		},
		{
			name:     "software device: no device link, netdev from ndevs",
			remove:   []string{m0 + "/device"},
			overlay:  "-- " + p0 + "/gid_attrs/ndevs/0 --\nbond0\n-- sys/class/net/bond0/address --\n0c:42:a1:00:00:01\n-- sys/class/net/bond0/mtu --\n9000\n",
			lookup:   withAddrs("bond0", []string{"10.1.0.1/16"}, nil),
			wantErrs: nil,
			check: func(t *testing.T, h []*ginv1.Hca) {
				p := h[0].Ports[0]
				if h[0].PciBusId != "" || h[0].NumaNode != -1 || p.Netdev.GetName() != "bond0" || !slices.Equal(p.Netdev.GetIpv4Addresses(), []string{"10.1.0.1/16"}) {
					t.Errorf("mlx5_0 = %v", h[0])
				}
			},
		},
		{
			name:     "device link to a non-PCI device",
			remove:   []string{m0 + "/device"},
			overlay:  "-- " + m0 + "/device -> ../../../../platform --\n-- sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0/platform/numa_node --\n-1\n",
			wantErrs: []string{"<root>/" + m0 + "/device"},
			check: func(t *testing.T, h []*ginv1.Hca) {
				if h[0].PciBusId != "" || h[0].NumaNode != -1 {
					t.Errorf("mlx5_0 = %v", h[0])
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := nodeFixture(t)
			remove(t, root, tt.remove...)
			sysfstest.WriteArchive(t, root, tt.overlay)
			lk := nodeAddrs
			if tt.lookup != nil {
				lk = tt.lookup
			}
			got, errs := HCAsWithLookup(root+"/sys", fakeLookup(lk))
			want := append([]string{
				"<root>/sys/class/infiniband/mlx5_4/ports/1/rate",
				"<root>/sys/class/infiniband/mlx5_5/node_guid",
			}, tt.wantErrs...)
			wantErrItems(t, root, errs, want...)
			if len(got) != 6 {
				t.Fatalf("got %d HCAs, want 6", len(got))
			}
			tt.check(t, got)
			// The other devices are intact.
			if !tt.othersDiffer {
				compareHCAs(t, got[1:], wantNodeHCAs()[1:])
			}
		})
	}
}

// netdevForPort on a dual-port function (mlx4 style: one PCI function, two
// IPoIB netdevs told apart by dev_port, or by dev_id on old kernels).
func TestNetdevForPort(t *testing.T) {
	const dir = "sys/devices/pci0000:00/0000:00:02.0/0000:05:00.0/net"
	tests := []struct {
		name    string
		archive string
		want    map[uint32]string
	}{
		{"dev_port", "-- " + dir + "/ib0/dev_port --\n0\n-- " + dir + "/ib1/dev_port --\n1\n", map[uint32]string{1: "ib0", 2: "ib1", 3: ""}},
		{"dev_id only", "-- " + dir + "/ib0/dev_id --\n0x0\n-- " + dir + "/ib1/dev_id --\n0x1\n", map[uint32]string{1: "ib0", 2: "ib1"}},
		{"no net directory", "-- " + dir + "/ --\n", map[uint32]string{1: ""}},
		{"unreadable attributes", "-- " + dir + "/ib0/ --\n", map[uint32]string{1: ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := materialize(t, tt.archive)
			for port, want := range tt.want {
				if got := netdevForPort(root+"/"+dir, port); got != want {
					t.Errorf("port %d: %q, want %q", port, got, want)
				}
			}
		})
	}
}

func TestRoles(t *testing.T) {
	mk := func() []*ginv1.Hca {
		return []*ginv1.Hca{
			{Name: "mlx5_0", NodeGuid: "0xa088c20300452e10", Ports: []*ginv1.HcaPort{{LinkLayer: ib}}},
			{Name: "mlx5_1", NodeGuid: "0xa088c20300452e20", Ports: []*ginv1.HcaPort{{LinkLayer: ib}}},
			{Name: "mlx5_2", NodeGuid: "0x0c42a10300123456", Ports: []*ginv1.HcaPort{{LinkLayer: eth}}},
			{Name: "mlx5_3", Ports: []*ginv1.HcaPort{{LinkLayer: eth}}},
		}
	}
	const (
		c = ginv1.HcaRole_HCA_ROLE_COMPUTE
		s = ginv1.HcaRole_HCA_ROLE_STORAGE
	)
	tests := []struct {
		name             string
		compute, storage []string
		want             []ginv1.HcaRole
	}{
		{"default: everything compute", nil, nil, []ginv1.HcaRole{c, c, c, c}},
		{"storage by name", nil, []string{"mlx5_2", "mlx5_3"}, []ginv1.HcaRole{c, c, s, s}},
		{"storage by GUID, kernel spelling", nil, []string{"0c42:a103:0012:3456"}, []ginv1.HcaRole{c, c, s, c}},
		{"exhaustive compute list", []string{"mlx5_0", "A088C20300452E20"}, nil, []ginv1.HcaRole{c, c, s, s}},
		{"storage wins over compute", []string{"mlx5_0"}, []string{"mlx5_0"}, []ginv1.HcaRole{s, s, s, s}},
		{"empty GUID matches nothing", nil, []string{"", "0x"}, []ginv1.HcaRole{c, c, c, c}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := mk()
			Roles(h, tt.compute, tt.storage)
			for i, want := range tt.want {
				if h[i].Role != want {
					t.Errorf("%s: %v, want %v", h[i].Name, h[i].Role, want)
				}
			}
		})
	}
}

func TestDefaultAddrLookup(t *testing.T) {
	ifs, err := net.Interfaces()
	if err != nil || len(ifs) == 0 {
		t.Skip("no interfaces")
	}
	var lo string
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			lo = i.Name
		}
	}
	if lo == "" {
		t.Skip("no loopback interface")
	}
	v4, _, err := DefaultAddrLookup(lo)
	if err != nil {
		t.Fatal(err)
	}
	if len(v4) > 0 && !slices.Contains(v4, "127.0.0.1/8") {
		t.Errorf("%s v4 = %v, want 127.0.0.1/8 among them", lo, v4)
	}
	if _, _, err := DefaultAddrLookup("gin-no-such-if0"); err == nil {
		t.Error("lookup of a missing interface succeeded")
	}
}
