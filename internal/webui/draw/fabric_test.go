package draw

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
)

// devFaults is the dev cluster of the e2e test: four DGX H100 in two leaf
// groups, GPU3's NVLink 7 down on node002, node004 down, and for a cable
// mark node003's first compute port down.
func devFaults(c *sim.Cluster) error {
	if err := source(c, "node002").SetNVLinkState(3, 7, false); err != nil {
		return err
	}
	return source(c, "node003").SetPortState("mlx5_0", 1, false, 0)
}

func drawFabric(t *testing.T, in FabricInput) []byte {
	t.Helper()
	in.NodeHref, in.ExpandHref = nodeHref, expandHref
	var b bytes.Buffer
	if err := Fabric(&b, in); err != nil {
		t.Fatal(err)
	}
	wellFormed(t, b.Bytes())
	return b.Bytes()
}

// wellFormed fails when b is not one well-formed XML document.
func wellFormed(t *testing.T, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("not well-formed SVG: %v", err)
		}
	}
}

var dataNodeRE = regexp.MustCompile(`data-node="([^"]+)"`)

func dataNodes(b []byte) map[string]int {
	out := map[string]int{}
	for _, m := range dataNodeRE.FindAllSubmatch(b, -1) {
		out[string(m[1])]++
	}
	return out
}

// attrsOf returns the attributes of the element carrying data-node="name".
func elementOf(b []byte, attr, name string) string {
	s := string(b)
	i := strings.Index(s, attr+`="`+name+`"`)
	if i < 0 {
		return ""
	}
	start := strings.LastIndex(s[:i], "<")
	end := strings.Index(s[i:], ">")
	return s[start : i+end+1]
}

func TestFabricDevCluster(t *testing.T) {
	c := simCluster(t, "dgx-h100", 4, sim.DefaultFabricSpec(), devFaults, map[string]ginv1.NodeState{"node004": ginv1.NodeState_NODE_STATE_DOWN})
	got := drawFabric(t, FabricInput{Nodes: c.nodes, Graph: c.g, Fabric: c.fabric, Highlight: map[string]bool{"node001": true}})
	golden(t, "fabric-dev.svg", got)

	dn := dataNodes(got)
	for _, n := range []string{"node001", "node002", "node003", "node004"} {
		if dn[n] != 1 {
			t.Errorf("%s drawn %d times, want once", n, dn[n])
		}
	}
	tests := []struct{ node, class string }{
		{"node001", "n pass job"}, {"node002", "n warn"}, {"node003", "n warn"}, {"node004", "n down"},
	}
	for _, tc := range tests {
		if e := elementOf(got, "data-node", tc.node); !strings.Contains(e, `class="`+tc.class+`"`) {
			t.Errorf("%s drawn as %s, want class %q", tc.node, e, tc.class)
		}
	}
	if !bytes.Contains(got, []byte(`data-link="node003/mlx5_0/1"`)) {
		t.Error("node003's down compute port is not marked")
	}
	if !bytes.Contains(got, []byte("2 groups")) || !bytes.Contains(got, []byte("4 spines")) {
		t.Error("headline does not count 4 spines and 2 groups")
	}
}

// A down uplink marks its group's link; a group with every cable up does not.
func TestFabricUplinkDown(t *testing.T) {
	c := simCluster(t, "dgx-h100", 4, sim.DefaultFabricSpec(), nil, nil)
	var downed string
	for _, l := range c.fabric.Links {
		if l.A.Kind == ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH && l.B.Kind == ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH {
			l.State = ginv1.LinkState_LINK_STATE_DOWN
			downed = l.A.Guid
			break
		}
	}
	got := drawFabric(t, FabricInput{Nodes: c.nodes, Graph: c.g, Fabric: c.fabric})
	if n := bytes.Count(got, []byte(`class="ul deg"`)); n != 1 {
		t.Fatalf("%d groups with degraded uplinks drawn, want 1 (cable from %s down)", n, downed)
	}
	if n := bytes.Count(got, []byte(`class="ul up"`)); n != 1 {
		t.Fatalf("%d groups with healthy uplinks, want 1", n)
	}
	if !bytes.Contains(got, []byte("down, 0 slower")) {
		t.Fatal("the degraded group's uplinks are not counted in words")
	}
}

// GB200 NVL72 trays: the nodes of one NVLink domain are outlined together.
func TestFabricNVLinkDomains(t *testing.T) {
	c := simCluster(t, "gb200-nvl72", 36, sim.FabricSpec{LeafGroups: 2, Spines: 2, Oversubscription: 1}, nil, nil)
	got := drawFabric(t, FabricInput{Nodes: c.nodes, Graph: c.g, Fabric: c.fabric})
	golden(t, "fabric-gb200.svg", got)
	domains := map[string]bool{}
	for _, n := range c.nodes {
		if n.NvlinkDomain == "" {
			t.Fatalf("%s in no NVLink domain", n.Name)
		}
		domains[n.NvlinkDomain] = true
	}
	for d := range domains {
		if !bytes.Contains(got, []byte(`data-domain="`+d+`"`)) {
			t.Errorf("domain %s not outlined", d)
		}
	}
	if len(dataNodes(got)) != 36 {
		t.Errorf("%d nodes drawn, want 36", len(dataNodes(got)))
	}
}

