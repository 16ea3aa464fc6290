package inventory

import (
	"testing"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// rawInventory is validInventory with identities as sources write them:
// NVML's bus ids, sysfs's GUIDs, upper case, a legacy bus id without a
// domain, an IB neighbour without "0x" and an LLDP chassis id.
func rawInventory() *ginv1.NodeInventory {
	inv := validInventory()
	inv.PcieBridges[1].Id = "01:00.0"
	inv.Nvswitches[0].PciBusId = "00000000:80:00.0"
	inv.Gpus[0].PciBusId = "00000000:02:00.0"
	inv.Gpus[0].PcieParentId = "0000:01:00.0"
	inv.Gpus[0].Nvlinks[0].RemotePciBusId = "00000000:03:00.0"
	inv.Gpus[1].PcieParentId = "00000000:01:00.0"
	inv.Hcas[0].PciBusId = "0000:04:00.0 "
	inv.Hcas[0].NodeGuid = "0002:C903:004F:1A2B"
	inv.Hcas[0].SysImageGuid = "0x2c903004f1a2b"
	inv.Hcas[0].Ports[0].PortGuid = "0002:c903:004f:1a2b"
	inv.Hcas = append(inv.Hcas, &ginv1.Hca{Name: "mlx5_1", PciBusId: "0000:05:00.0", PcieParentId: "0000:01:00.0",
		Ports: []*ginv1.HcaPort{{Port: 1, LinkLayer: ginv1.LinkLayer_LINK_LAYER_ETHERNET}}})
	inv.FabricNeighbors = []*ginv1.FabricNeighbor{
		{Hca: "mlx5_0", Port: 1, SwitchGuid: "E09D7303007A5A68"},
		{Hca: "mlx5_1", Port: 1, SwitchGuid: "b8:59:9f:11:22:33"},
	}
	return inv
}

func TestCanonical(t *testing.T) {
	raw := rawInventory()
	before := proto.CloneOf(raw)
	got, changed := Canonical(raw)
	if !changed || got == raw {
		t.Fatalf("Canonical(raw) = same inventory, changed %v; want a rewritten copy", changed)
	}
	if !proto.Equal(raw, before) {
		t.Fatal("Canonical modified its argument")
	}
	checks := []struct{ field, got, want string }{
		{"pcie_bridges[0].id (host bridge name)", got.PcieBridges[0].Id, "pci0000:00"},
		{"pcie_bridges[1].id", got.PcieBridges[1].Id, "0000:01:00.0"},
		{"pcie_bridges[1].parent_id", got.PcieBridges[1].ParentId, "pci0000:00"},
		{"nvswitches[0].pci_bus_id", got.Nvswitches[0].PciBusId, "0000:80:00.0"},
		{"gpus[0].pci_bus_id", got.Gpus[0].PciBusId, "0000:02:00.0"},
		{"gpus[0].nvlinks[0].remote_pci_bus_id", got.Gpus[0].Nvlinks[0].RemotePciBusId, "0000:03:00.0"},
		{"gpus[1].pcie_parent_id", got.Gpus[1].PcieParentId, "0000:01:00.0"},
		{"hcas[0].pci_bus_id", got.Hcas[0].PciBusId, "0000:04:00.0"},
		{"hcas[0].node_guid", got.Hcas[0].NodeGuid, "0x0002c903004f1a2b"},
		{"hcas[0].sys_image_guid", got.Hcas[0].SysImageGuid, "0x0002c903004f1a2b"},
		{"hcas[0].ports[0].port_guid", got.Hcas[0].Ports[0].PortGuid, "0x0002c903004f1a2b"},
		{"hcas[1].ports[0].port_guid (empty: unknown)", got.Hcas[1].Ports[0].PortGuid, ""},
		{"fabric_neighbors[0].switch_guid (IB)", got.FabricNeighbors[0].SwitchGuid, "0xe09d7303007a5a68"},
		{"fabric_neighbors[1].switch_guid (LLDP chassis)", got.FabricNeighbors[1].SwitchGuid, "b8:59:9f:11:22:33"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.field, c.got, c.want)
		}
	}
	if err := Validate(got); err != nil {
		t.Errorf("Validate(Canonical(raw)) = %v", err)
	}
	if err := Validate(raw); err == nil {
		t.Error("Validate(raw) = nil; want the non-canonical identities refused")
	}
	again, changed := Canonical(got)
	if changed || again != got {
		t.Errorf("Canonical(canonical) = changed %v, same %v; want the same inventory unchanged", changed, again == got)
	}
	rh, _ := ContentHash(got)
	gh, _ := ContentHash(again)
	if rh != gh {
		t.Error("hash of a canonical inventory changed by Canonical")
	}
}

