package sysfs

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

func gen5x16() *ginv1.PcieLink { return &ginv1.PcieLink{Generation: 5, Width: 16} }

func TestPCIeTree(t *testing.T) {
	const (
		host   = ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_HOST_BRIDGE
		sw     = ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH
		rport  = ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_ROOT_PORT
		down   = ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH_DOWNSTREAM_PORT
		s3path = "<root>/sys/devices/pci0000:80/0000:80:03.0/current_link_speed"
	)
	socket0 := []*ginv1.PcieBridge{
		{Id: "pci0000:00", Kind: host, NumaNode: 0},
		{Id: "0000:00:01.0", Kind: rport, ParentId: "pci0000:00", NumaNode: 0, Link: gen5x16()},
		{Id: "0000:01:00.0", Kind: sw, ParentId: "0000:00:01.0", NumaNode: 0, Link: gen5x16()},
		{Id: "0000:02:00.0", Kind: down, ParentId: "0000:01:00.0", NumaNode: 0, Link: gen5x16()},
		{Id: "0000:03:00.0", Kind: sw, ParentId: "0000:02:00.0", NumaNode: 0, Link: gen5x16()},
		{Id: "0000:04:00.0", Kind: down, ParentId: "0000:03:00.0", NumaNode: 0, Link: gen5x16()},
	}
	tests := []struct {
		name        string
		busIDs      []string
		wantBridges []*ginv1.PcieBridge
		wantDevices map[string]DevicePCIe
		wantErrs    []string
	}{
		{
			name:   "GPU and NIC under a two-level switch share the upstream switches",
			busIDs: []string{"00000000:07:00.0", "0000:17:00.0", "0000:18:00.0"},
			wantBridges: append(append([]*ginv1.PcieBridge{}, socket0...),
				&ginv1.PcieBridge{Id: "0000:04:01.0", Kind: down, ParentId: "0000:03:00.0", NumaNode: 0, Link: gen5x16()},
				&ginv1.PcieBridge{Id: "0000:02:01.0", Kind: down, ParentId: "0000:01:00.0", NumaNode: 0, Link: gen5x16()},
			),
			wantDevices: map[string]DevicePCIe{
				"0000:07:00.0": {ParentID: "0000:04:00.0", Link: gen5x16(), NUMANode: 0},
				"0000:17:00.0": {ParentID: "0000:04:01.0", Link: gen5x16(), NUMANode: 0},
				"0000:18:00.0": {ParentID: "0000:02:01.0", Link: gen5x16(), NUMANode: 0},
			},
		},
		{
			name:   "second socket, dual-function NIC, bare and upper-case bus ids, duplicates",
			busIDs: []string{"0000:81:00.0", "0000:81:00.1", "81:00.1", "0000:82:00.0"},
			wantBridges: []*ginv1.PcieBridge{
				{Id: "pci0000:80", Kind: host, NumaNode: 1},
				{Id: "0000:80:01.0", Kind: rport, ParentId: "pci0000:80", NumaNode: 1, Link: &ginv1.PcieLink{Generation: 4, Width: 16}},
				{Id: "0000:80:02.0", Kind: rport, ParentId: "pci0000:80", NumaNode: 1, Link: gen5x16()},
			},
			wantDevices: map[string]DevicePCIe{
				"0000:81:00.0": {ParentID: "0000:80:01.0", Link: &ginv1.PcieLink{Generation: 4, Width: 16}, NUMANode: 1},
				"0000:81:00.1": {ParentID: "0000:80:01.0", Link: &ginv1.PcieLink{Generation: 4, Width: 16}, NUMANode: 1},
				"0000:82:00.0": {ParentID: "0000:80:02.0", Link: &ginv1.PcieLink{Generation: 5, Width: 8}, NUMANode: 1},
			},
		},
		{
			name:   "malformed bridge link speed: ItemError, bridge and device still emitted",
			busIDs: []string{"0000:83:00.0"},
			wantBridges: []*ginv1.PcieBridge{
				{Id: "pci0000:80", Kind: host, NumaNode: 1},
				{Id: "0000:80:03.0", Kind: rport, ParentId: "pci0000:80", NumaNode: 1, Link: &ginv1.PcieLink{Width: 16}},
			},
			wantDevices: map[string]DevicePCIe{
				"0000:83:00.0": {ParentID: "0000:80:03.0", Link: gen5x16(), NUMANode: 1},
			},
			wantErrs: []string{s3path},
		},
		{
			name:        "absent device and malformed bus id",
			busIDs:      []string{"0000:99:00.0", "not-a-bus-id"},
			wantDevices: map[string]DevicePCIe{},
			wantErrs:    []string{"<root>/sys/bus/pci/devices/0000:99:00.0", `PCI bus id "not-a-bus-id"`},
		},
	}
	root := nodeFixture(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bridges, devices, errs := PCIeTree(root+"/sys", tt.busIDs)
			wantErrItems(t, root, errs, tt.wantErrs...)
			if len(bridges) != len(tt.wantBridges) {
				t.Errorf("got %d bridges, want %d: %v", len(bridges), len(tt.wantBridges), bridges)
			}
			for i := range min(len(bridges), len(tt.wantBridges)) {
				protoDiff(t, fmt.Sprintf("bridge %d", i), bridges[i], tt.wantBridges[i])
			}
			if len(devices) != len(tt.wantDevices) {
				t.Errorf("got %d devices, want %d: %v", len(devices), len(tt.wantDevices), devices)
			}
			for id, want := range tt.wantDevices {
				got, ok := devices[id]
				if !ok {
					t.Errorf("device %s missing", id)
					continue
				}
				if got.ParentID != want.ParentID || got.NUMANode != want.NUMANode {
					t.Errorf("device %s = %+v, want %+v", id, got, want)
				}
				protoDiff(t, "link of "+id, got.Link, want.Link)
			}
		})
	}
}

