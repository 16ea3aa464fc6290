package inventory

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// validInventory is a small self-consistent node: two NVLinked GPUs under one
// PCIe switch, one NVSwitch, one HCA with one port.
func validInventory() *ginv1.NodeInventory {
	return &ginv1.NodeInventory{
		NodeName: "node001",
		Host:     &ginv1.Host{Hostname: "node001", MachineId: "m-1", NumaNodes: []*ginv1.NumaNode{{Id: 0, CpuList: "0-7"}}},
		PcieBridges: []*ginv1.PcieBridge{
			{Id: "pci0000:00", Kind: ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_HOST_BRIDGE, NumaNode: 0},
			{Id: "0000:01:00.0", Kind: ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_SWITCH, ParentId: "pci0000:00", Link: &ginv1.PcieLink{Generation: 5, Width: 16}},
		},
		Nvswitches: []*ginv1.NvSwitch{{Id: "0000:80:00.0", PciBusId: "0000:80:00.0", LinkCount: 64}},
		Gpus: []*ginv1.Gpu{
			{Uuid: "GPU-a", Index: 0, PciBusId: "0000:02:00.0", PcieParentId: "0000:01:00.0", Nvlinks: []*ginv1.NvLink{
				{Index: 0, Version: 4, RemoteType: ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_GPU, RemotePciBusId: "0000:03:00.0"},
				{Index: 1, Version: 4, RemoteType: ginv1.NvLinkRemoteType_NV_LINK_REMOTE_TYPE_SWITCH, RemotePciBusId: "0000:80:00.0"},
			}},
			{Uuid: "GPU-b", Index: 1, PciBusId: "0000:03:00.0", PcieParentId: "0000:01:00.0"},
		},
		Hcas: []*ginv1.Hca{{Name: "mlx5_0", PciBusId: "0000:04:00.0", PcieParentId: "0000:01:00.0", Ports: []*ginv1.HcaPort{{Port: 1, PortGuid: "0x0002c903004f1a2b"}}}},
	}
}