// Above CollapseAbove nodes the groups are counts; the faulty and
// highlighted nodes are still drawn, once each; an expanded group draws
// all of its nodes.
func TestFabricCollapses(t *testing.T) {
	n := CollapseAbove + 88
	c := simCluster(t, "dgx-h100", n, sim.FabricSpec{LeafGroups: 8, Spines: 4, Oversubscription: 1}, func(c *sim.Cluster) error {
		return source(c, "node300").SetNVLinkState(0, 0, false)
	}, map[string]ginv1.NodeState{"node010": ginv1.NodeState_NODE_STATE_DRAINING})
	got := drawFabric(t, FabricInput{Nodes: c.nodes, Graph: c.g, Fabric: c.fabric, Highlight: map[string]bool{"node500": true}})
	dn := dataNodes(got)
	if len(dn) != 3 || dn["node300"] != 1 || dn["node010"] != 1 || dn["node500"] != 1 {
		t.Fatalf("collapsed fabric draws %v, want node010, node300 and node500 once each", dn)
	}
	if !bytes.Contains(got, []byte("Faults under: ")) || bytes.Count(got, []byte(`<a href="#g-`)) != 2 {
		t.Fatalf("collapsed fabric does not link the 2 groups with faults (node010's, node300's) from its headline")
	}
	if n := bytes.Count(got, []byte("expand ▸")); n != 8 {
		t.Fatalf("%d expand links, want one per group (8)", n)
	}
	key, _ := c.g.NodeLeaf("node001")
	got = drawFabric(t, FabricInput{Nodes: c.nodes, Graph: c.g, Fabric: c.fabric, Expanded: map[string]bool{key: true}})
	per := (n + 7) / 8
	if dn := dataNodes(got); len(dn) != per+1 || dn["node300"] != 1 || dn["node001"] != 1 || dn[fmt.Sprintf("node%03d", per)] != 1 {
		t.Fatalf("expanding node001's group draws %d nodes, want its %d (node010 among them) and node300", len(dn), per)
	}
	got = drawFabric(t, FabricInput{Nodes: c.nodes, Graph: c.g, Fabric: c.fabric, ExpandAll: true})
	if dn := dataNodes(got); len(dn) != n {
		t.Fatalf("expand all draws %d nodes, want %d", len(dn), n)
	}
}

// Without a fabric scan the nodes are grouped by the leaf their summaries
// name, and the picture says so.
func TestFabricWithoutScan(t *testing.T) {
	nodes := []*ginv1.NodeSummary{
		{Name: "a1", State: ginv1.NodeState_NODE_STATE_UP, LeafSwitch: "leafA"},
		{Name: "a2", State: ginv1.NodeState_NODE_STATE_UP},
		{Name: "<b>&amp;", State: ginv1.NodeState_NODE_STATE_UP, LeafSwitch: `"><script>`},
	}
	got := drawFabric(t, FabricInput{Nodes: nodes})
	if !bytes.Contains(got, []byte("No fabric scan imported")) || !bytes.Contains(got, []byte("no leaf known")) {
		t.Fatalf("picture without a scan does not say so:\n%s", got)
	}
	if bytes.Contains(got, []byte("<script")) || bytes.Contains(got, []byte("<b>")) {
		t.Fatal("names are not escaped")
	}
}

// A running job's suspects are drawn apart from its other nodes: a class,
// a red ring outside the tile, the label in the title and data-suspect,
// and a legend entry only when there are any; a collapsed group still
// draws a marked node.
func TestFabricMarked(t *testing.T) {
	c := simCluster(t, "dgx-h100", 4, sim.DefaultFabricSpec(), devFaults, nil)
	in := FabricInput{Nodes: c.nodes, Graph: c.g, Fabric: c.fabric,
		Highlight: map[string]bool{"node001": true, "node002": true},
		Marked:    map[string]string{"node002": "slow-link mlx5_3 <b>"}}
	got := drawFabric(t, in)
	if e := elementOf(got, "data-node", "node002"); !strings.Contains(e, `class="n warn job suspect"`) ||
		!strings.Contains(e, `data-suspect="slow-link mlx5_3 &lt;b&gt;"`) {
		t.Errorf("marked node002 drawn as %s", e)
	}
	if e := elementOf(got, "data-node", "node001"); !strings.Contains(e, `class="n pass job"`) || strings.Contains(e, "data-suspect") {
		t.Errorf("highlighted node001 drawn as %s, want a job's node, not a suspect", e)
	}
	if !bytes.Contains(got, []byte("<title>suspect: slow-link mlx5_3 &lt;b&gt;; node002: up")) {
		t.Error("the suspect's label is not in its title")
	}
	if n := bytes.Count(got, []byte(`class="sus"`)); n != 2 {
		t.Errorf("%d suspect rings, want node002's and the legend's", n)
	}
	if !bytes.Contains(got, []byte(">suspect</text>")) {
		t.Error("no legend entry for suspects")
	}
	if bytes.Contains(got, []byte("<b>")) {
		t.Error("label not escaped")
	}
	// Drawn the same twice (map order does not leak into the picture).
	if again := drawFabric(t, in); !bytes.Equal(got, again) {
		t.Error("the picture differs between two draws")
	}
	in.Marked = nil
	if got := drawFabric(t, in); bytes.Contains(got, []byte(`class="sus"`)) || bytes.Contains(got, []byte(">suspect<")) {
		t.Error("suspect ring or legend drawn without suspects")
	}

	big := simCluster(t, "dgx-h100", CollapseAbove+8, sim.FabricSpec{LeafGroups: 4, Spines: 2, Oversubscription: 1}, nil, nil)
	got = drawFabric(t, FabricInput{Nodes: big.nodes, Graph: big.g, Fabric: big.fabric, Marked: map[string]string{"node300": "straggler gpu3"}})
	if dn := dataNodes(got); len(dn) != 1 || dn["node300"] != 1 {
		t.Fatalf("collapsed fabric draws %v, want the marked node300 only", dn)
	}
}