// Damaged files: a missing numa_node of the root port leaves the host
// bridge at -1; a missing device link file set yields a nil link.
func TestPCIeTreeMissingFiles(t *testing.T) {
	root := nodeFixture(t)
	remove(t, root,
		"sys/devices/pci0000:00/0000:00:01.0/numa_node",
		"sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:18:00.0/current_link_speed",
		"sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:18:00.0/current_link_width",
	)
	bridges, devices, errs := PCIeTree(root+"/sys", []string{"0000:18:00.0"})
	wantErrItems(t, root, errs,
		"<root>/sys/devices/pci0000:00/0000:00:01.0/numa_node",
		"<root>/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:18:00.0/current_link_speed",
		"<root>/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:18:00.0/current_link_width",
	)
	if len(bridges) != 4 || bridges[0].GetNumaNode() != -1 || bridges[1].GetNumaNode() != -1 {
		t.Errorf("bridges = %v; want 4 with host NUMA -1", bridges)
	}
	d := devices["0000:18:00.0"]
	if d.ParentID != "0000:02:01.0" || d.Link != nil || d.NUMANode != 0 {
		t.Errorf("device = %+v; want parent 0000:02:01.0, nil link, NUMA 0", d)
	}
}

// A device directly on a host bridge (an integrated endpoint) has the host
// bridge as parent; non-PCI path components (ACPI containers, the nested
// pci10000:e0 host bridge of a VMD domain) are stepped over.
func TestPCIeTreeShapes(t *testing.T) {
	root := materialize(t, `
-- sys/devices/pci0000:00/0000:00:02.0/numa_node --
-1
-- sys/devices/pci0000:00/0000:00:02.0/current_link_speed --
Unknown
-- sys/devices/pci0000:00/0000:00:02.0/current_link_width --
0
-- sys/bus/pci/devices/0000:00:02.0 -> ../../../devices/pci0000:00/0000:00:02.0 --
-- sys/devices/LNXSYSTM:00/pci0001:00/0001:00:00.0/numa_node --
0
-- sys/devices/LNXSYSTM:00/pci0001:00/0001:00:00.0/current_link_speed --
8.0 GT/s PCIe
-- sys/devices/LNXSYSTM:00/pci0001:00/0001:00:00.0/current_link_width --
4
-- sys/devices/LNXSYSTM:00/pci0001:00/0001:00:00.0/pci10000:e0/10000:e0:06.0/current_link_speed --
16.0 GT/s PCIe
-- sys/devices/LNXSYSTM:00/pci0001:00/0001:00:00.0/pci10000:e0/10000:e0:06.0/current_link_width --
4
-- sys/devices/LNXSYSTM:00/pci0001:00/0001:00:00.0/pci10000:e0/10000:e0:06.0/10000:e1:00.0/numa_node --
0
-- sys/devices/LNXSYSTM:00/pci0001:00/0001:00:00.0/pci10000:e0/10000:e0:06.0/10000:e1:00.0/current_link_speed --
16 GT/s
-- sys/devices/LNXSYSTM:00/pci0001:00/0001:00:00.0/pci10000:e0/10000:e0:06.0/10000:e1:00.0/current_link_width --
4
-- sys/bus/pci/devices/10000:e1:00.0 -> ../../../devices/LNXSYSTM:00/pci0001:00/0001:00:00.0/pci10000:e0/10000:e0:06.0/10000:e1:00.0 --
-- sys/devices/virtual/thing/0002:00:00.0/numa_node --
0
-- sys/bus/pci/devices/0002:00:00.0 -> ../../../devices/virtual/thing/0002:00:00.0 --
`)
	bridges, devices, errs := PCIeTree(root+"/sys", []string{"0000:00:02.0", "10000:e1:00.0", "0002:00:00.0"})
	wantErrItems(t, root, errs,
		"<root>/sys/bus/pci/devices/0002:00:00.0",
		"<root>/sys/devices/virtual/thing/0002:00:00.0/current_link_speed",
		"<root>/sys/devices/virtual/thing/0002:00:00.0/current_link_width",
	)
	want := []*ginv1.PcieBridge{
		{Id: "pci0000:00", Kind: ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_HOST_BRIDGE, NumaNode: -1},
		{Id: "pci0001:00", Kind: ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_HOST_BRIDGE, NumaNode: 0},
		{Id: "0001:00:00.0", Kind: ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_ROOT_PORT, ParentId: "pci0001:00", NumaNode: 0, Link: &ginv1.PcieLink{Generation: 3, Width: 4}},
		{Id: "10000:e0:06.0", Kind: ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH, ParentId: "0001:00:00.0", NumaNode: 0, Link: &ginv1.PcieLink{Generation: 4, Width: 4}},
	}
	if len(bridges) != len(want) {
		t.Fatalf("bridges = %v, want %v", bridges, want)
	}
	for i := range want {
		protoDiff(t, fmt.Sprint("bridge ", i), bridges[i], want[i])
	}
	if d := devices["0000:00:02.0"]; d.ParentID != "pci0000:00" || d.NUMANode != -1 || d.Link.GetGeneration() != 0 || d.Link.GetWidth() != 0 || d.Link == nil {
		t.Errorf("integrated device = %+v", d)
	}
	if d := devices["10000:e1:00.0"]; d.ParentID != "10000:e0:06.0" || d.Link.GetGeneration() != 4 {
		t.Errorf("device behind VMD = %+v", d)
	}
	if d, ok := devices["0002:00:00.0"]; !ok || d.ParentID != "" || d.NUMANode != 0 {
		t.Errorf("device without host bridge = %+v, %v; want known NUMA, no parent", d, ok)
	}
}

