package kubelabels

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/export"
	"github.com/gin-topology/gin/internal/nodelabels"
	"github.com/gin-topology/gin/internal/state"
)

// simStore is a state holding n simulated nodes of profile on spec's fabric.
func simStore(t testing.TB, profile string, n int, spec *sim.FabricSpec) (*state.Store, *sim.Cluster) {
	t.Helper()
	nodes := make([]sim.FabricNode, n)
	for i := range nodes {
		nodes[i] = sim.FabricNode{Name: fmt.Sprintf("node%03d", i+1), Profile: profile, Index: i}
	}
	c, err := sim.NewCluster("test", spec, nodes)
	if err != nil {
		t.Fatal(err)
	}
	st := state.New(nil)
	idx := uint64(1)
	if c.Fabric != nil {
		if _, err := st.ImportFabric(idx, &statev1.ImportFabric{Fabric: c.Fabric}); err != nil {
			t.Fatal(err)
		}
		idx++
	}
	for _, src := range c.Sources {
		inv, err := src.Collect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.PutInventory(idx, &statev1.PutInventory{Inventory: inv}); err != nil {
			t.Fatal(err)
		}
		idx++
	}
	return st, c
}

func TestDesired(t *testing.T) {
	st, _ := simStore(t, "gb200-nvl72", 36, &sim.FabricSpec{LeafGroups: 2, Spines: 2, Oversubscription: 1})
	v := st.View()
	model, err := export.Build(v.Graph)
	if err != nil {
		t.Fatal(err)
	}
	ps := placements(model)
	for _, topograph := range []bool{false, true} {
		got := mustDesired(t, v, StateHealth{}, topograph)
		if len(got) != 36 {
			t.Fatalf("%d nodes labelled, want 36", len(got))
		}
		for n, l := range got {
			p := ps[n]
			want := map[string]string{nodelabels.KeyLeaf: p.leaf, nodelabels.KeySpine: p.spine, nodelabels.KeyBlock: p.block, nodelabels.KeyNVLinkDomain: nodelabels.Value(p.nvlinkDomain), nodelabels.KeyHealth: "pass"}
			if topograph {
				want[nodelabels.TopographTier0], want[nodelabels.TopographTier1], want[nodelabels.TopographDomain] = p.leaf, p.spine, nodelabels.Value(p.nvlinkDomain)
			}
			if p.leaf == "" || p.spine == "" || p.block == "" {
				t.Errorf("%s: placement %+v: the fixture has leaves, spines and blocks", n, p)
			}
			if !equal(l, want) {
				t.Errorf("%s (topograph %v): labels %v, want %v", n, topograph, l, want)
			}
			for k, val := range l {
				if errs := validation.IsQualifiedName(k); len(errs) > 0 {
					t.Errorf("%s: key %q: %v", n, k, errs)
				}
				if errs := validation.IsValidLabelValue(val); len(errs) > 0 {
					t.Errorf("%s: %s=%q: %v", n, k, val, errs)
				}
			}
		}
	}
	// Two NVL72 racks: two blocks, two domains.
	blocks, domains := map[string]bool{}, map[string]bool{}
	for _, l := range mustDesired(t, v, StateHealth{}, false) {
		blocks[l[nodelabels.KeyBlock]], domains[l[nodelabels.KeyNVLinkDomain]] = true, true
	}
	if len(blocks) != 2 || len(domains) != 2 {
		t.Errorf("blocks %v, domains %v: want 2 of each", blocks, domains)
	}
}

func TestStateHealth(t *testing.T) {
	st, c := simStore(t, "dgx-h100", 4, &sim.FabricSpec{LeafGroups: 1, Spines: 1, Oversubscription: 1})
	// node002 DOWN; node003 with a compute port down (a new inventory).
	if _, err := st.SetNodeState(100, &statev1.SetNodeState{NodeName: "node002", State: ginv1.NodeState_NODE_STATE_DOWN}); err != nil {
		t.Fatal(err)
	}
	src := c.Sources[2]
	inv, err := src.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hca := ""
	for _, h := range inv.GetHcas() {
		if h.GetRole() == ginv1.HcaRole_HCA_ROLE_COMPUTE {
			hca = h.GetName()
			break
		}
	}
	if err := src.SetPortState(hca, 1, false, 0); err != nil {
		t.Fatal(err)
	}
	inv, err = src.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	inv.Generation++
	if _, err := st.PutInventory(101, &statev1.PutInventory{Inventory: inv}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for n, l := range mustDesired(t, st.View(), StateHealth{}, false) {
		got[n] = l[nodelabels.KeyHealth]
	}
	want := map[string]string{"node001": "pass", "node002": "fail", "node003": "fail", "node004": "pass"}
	if !equal(got, want) {
		t.Fatalf("verdicts %v, want %v", got, want)
	}
}

// fixedHealth is a Health that says what it is told (the health checks'
// verdicts plug in the same way).
type fixedHealth map[string]nodelabels.Verdict

func (f fixedHealth) Verdicts(state.View) map[string]nodelabels.Verdict { return f }

func TestHealthPlugsIn(t *testing.T) {
	st, _ := simStore(t, "dgx-h100", 2, nil)
	got := mustDesired(t, st.View(), fixedHealth{"node002": nodelabels.Warn}, false)
	if got["node001"][nodelabels.KeyHealth] != "pass" || got["node002"][nodelabels.KeyHealth] != "warn" {
		t.Fatalf("health labels %v", got)
	}
	// No fabric: no leaf switch known, so the node is under "unknown", and
	// no spine key at all.
	if _, ok := got["node001"][nodelabels.KeySpine]; ok || got["node001"][nodelabels.KeyLeaf] != export.UnknownSwitch {
		t.Fatalf("labels without a fabric: %v", got["node001"])
	}
}

func mustDesired(t *testing.T, v state.View, h Health, topograph bool) map[string]map[string]string {
	t.Helper()
	got, err := Desired(v, h, topograph)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
