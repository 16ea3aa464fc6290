package sim

import (
	"fmt"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

func TestParseFabricSpec(t *testing.T) {
	tests := []struct {
		in      string
		want    FabricSpec
		errPart string
	}{
		{"", DefaultFabricSpec(), ""},
		{"leaf-groups=2,spines=4,oversub=2", FabricSpec{2, 4, 2}, ""},
		{" spines = 8 ", FabricSpec{2, 8, 1}, ""},
		{"leaf-groups=0", FabricSpec{}, "leaf-groups 0"},
		{"spines=0", FabricSpec{}, "spines 0"},
		{"oversub=0.5", FabricSpec{}, "oversub 0.5"},
		{"oversub=65", FabricSpec{}, "oversub 65"},
		{"oversub=NaN", FabricSpec{}, "oversub"},
		{"colour=red", FabricSpec{}, "unknown key"},
		{"spines", FabricSpec{}, "key=value"},
		{"spines=x", FabricSpec{}, "spines"},
	}
	for _, tc := range tests {
		got, err := ParseFabricSpec(tc.in)
		if tc.errPart != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errPart) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.errPart)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v %v, want %+v", tc.in, got, err, tc.want)
		}
		if again, err := ParseFabricSpec(got.String()); err != nil || again != got {
			t.Errorf("%q: String() does not round-trip: %v", tc.in, err)
		}
	}
}

func fabricNodes(profile string, n int) []FabricNode {
	out := make([]FabricNode, n)
	for i := range out {
		out[i] = FabricNode{Name: fmt.Sprintf("node%03d", i), Profile: profile, Index: i}
	}
	return out
}

func TestBuildFabricShape(t *testing.T) {
	spec := FabricSpec{LeafGroups: 2, Spines: 4, Oversubscription: 2}
	nodes := append(fabricNodes("dgx-h100", 6), FabricNode{Name: "ws", Profile: "rtx3090-nvlink-pair"})
	f, nbrs, err := BuildFabric(spec, "c1", nodes)
	if err != nil {
		t.Fatal(err)
	}
	leaves, spines := 0, 0
	for _, s := range f.Switches {
		switch s.Tier {
		case 1:
			leaves++
		case 2:
			spines++
		}
	}
	if leaves != 16 || spines != 4 {
		t.Errorf("%d leaves %d spines, want 16 and 4", leaves, spines)
	}
	ca, up := 0, 0
	for _, l := range f.Links {
		if l.A.Kind == ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_HCA {
			ca++
			if l.A.Guid != PortGUID("c1", l.A.NodeName, l.A.Hca, l.A.Port) || l.RateGbps != 400 {
				t.Errorf("CA link %v", l)
			}
		} else {
			up++
		}
	}
	// 6 nodes × 8 rails; each leaf has 3 downlinks → ceil(3/2) = 2 uplinks.
	if ca != 48 || up != 32 {
		t.Errorf("%d CA links %d uplinks, want 48 and 32", ca, up)
	}
	if _, ok := nbrs["ws"]; ok || len(nbrs) != 6 || len(nbrs["node000"]) != 8 {
		t.Errorf("neighbours: %d nodes, ws present %v", len(nbrs), ok)
	}
	n := nbrs["node004"][0]
	if n.Hca != "mlx5_0" || !strings.Contains(n.SwitchDescription, "sg1-rail0") || n.Source != ginv1.FabricNeighborSource_FABRIC_NEIGHBOR_SOURCE_SIMULATED {
		t.Errorf("node004 rail 0: %v", n)
	}
	// The node reports the port GUID the fabric cabled.
	s, err := NewSource("dgx-h100", NodeOptions{NodeName: "node004", Index: 4, Cluster: "c1", Neighbors: nbrs["node004"]})
	if err != nil {
		t.Fatal(err)
	}
	i := inv(t, s)
	if len(i.FabricNeighbors) != 8 {
		t.Errorf("%d fabric neighbours", len(i.FabricNeighbors))
	}
	found := false
	for _, l := range f.Links {
		if l.A.NodeName == "node004" && l.A.Hca == "mlx5_0" && l.A.Guid == i.Hcas[0].Ports[0].PortGuid {
			found = true
		}
	}
	if !found {
		t.Error("fabric and node disagree on node004 mlx5_0's port GUID")
	}
}

func TestBuildFabricErrors(t *testing.T) {
	ok := DefaultFabricSpec()
	tests := []struct {
		name  string
		spec  FabricSpec
		nodes []FabricNode
		part  string
	}{
		{"bad spec", FabricSpec{LeafGroups: 0, Spines: 1, Oversubscription: 1}, nil, "leaf-groups"},
		{"too many", ok, make([]FabricNode, MaxFabricNodes+1), "at most"},
		{"empty name", ok, []FabricNode{{Profile: "dgx-h100"}}, "empty name"},
		{"dup", ok, []FabricNode{{Name: "a", Profile: "dgx-h100"}, {Name: "a", Profile: "dgx-h100"}}, "twice"},
		{"profile", ok, []FabricNode{{Name: "a", Profile: "vax"}}, "unknown profile"},
	}
	for _, tc := range tests {
		if _, _, err := BuildFabric(tc.spec, "c", tc.nodes); err == nil || !strings.Contains(err.Error(), tc.part) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.part)
		}
	}
	f, nbrs, err := BuildFabric(ok, "c", []FabricNode{{Name: "ws", Profile: "rtx3090-nvlink-pair"}})
	if err != nil || len(f.Switches) != 0 || len(nbrs) != 0 {
		t.Errorf("no compute HCAs: %v %v", f, err)
	}
}
