package sim

import (
	"context"
	"strings"
	"testing"
)

func TestNewCluster(t *testing.T) {
	spec := DefaultFabricSpec()
	tests := []struct {
		name      string
		spec      *FabricSpec
		nodes     []FabricNode
		wantErr   string
		wantNames string
	}{
		{"on a fabric", &spec, NodesOf("dgx-h100", "node", 1, 3), "", "node001,node002,node003"},
		{"without a fabric", nil, NodesOf("pcie-8gpu", "gpu", 0, 2), "", "gpu000,gpu001"},
		{"an unknown profile", nil, NodesOf("dgx-h900", "node", 0, 1), "node node000", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewCluster("t", tc.spec, tc.nodes)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("NewCluster = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(c.Names(), ","); got != tc.wantNames {
				t.Fatalf("names %s, want %s", got, tc.wantNames)
			}
			if (c.Fabric != nil) != (tc.spec != nil) {
				t.Fatalf("fabric %v with spec %v", c.Fabric != nil, tc.spec != nil)
			}
			invs, err := c.Collect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			cabled := 0
			for i, inv := range invs {
				if inv.GetNodeName() != tc.nodes[i].Name || len(inv.GetGpus()) == 0 {
					t.Fatalf("inventory %d: node %q with %d GPUs", i, inv.GetNodeName(), len(inv.GetGpus()))
				}
				for _, n := range inv.GetFabricNeighbors() {
					if n.GetSwitchGuid() != "" {
						cabled++
					}
				}
			}
			if (cabled > 0) != (tc.spec != nil) {
				t.Fatalf("%d ports name a neighbour (fabric: %v)", cabled, tc.spec != nil)
			}
		})
	}
}