func TestCanonicalKeepsWhatIsNoIdentity(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*ginv1.NodeInventory)
		read   func(*ginv1.NodeInventory) string
		want   string
	}{
		{"GPU bus id that is none", func(i *ginv1.NodeInventory) { i.Gpus[0].PciBusId = "unknown" },
			func(i *ginv1.NodeInventory) string { return i.Gpus[0].PciBusId }, "unknown"},
		{"NVSwitch UUID as its id", func(i *ginv1.NodeInventory) { i.Nvswitches[0].Id = "NVSWITCH-1a2b" },
			func(i *ginv1.NodeInventory) string { return i.Nvswitches[0].Id }, "NVSWITCH-1a2b"},
		{"node GUID that is none", func(i *ginv1.NodeInventory) { i.Hcas[0].NodeGuid = "mlx5_0" },
			func(i *ginv1.NodeInventory) string { return i.Hcas[0].NodeGuid }, "mlx5_0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv := validInventory()
			tc.mutate(inv)
			got, changed := Canonical(inv)
			if changed || got != inv {
				t.Errorf("Canonical changed an inventory whose only odd value is no identity")
			}
			if v := tc.read(got); v != tc.want {
				t.Errorf("value = %q, want %q", v, tc.want)
			}
			if Validate(got) == nil && tc.name != "NVSwitch UUID as its id" {
				t.Error("Validate accepted it")
			}
		})
	}
}

func TestCanonicalNil(t *testing.T) {
	if got, changed := Canonical(nil); got != nil || changed {
		t.Errorf("Canonical(nil) = %v, %v", got, changed)
	}
}

// FuzzCanonical puts arbitrary strings in every kind of identity field:
// Canonical never modifies its argument, is idempotent, and what it
// returns changes only identity fields.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{"00000000:07:00.0", "0002:c903:004f:1a2b", "0x0002C903004F1A2B", "pci0000:15", "", "b8:59:9f:11:22:33", "07:00.0", "x"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, bus, guid string) {
		inv := &ginv1.NodeInventory{
			NodeName:        "n1",
			PcieBridges:     []*ginv1.PcieBridge{{Id: bus, ParentId: guid}},
			Gpus:            []*ginv1.Gpu{{Uuid: "GPU-1", PciBusId: bus, PcieParentId: bus, Nvlinks: []*ginv1.NvLink{{RemotePciBusId: guid}}}},
			Hcas:            []*ginv1.Hca{{Name: "mlx5_0", NodeGuid: guid, PciBusId: guid, Ports: []*ginv1.HcaPort{{Port: 1, PortGuid: bus}}}},
			FabricNeighbors: []*ginv1.FabricNeighbor{{Hca: "mlx5_0", Port: 1, SwitchGuid: guid}},
		}
		before := proto.CloneOf(inv)
		got, changed := Canonical(inv)
		if !proto.Equal(inv, before) {
			t.Fatal("Canonical modified its argument")
		}
		if changed == (got == inv) {
			t.Fatalf("changed %v but same inventory %v", changed, got == inv)
		}
		again, changed2 := Canonical(got)
		if changed2 || again != got {
			t.Fatalf("not idempotent: %v", got)
		}
		if got.GetGpus()[0].GetUuid() != "GPU-1" || got.GetHcas()[0].GetName() != "mlx5_0" || got.GetNodeName() != "n1" {
			t.Fatal("a field that is no identity changed")
		}
	})
}

// BenchmarkCanonical: the check every inventory pays (already canonical)
// and the rewrite an older agent's inventory pays.
func BenchmarkCanonical(b *testing.B) {
	for _, c := range []struct {
		name string
		inv  *ginv1.NodeInventory
	}{{"canonical", validInventory()}, {"source-form", rawInventory()}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Canonical(c.inv)
			}
		})
	}
}
