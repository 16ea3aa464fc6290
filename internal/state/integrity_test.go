package state

import (
	"errors"
	"strings"
	"testing"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/inventory"
)

// TestContentHashVerifiedOnApplyAndRestore: an inventory whose content no
// longer matches its (well-formed) content hash is refused with
// ErrContentHashMismatch, from a log entry and from a snapshot, and
// nothing of it is stored; a matching one is stored.
func TestContentHashVerifiedOnApplyAndRestore(t *testing.T) {
	good := &ginv1.NodeInventory{NodeName: "node001", Generation: 1, Host: &ginv1.Host{MachineId: "m1"},
		Gpus: []*ginv1.Gpu{{Uuid: "GPU-1", Model: "NVIDIA H100 80GB HBM3"}}}
	hash, err := inventory.ContentHash(good)
	if err != nil {
		t.Fatal(err)
	}
	bad := &ginv1.NodeInventory{NodeName: "node001", Generation: 1, Host: &ginv1.Host{MachineId: "m1"},
		Gpus: []*ginv1.Gpu{{Uuid: "GPU-1", Model: "NVIDIA H666 80GB HBM3"}}}
	cases := []struct {
		name string
		inv  *ginv1.NodeInventory
		ok   bool
	}{{"matches", good, true}, {"a byte changed", bad, false}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(nil)
			_, err := s.PutInventory(1, &statev1.PutInventory{Inventory: tc.inv, ContentHash: hash})
			if tc.ok != (err == nil) || !tc.ok && (!errors.Is(err, ErrContentHashMismatch) || !strings.Contains(err.Error(), "node001")) {
				t.Fatalf("log entry: %v, want ok %v (or ErrContentHashMismatch naming the node)", err, tc.ok)
			}
			if _, stored := s.Node("node001"); stored != tc.ok {
				t.Fatalf("log entry: stored %v, want %v", stored, tc.ok)
			}
			snap := &statev1.Snapshot{FormatVersion: SnapshotFormat, Nodes: []*statev1.NodeRecord{{Inventory: tc.inv, ContentHash: hash}}}
			err = New(nil).Restore(1, snap)
			if tc.ok != (err == nil) || !tc.ok && !errors.Is(err, ErrContentHashMismatch) {
				t.Fatalf("snapshot: %v, want ok %v (or ErrContentHashMismatch)", err, tc.ok)
			}
		})
	}
}
