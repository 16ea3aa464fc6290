package graph

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

func TestCheckFabric(t *testing.T) {
	invs, fab, _ := simCluster(t, "dgx-h100", 4, "leaf-groups=2,spines=2,oversub=1")
	g := mustBuild(t, invs, fab)
	if errs := g.CheckFabric(fab); len(errs) != 0 {
		t.Fatalf("the simulated fabric contradicts its own inventories: %v", errs)
	}
	// Find an HCA end to tamper with.
	hcaLink := -1
	for i, l := range fab.GetLinks() {
		if l.GetA().GetKind() == ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_HCA && l.GetA().GetNodeName() != "" {
			hcaLink = i
			break
		}
	}
	if hcaLink < 0 {
		t.Fatal("no HCA link in the simulated fabric")
	}
	tests := []struct {
		name   string
		mutate func(f *ginv1.FabricTopology)
		want   string
	}{
		{"wrong port GUID for a known HCA", func(f *ginv1.FabricTopology) { f.Links[hcaLink].A.Guid = "0x00000000deadbeef" }, "inventory has port GUID"},
		{"GUID owned by another node", func(f *ginv1.FabricTopology) {
			a := f.Links[hcaLink].A
			a.Hca = "mlx5_99" // an HCA the inventory does not list: only the GUID disagrees
		}, "inventories say it is"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := proto.CloneOf(fab)
			tc.mutate(f)
			errs := g.CheckFabric(f)
			if len(errs) == 0 || !strings.Contains(errs[0].Error(), tc.want) || !strings.Contains(errs[0].Error(), "links[") {
				t.Fatalf("errors = %v, want one containing %q and naming the link", errs, tc.want)
			}
		})
	}
}
