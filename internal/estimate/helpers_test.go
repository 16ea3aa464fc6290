package estimate

import (
	"context"
	"fmt"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/graph"
)

const testCluster = "test"

// simPart is a run of nodes of one profile, named prefix + 3 digits.
type simPart struct {
	profile string
	count   int
	prefix  string
	names   []string // explicit names instead of count and prefix
}

// simGraph builds the graph of a simulated cluster: the parts' nodes in
// order (Index counts across parts), cabled into a fat tree of the spec
// ("" for the default, "none" for no fabric).
func simGraph(t testing.TB, spec string, parts ...simPart) *graph.Graph {
	t.Helper()
	g, _ := simGraphHook(t, spec, nil, parts...)
	return g
}

// simGraphHook is simGraph with a hook that may rewire the fabric before
// the graph is built.
func simGraphHook(t testing.TB, spec string, hook func(*ginv1.FabricTopology), parts ...simPart) (*graph.Graph, []*ginv1.NodeInventory) {
	t.Helper()
	var fnodes []sim.FabricNode
	for _, p := range parts {
		prefix := p.prefix
		if prefix == "" {
			prefix = "node"
		}
		names := p.names
		for range p.count {
			names = append(names, fmt.Sprintf("%s%03d", prefix, len(fnodes)+len(names)-len(p.names)))
		}
		for _, name := range names {
			fnodes = append(fnodes, sim.FabricNode{Name: name, Profile: p.profile, Index: len(fnodes)})
		}
	}
	var fs *sim.FabricSpec
	if spec != "none" {
		parsed, err := sim.ParseFabricSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		fs = &parsed
	}
	c, err := sim.NewCluster(testCluster, fs, fnodes)
	if err != nil {
		t.Fatal(err)
	}
	if hook != nil {
		hook(c.Fabric)
	}
	invs, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build(invs, c.Fabric)
	if err != nil {
		t.Fatal(err)
	}
	return g, invs
}

// threeTier rewires a simulated two-tier fat tree of 4 leaf groups and 2
// spines into three tiers: leaf groups 0 and 1 hang under spine0 only,
// groups 2 and 3 under spine1 only, and both spines under one core switch.
func threeTier(f *ginv1.FabricTopology) {
	guid := map[string]string{}
	for _, s := range f.Switches {
		guid[s.Description] = s.Guid
	}
	spineOf := map[string]string{}
	for g := range 4 {
		for r := range 8 {
			if leaf, ok := guid[fmt.Sprintf("sim sg%d-rail%d-leaf", g, r)]; ok {
				spineOf[leaf] = guid[fmt.Sprintf("sim spine%d", g/2)]
			}
		}
	}
	for _, l := range f.Links {
		if sp, ok := spineOf[l.A.Guid]; ok && l.B.Kind == ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH {
			l.B.Guid = sp
		}
	}
	core := &ginv1.FabricSwitch{Guid: "0x00000000c0de0001", Description: "sim core0", Tier: 3}
	f.Switches = append(f.Switches, core)
	for s := range 2 {
		for range 8 {
			f.Links = append(f.Links, &ginv1.FabricLink{
				A:        &ginv1.FabricEndpoint{Kind: ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH, Guid: guid[fmt.Sprintf("sim spine%d", s)]},
				B:        &ginv1.FabricEndpoint{Kind: ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH, Guid: core.Guid},
				RateGbps: 400, State: ginv1.LinkState_LINK_STATE_UP,
			})
		}
	}
}