func TestValidate(t *testing.T) {
	long := strings.Repeat("x", MaxStringLen+1)
	tests := []struct {
		name   string
		mutate func(*ginv1.NodeInventory)
		field  string // expected violating field; "" means valid
	}{
		{"valid", func(*ginv1.NodeInventory) {}, ""},
		{"empty node name", func(i *ginv1.NodeInventory) { i.NodeName = "" }, "node_name"},
		{"bad node name", func(i *ginv1.NodeInventory) { i.NodeName = "node 1" }, "node_name"},
		{"duplicate GPU UUID", func(i *ginv1.NodeInventory) { i.Gpus[1].Uuid = "GPU-a" }, "gpus[1].uuid"},
		{"empty GPU UUID", func(i *ginv1.NodeInventory) { i.Gpus[0].Uuid = "" }, "gpus[0].uuid"},
		{"duplicate GPU index", func(i *ginv1.NodeInventory) { i.Gpus[1].Index = 0 }, "gpus[1].index"},
		{"duplicate PCI bus id", func(i *ginv1.NodeInventory) { i.Hcas[0].PciBusId = "0000:02:00.0" }, "hcas[0].pci_bus_id"},
		{"NVLink to missing GPU", func(i *ginv1.NodeInventory) { i.Gpus[0].Nvlinks[0].RemotePciBusId = "0000:99:00.0" }, "gpus[0].nvlinks[0].remote_pci_bus_id"},
		{"NVLink to itself", func(i *ginv1.NodeInventory) { i.Gpus[0].Nvlinks[0].RemotePciBusId = "0000:02:00.0" }, "gpus[0].nvlinks[0].remote_pci_bus_id"},
		{"NVLink to missing switch", func(i *ginv1.NodeInventory) { i.Gpus[0].Nvlinks[1].RemotePciBusId = "0000:81:00.0" }, "gpus[0].nvlinks[1].remote_pci_bus_id"},
		{"NVLink to off-node switch", func(i *ginv1.NodeInventory) { i.Gpus[0].Nvlinks[1].RemotePciBusId = "" }, ""},
		{"duplicate NVLink index", func(i *ginv1.NodeInventory) { i.Gpus[0].Nvlinks[1].Index = 0 }, "gpus[0].nvlinks[1].index"},
		{"Grace C2C link", func(i *ginv1.NodeInventory) { i.Gpus[0].C2C = &ginv1.C2CLink{LinksUp: 10, LinkMbPerS: 45000} }, ""},
		{"too many C2C links", func(i *ginv1.NodeInventory) {
			i.Gpus[0].C2C = &ginv1.C2CLink{LinksUp: MaxC2CLinks + 1, LinkMbPerS: 45000}
		}, "gpus[0].c2c.links_up"},
		{"C2C link too fast", func(i *ginv1.NodeInventory) {
			i.Gpus[1].C2C = &ginv1.C2CLink{LinksUp: 1, LinkMbPerS: MaxC2CLinkMBps + 1}
		}, "gpus[1].c2c.link_mb_per_s"},
		{"ESC in a GPU model", func(i *ginv1.NodeInventory) { i.Gpus[0].Model = "H100\x1b[2J" }, "gpus[0].model"},
		{"newline in a serial", func(i *ginv1.NodeInventory) { i.Gpus[1].Serial = "a\nb" }, "gpus[1].serial"},
		{"bidi override in a GPU model", func(i *ginv1.NodeInventory) { i.Gpus[0].Model = "H100\u202e001H" }, "gpus[0].model"},
		{"C1 control in the source", func(i *ginv1.NodeInventory) { i.Source = "sim\u009b" }, "source"},
		{"invalid UTF-8 in a GPU model", func(i *ginv1.NodeInventory) { i.Gpus[0].Model = "H100\xff" }, "gpus[0].model"},
		{"non-ASCII text is fine", func(i *ginv1.NodeInventory) { i.Gpus[0].Model = "Grafikkarte für Ärzte ✓" }, ""},
		{"health facts", func(i *ginv1.NodeInventory) {
			i.PcieBridges[1].Link = &ginv1.PcieLink{Generation: 3, Width: 8, MaxGeneration: 5, MaxWidth: 16}
			i.PcieBridges[1].Acs = &ginv1.PcieAcs{Capability: 0x5f, Control: 0x1d}
			i.Host.Iommu = &ginv1.Iommu{Mode: ginv1.IommuMode_IOMMU_MODE_PASSTHROUGH, GroupCount: 200, Cmdline: "iommu=pt"}
			i.Host.GpudirectRdma = &ginv1.GpuDirectRdma{PeermemLoaded: true}
			i.Gpus[0].VbiosVersion = "96.00.89.00.01"
			i.Gpus[0].Health = &ginv1.GpuHealth{ClockEventReasons: 0x40, Xids: []*ginv1.XidEvent{{Xid: 79}, {Xid: 48}}}
		}, ""},
		{"max link width not a width", func(i *ginv1.NodeInventory) { i.PcieBridges[1].Link.MaxWidth = 3 }, "pcie_bridges[1].link.max_width"},
		{"max link generation", func(i *ginv1.NodeInventory) { i.PcieBridges[1].Link.MaxGeneration = 9 }, "pcie_bridges[1].link.max_generation"},
		{"ACS wider than 16 bits", func(i *ginv1.NodeInventory) { i.PcieBridges[1].Acs = &ginv1.PcieAcs{Control: 0x10000} }, "pcie_bridges[1].acs"},
		{"unknown IOMMU mode", func(i *ginv1.NodeInventory) { i.Host.Iommu = &ginv1.Iommu{Mode: 99} }, "host.iommu.mode"},
		{"ESC in the IOMMU command line", func(i *ginv1.NodeInventory) { i.Host.Iommu = &ginv1.Iommu{Cmdline: "iommu=pt\x1b[2J"} }, "host.iommu.cmdline"},
		{"long VBIOS", func(i *ginv1.NodeInventory) { i.Gpus[0].VbiosVersion = long }, "gpus[0].vbios_version"},
		{"throttle reasons past the mask", func(i *ginv1.NodeInventory) { i.Gpus[0].Health = &ginv1.GpuHealth{ClockEventReasons: 1 << 40} }, "gpus[0].health.clock_event_reasons"},
		{"XID 0", func(i *ginv1.NodeInventory) { i.Gpus[0].Health = &ginv1.GpuHealth{Xids: []*ginv1.XidEvent{{Xid: 0}}} }, "gpus[0].health.xids[0].xid"},
		{"duplicate XID", func(i *ginv1.NodeInventory) {
			i.Gpus[0].Health = &ginv1.GpuHealth{Xids: []*ginv1.XidEvent{{Xid: 79}, {Xid: 79}}}
		}, "gpus[0].health.xids[1].xid"},
		{"too many XIDs", func(i *ginv1.NodeInventory) {
			h := &ginv1.GpuHealth{}
			for k := range MaxXIDsPerGPU + 1 {
				h.Xids = append(h.Xids, &ginv1.XidEvent{Xid: uint32(k + 1)})
			}
			i.Gpus[1].Health = h
		}, "gpus[1].health.xids"},
		{"too many GPUs", func(i *ginv1.NodeInventory) {
			for k := 0; k < MaxGPUs; k++ {
				i.Gpus = append(i.Gpus, &ginv1.Gpu{Uuid: "x", Index: uint32(100 + k)})
			}
		}, "gpus"},
		{"too many NVLinks", func(i *ginv1.NodeInventory) {
			for k := 0; k <= MaxNVLinksPerGPU; k++ {
				i.Gpus[1].Nvlinks = append(i.Gpus[1].Nvlinks, &ginv1.NvLink{Index: uint32(k)})
			}
		}, "gpus[1].nvlinks"},
		{"dangling PCIe parent", func(i *ginv1.NodeInventory) { i.Gpus[1].PcieParentId = "0000:77:00.0" }, "gpus[1].pcie_parent_id"},
		{"PCIe cycle", func(i *ginv1.NodeInventory) {
			i.PcieBridges = append(i.PcieBridges,
				&ginv1.PcieBridge{Id: "a", ParentId: "b"}, &ginv1.PcieBridge{Id: "b", ParentId: "a"})
		}, "pcie_bridges[2].parent_id"},
		{"host bridge with parent", func(i *ginv1.NodeInventory) { i.PcieBridges[0].ParentId = "0000:01:00.0" }, "pcie_bridges[0].parent_id"},
		{"bad PCIe width", func(i *ginv1.NodeInventory) { i.PcieBridges[1].Link.Width = 3 }, "pcie_bridges[1].link.width"},
		{"duplicate HCA", func(i *ginv1.NodeInventory) { i.Hcas = append(i.Hcas, &ginv1.Hca{Name: "mlx5_0"}) }, "hcas[1].name"},
		{"port zero", func(i *ginv1.NodeInventory) { i.Hcas[0].Ports[0].Port = 0 }, "hcas[0].ports[0].port"},
		{"too many GIDs", func(i *ginv1.NodeInventory) { i.Hcas[0].Ports[0].Gids = make([]string, MaxGIDsPerPort+1) }, "hcas[0].ports[0].gids"},
		{"string too long", func(i *ginv1.NodeInventory) { i.Gpus[0].Model = long }, "gpus[0].model"},
		{"duplicate NUMA node", func(i *ginv1.NodeInventory) { i.Host.NumaNodes = append(i.Host.NumaNodes, &ginv1.NumaNode{Id: 0}) }, "host.numa_nodes[1].id"},
		{"GPU bus id not a bus id", func(i *ginv1.NodeInventory) { i.Gpus[1].PciBusId = "unknown" }, "gpus[1].pci_bus_id"},
		{"GPU bus id in NVML's form", func(i *ginv1.NodeInventory) { i.Gpus[1].PciBusId = "00000000:03:00.0" }, "gpus[1].pci_bus_id"},
		{"NVLink remote not a bus id", func(i *ginv1.NodeInventory) { i.Gpus[0].Nvlinks[0].RemotePciBusId = "GPU-b" }, "gpus[0].nvlinks[0].remote_pci_bus_id"},
		{"NVSwitch bus id upper case", func(i *ginv1.NodeInventory) {
			i.Nvswitches[0].PciBusId = "0000:80:00.0"
			i.Nvswitches[0].Id = "0000:80:00.0"
			i.Hcas[0].PciBusId = "0000:0A:00.0"
		}, "hcas[0].pci_bus_id"},
		{"bridge id in legacy form", func(i *ginv1.NodeInventory) { i.PcieBridges[1].Id = "01:00.0" }, "pcie_bridges[1].id"},
		{"port GUID in sysfs form", func(i *ginv1.NodeInventory) { i.Hcas[0].Ports[0].PortGuid = "0002:c903:004f:1a2b" }, "hcas[0].ports[0].port_guid"},
		{"node GUID not a GUID", func(i *ginv1.NodeInventory) { i.Hcas[0].NodeGuid = "mlx5_0" }, "hcas[0].node_guid"},
		{"IB neighbor GUID without 0x", func(i *ginv1.NodeInventory) {
			i.FabricNeighbors = []*ginv1.FabricNeighbor{{Hca: "mlx5_0", Port: 1, SwitchGuid: "e09d7303007a5a68"}}
		}, "fabric_neighbors[0].switch_guid"},
		{"LLDP neighbor keeps its chassis id", func(i *ginv1.NodeInventory) {
			i.Hcas[0].Ports[0].LinkLayer = ginv1.LinkLayer_LINK_LAYER_ETHERNET
			i.FabricNeighbors = []*ginv1.FabricNeighbor{{Hca: "mlx5_0", Port: 1, SwitchGuid: "b8:59:9f:11:22:33"}}
		}, ""},
		{"neighbor without HCA", func(i *ginv1.NodeInventory) {
			i.FabricNeighbors = []*ginv1.FabricNeighbor{{SwitchGuid: "0x2"}}
		}, "fabric_neighbors[0].hca"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv := validInventory()
			tc.mutate(inv)
			err := Validate(inv)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate() = %v, want *ValidationError on %s", err, tc.field)
			}
			for _, v := range ve.Violations {
				if v.Field == tc.field {
					return
				}
			}
			t.Fatalf("violations %+v do not name %q", ve.Violations, tc.field)
		})
	}
}

