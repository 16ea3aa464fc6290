package state

import (
	"testing"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/inventory"
)

// oldInventory is a node as a master older than canonical identities
// stored it: the agent's source's forms (sysfs GUIDs, NVML bus ids).
func oldInventory(gen uint64) *ginv1.NodeInventory {
	return &ginv1.NodeInventory{
		NodeName: "n1", Generation: gen, Host: &ginv1.Host{MachineId: "m"},
		Gpus: []*ginv1.Gpu{{Uuid: "GPU-1", PciBusId: "00000000:07:00.0"}},
		Hcas: []*ginv1.Hca{{Name: "mlx5_0", PciBusId: "0000:0c:00.0", NodeGuid: "a088:c203:0045:2e10",
			Ports: []*ginv1.HcaPort{{Port: 1, PortGuid: "a088:c203:0045:2e10"}}}},
	}
}

func checkCanonical(t *testing.T, rec *statev1.NodeRecord) {
	t.Helper()
	inv := rec.GetInventory()
	if got := inv.GetGpus()[0].GetPciBusId(); got != "0000:07:00.0" {
		t.Errorf("stored GPU bus id %q, want 0000:07:00.0", got)
	}
	if got := inv.GetHcas()[0].GetNodeGuid(); got != "0xa088c20300452e10" {
		t.Errorf("stored node GUID %q, want 0xa088c20300452e10", got)
	}
	want, err := inventory.ContentHash(inv)
	if err != nil {
		t.Fatal(err)
	}
	if rec.GetContentHash() != want {
		t.Errorf("stored hash %.12s is not the hash of the stored inventory (%.12s): an agent would never be in sync", rec.GetContentHash(), want)
	}
}

// A log entry written before identities were canonical is stored in the
// canonical form, under the canonical form's hash; the agent's re-send of
// the same content (canonical, its own hash) is then a duplicate.
func TestPutInventoryCanonicalisesOldEntries(t *testing.T) {
	s := New(nil)
	res, err := s.PutInventory(1, &statev1.PutInventory{Inventory: oldInventory(4), ContentHash: "hash-of-the-raw-form"})
	if err != nil || !res.Changed {
		t.Fatalf("PutInventory = %+v, %v", res, err)
	}
	rec, _ := s.Node("n1")
	checkCanonical(t, rec)

	c, _ := inventory.Canonical(oldInventory(4))
	h, _ := inventory.ContentHash(c)
	res, err = s.PutInventory(2, &statev1.PutInventory{Inventory: c, ContentHash: h})
	if err != nil || res.Changed {
		t.Fatalf("re-send of the same content in canonical form = %+v, %v; want a duplicate", res, err)
	}
}

// A snapshot taken before identities were canonical restores, canonical.
func TestRestoreCanonicalisesOldSnapshots(t *testing.T) {
	snap := &statev1.Snapshot{FormatVersion: SnapshotFormat, Nodes: []*statev1.NodeRecord{{
		Inventory: oldInventory(2), ContentHash: "hash-of-the-raw-form", State: ginv1.NodeState_NODE_STATE_UP, UpdatedIndex: 5,
	}}}
	raw := snap.GetNodes()[0]
	s := New(nil)
	if err := s.Restore(5, snap); err != nil {
		t.Fatalf("Restore(old snapshot) = %v", err)
	}
	rec, ok := s.Node("n1")
	if !ok {
		t.Fatal("node missing after restore")
	}
	checkCanonical(t, rec)
	if rec.GetUpdatedIndex() != 5 || rec.GetState() != ginv1.NodeState_NODE_STATE_UP {
		t.Errorf("restored record lost its fields: %v", rec)
	}
	if raw.GetInventory().GetGpus()[0].GetPciBusId() != "00000000:07:00.0" {
		t.Error("Restore modified the snapshot it was given")
	}
	if _, ok := s.Graph().NodeInfo("n1"); !ok {
		t.Error("restored node is not in the graph")
	}
}
