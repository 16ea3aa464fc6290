package master

import (
	"context"
	"testing"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/state"
)

// TestPortCoverage: the simulated fabric connects every compute port of
// its nodes; a fabric of other GUIDs connects none; storage ports are not
// counted.
func TestPortCoverage(t *testing.T) {
	nodes := []sim.FabricNode{{Name: "node001", Profile: "dgx-h100", Index: 0}, {Name: "node002", Profile: "dgx-h100", Index: 1}}
	spec := sim.DefaultFabricSpec()
	c, err := sim.NewCluster("t", &spec, nodes)
	if err != nil {
		t.Fatal(err)
	}
	fabric := c.Fabric
	invs, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st := state.New(nil)
	for i, n := range nodes {
		inv := invs[i]
		inv.Generation = 1
		if _, err := st.PutInventory(uint64(i+1), &statev1.PutInventory{Inventory: inv, ContentHash: n.Name}); err != nil {
			t.Fatal(err)
		}
	}
	other := &ginv1.FabricTopology{Links: []*ginv1.FabricLink{{
		A: &ginv1.FabricEndpoint{Kind: ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_HCA, Guid: "0xdeadbeef00000001", Port: 1},
		B: &ginv1.FabricEndpoint{Kind: ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH, Guid: "0xdeadbeef00000002", Port: 1},
	}}}
	tests := []struct {
		name                   string
		fabric                 *ginv1.FabricTopology
		wantCompute, wantMatch uint32
	}{
		{"the cluster's own fabric", fabric, 16, 16},
		{"another fabric", other, 16, 0},
		{"no fabric", nil, 16, 0},
	}
	for _, tc := range tests {
		compute, matched := portCoverage(st.View(), tc.fabric)
		if compute != tc.wantCompute || matched != tc.wantMatch {
			t.Errorf("%s: %d of %d ports matched, want %d of %d", tc.name, matched, compute, tc.wantMatch, tc.wantCompute)
		}
	}
}