func TestValidateNil(t *testing.T) {
	if err := Validate(nil); err == nil {
		t.Fatal("Validate(nil) = nil, want error")
	}
}

func TestContentHashIgnoresGenerationAndTime(t *testing.T) {
	a := validInventory()
	b := proto.CloneOf(a)
	b.Generation = 7
	ha, err := ContentHash(a)
	if err != nil {
		t.Fatal(err)
	}
	hb, _ := ContentHash(b)
	if ha != hb {
		t.Fatalf("hash changed with generation: %s vs %s", ha, hb)
	}
	b.Gpus[0].Nvlinks[0].State = ginv1.LinkState_LINK_STATE_DOWN
	hc, _ := ContentHash(b)
	if hc == ha {
		t.Fatal("hash did not change when a link went down")
	}
	if b.Generation != 7 {
		t.Fatal("ContentHash modified its input")
	}
}

func FuzzValidate(f *testing.F) {
	seed, _ := proto.Marshal(validInventory())
	f.Add(seed)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		inv := &ginv1.NodeInventory{}
		if proto.Unmarshal(b, inv) != nil {
			return
		}
		err := Validate(inv)
		var ve *ValidationError
		if err != nil && (!errors.As(err, &ve) || len(ve.Violations) == 0) {
			t.Fatalf("error without violations: %v", err)
		}
		if _, err := ContentHash(inv); err != nil {
			t.Fatal(err)
		}
	})
}