func TestGPUNUMA(t *testing.T) {
	root := nodeFixture(t, "-- sys/devices/pci0000:80/0000:80:02.0/0000:82:00.0/numa_node --\n-1\n")
	for _, tt := range []struct {
		bus  string
		want int32
	}{
		{"0000:07:00.0", 0},
		{"00000000:07:00.0", 0},
		{"0000:81:00.1", 1},
		{"0000:82:00.0", -1},
		{"0000:99:00.0", -1},
		{"garbage", -1},
	} {
		if got := GPUNUMA(root+"/sys", tt.bus); got != tt.want {
			t.Errorf("GPUNUMA(%q) = %d, want %d", tt.bus, got, tt.want)
		}
	}
}

func TestNormalizeBusID(t *testing.T) {
	for _, tt := range []struct {
		in, want string
		ok       bool
	}{
		{"0000:07:00.0", "0000:07:00.0", true},
		{"00000000:07:00.0", "0000:07:00.0", true},
		{"00000000:A1:00.1", "0000:a1:00.1", true},
		{"07:00.0", "0000:07:00.0", true},
		{" 0001:c1:1f.7\n", "0001:c1:1f.7", true},
		{"10000:e0:06.0", "10000:e0:06.0", true}, // VMD domain
		{"00010000:E0:06.0", "10000:e0:06.0", true},
		{"123456789:00:00.0", "", false},
		{"0000:07:00.8", "", false},
		{"0000:07:00", "", false},
		{"", "", false},
		{"pci0000:00", "", false},
	} {
		got, ok := NormalizeBusID(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("NormalizeBusID(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestAttachPCIe(t *testing.T) {
	hcas := []*ginv1.Hca{{Name: "a", PciBusId: "0000:17:00.0", NumaNode: -1}, {Name: "b", PciBusId: "0000:18:00.0", NumaNode: 1}, {Name: "c"}}
	AttachPCIe(hcas, map[string]DevicePCIe{
		"0000:17:00.0": {ParentID: "0000:04:01.0", Link: gen5x16(), NUMANode: 0},
		"0000:18:00.0": {ParentID: "0000:02:01.0", NUMANode: 0},
	})
	if h := hcas[0]; h.PcieParentId != "0000:04:01.0" || h.PcieLink.GetGeneration() != 5 || h.NumaNode != 0 {
		t.Errorf("a = %v", h)
	}
	if h := hcas[1]; h.PcieParentId != "0000:02:01.0" || h.PcieLink != nil || h.NumaNode != 1 {
		t.Errorf("b = %v", h)
	}
	if h := hcas[2]; h.PcieParentId != "" {
		t.Errorf("c = %v", h)
	}
}

func TestConfigPortKind(t *testing.T) {
	// A config space with a power-management capability at 0x40 pointing to
	// the PCI Express capability at 0x60.
	config := func(portType byte) []byte {
		b := make([]byte, 256)
		b[0x34] = 0x40
		b[0x40], b[0x41] = 0x01, 0x60
		b[0x60], b[0x61], b[0x62] = 0x10, 0x00, portType<<4|0x2
		return b
	}
	tests := []struct {
		name string
		b    []byte
		want ginv1.PcieBridgeKind
		ok   bool
	}{
		{"root port", config(0x4), ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_ROOT_PORT, true},
		{"upstream", config(0x5), ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH, true},
		{"downstream", config(0x6), ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH_DOWNSTREAM_PORT, true},
		{"endpoint", config(0x0), 0, false},
		{"only the 64-byte header (not root)", config(0x6)[:64], 0, false},
		{"capability loop", func() []byte { b := config(0x6); b[0x40], b[0x41] = 0x01, 0x40; return b }(), 0, false},
		{"too short", []byte{1, 2, 3}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "config")
			if err := os.WriteFile(p, tc.b, 0o644); err != nil {
				t.Fatal(err)
			}
			got, ok := configPortKind(p)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("configPortKind = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