func TestContentHashIgnoresDeviceOrder(t *testing.T) {
	a := validInventory()
	a.Hcas = append(a.Hcas, &ginv1.Hca{Name: "mlx5_1"})
	b := proto.CloneOf(a)
	b.Gpus[0], b.Gpus[1] = b.Gpus[1], b.Gpus[0]
	b.Hcas[0], b.Hcas[1] = b.Hcas[1], b.Hcas[0]
	ha, _ := ContentHash(a)
	hb, _ := ContentHash(b)
	if ha != hb {
		t.Fatal("reordering GPUs and HCAs changed the content hash")
	}
}

// The content hash is part of the wire contract (agents send it in their
// Hello, the log stores it): its bytes are pinned, and it is the hash of
// the deterministic encoding of a deep copy with the generation and time
// cleared and the devices sorted, for any inventory (unknown fields
// included), without changing its input.
func TestContentHashPinned(t *testing.T) {
	if got, want := must(ContentHash(validInventory())), "a3618aefb66a0aa65859745fd23483d040c426cad4d04dae369f357b5070820a"; got != want {
		t.Fatalf("ContentHash(validInventory()) = %s, want %s (the hash agents and the log hold)", got, want)
	}
	reference := func(inv *ginv1.NodeInventory) string {
		c := proto.CloneOf(inv)
		c.Generation, c.CollectedAt = 0, nil
		slices.SortStableFunc(c.Gpus, func(a, b *ginv1.Gpu) int { return cmp.Compare(a.GetUuid(), b.GetUuid()) })
		slices.SortStableFunc(c.Hcas, func(a, b *ginv1.Hca) int { return cmp.Compare(a.GetName(), b.GetName()) })
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:])
	}
	shuffled := validInventory()
	shuffled.Hcas = append(shuffled.Hcas, &ginv1.Hca{Name: "mlx5_1"}, &ginv1.Hca{Name: "mlx5_0b"})
	slices.Reverse(shuffled.Gpus)
	slices.Reverse(shuffled.Hcas)
	shuffled.CollectedAt = timestamppb.Now()
	shuffled.Generation = 9
	unknown := validInventory()
	unknown.ProtoReflect().SetUnknown(protowire.AppendString(protowire.AppendTag(nil, 999, protowire.BytesType), "from a newer agent"))
	for _, tt := range []struct {
		name string
		inv  *ginv1.NodeInventory
	}{{"valid", validInventory()}, {"shuffled with time and generation", shuffled}, {"unknown field", unknown}, {"empty", &ginv1.NodeInventory{}}} {
		t.Run(tt.name, func(t *testing.T) {
			before := proto.CloneOf(tt.inv)
			if got, want := must(ContentHash(tt.inv)), reference(tt.inv); got != want {
				t.Errorf("ContentHash = %s, the reference %s", got, want)
			}
			if !proto.Equal(before, tt.inv) || len(before.GetGpus()) > 0 && before.Gpus[0].GetUuid() != tt.inv.Gpus[0].GetUuid() {
				t.Error("ContentHash changed its input")
			}
		})
	}
	if must(ContentHash(unknown)) == must(ContentHash(validInventory())) {
		t.Error("an unknown field does not change the hash")
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}
