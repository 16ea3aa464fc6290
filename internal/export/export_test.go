package export

import (
	"bufio"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/fabricscan"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/graph"
)

// dgxCluster: 8 DGX H100 in 2 leaf groups (8 rail leaves each), 4 spines.
func dgxCluster(t testing.TB) ([]*ginv1.NodeInventory, *graph.Graph) {
	invs, fab := simCluster(t, "dgx-h100", nodeNames("dgx", 8), &sim.FabricSpec{LeafGroups: 2, Spines: 4, Oversubscription: 1})
	return invs, mustBuild(t, invs, fab)
}

// nvl72Cluster: 36 GB200 trays = 2 NVL72 racks, 2 leaf groups, 2 spines.
func nvl72Cluster(t testing.TB) ([]*ginv1.NodeInventory, *graph.Graph) {
	invs, fab := simCluster(t, "gb200-nvl72", nodeNames("gb", 36), &sim.FabricSpec{LeafGroups: 2, Spines: 2, Oversubscription: 1})
	return invs, mustBuild(t, invs, fab)
}

func TestGolden(t *testing.T) {
	dgxInvs, dgx := dgxCluster(t)
	nvlInvs, nvl := nvl72Cluster(t)
	a100Invs, _ := simCluster(t, "dgx-a100", []string{"a100"}, nil)
	a100 := mustBuild(t, a100Invs, nil)
	pcieInvs, _ := simCluster(t, "pcie-8gpu", []string{"ws"}, nil)
	pcie := mustBuild(t, pcieInvs, nil)
	cases := []struct {
		name string
		run  func() ([]byte, error)
	}{
		{"dgx-h100-8.tree.conf", func() ([]byte, error) { return SlurmTree(dgx) }},
		{"dgx-h100-8.json", func() ([]byte, error) { return JSON(dgx) }},
		{"dgx-h100-8.dot", func() ([]byte, error) { return DOT(dgx) }},
		{"dgx-h100.nccl.xml", func() ([]byte, error) { return NCCLTopo(dgx, dgxInvs[0]) }},
		{"gb200-nvl72-36.block.conf", func() ([]byte, error) { return SlurmBlock(nvl) }},
		{"gb200-nvl72-36.tree.conf", func() ([]byte, error) { return SlurmTree(nvl) }},
		{"gb200-nvl72.nccl.xml", func() ([]byte, error) { return NCCLTopo(nvl, nvlInvs[0]) }},
		{"dgx-a100.nccl.xml", func() ([]byte, error) { return NCCLTopo(a100, a100Invs[0]) }},
		{"pcie-8gpu.nccl.xml", func() ([]byte, error) { return NCCLTopo(pcie, pcieInvs[0]) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.run()
			if err != nil {
				t.Fatal(err)
			}
			again, _ := c.run()
			if string(again) != string(got) {
				t.Fatal("output is not deterministic")
			}
			golden(t, c.name, got)
		})
	}
}

func TestSlurmTreeSim(t *testing.T) {
	_, dgx := dgxCluster(t)
	conf, err := SlurmTree(dgx)
	if err != nil {
		t.Fatal(err)
	}
	tr := parseTree(t, conf, dgx.Nodes())
	// Rail-optimised: each scalable unit's 8 rail leaves are one Slurm leaf,
	// the 4 spines (connected to every leaf) one switch above them.
	if got := tr.nodes["leaf01"]; strings.Join(got, ",") != "dgx000,dgx001,dgx002,dgx003" {
		t.Errorf("leaf01 = %v", got)
	}
	if got := tr.nodes["leaf02"]; strings.Join(got, ",") != "dgx004,dgx005,dgx006,dgx007" {
		t.Errorf("leaf02 = %v", got)
	}
	if got := tr.switches["spine01"]; strings.Join(got, ",") != "leaf01,leaf02" {
		t.Errorf("spine01 = %v", got)
	}
	if len(tr.guids["leaf01"]) != 8 || len(tr.guids["spine01"]) != 4 {
		t.Errorf("comment GUIDs: leaf01 %d (want 8), spine01 %d (want 4)", len(tr.guids["leaf01"]), len(tr.guids["spine01"]))
	}
}

// hand-made fabrics: one compute port per node.
type tinyLink struct{ a, b string } // switch GUIDs, lower tier first

func tinyGraph(t *testing.T, nodeLeaf map[string]string, descs map[string]string, tiers map[string]uint32, links []tinyLink, nbrOnly map[string]string) *graph.Graph {
	t.Helper()
	fab := &ginv1.FabricTopology{Source: "test"}
	var sws []string
	for s := range tiers {
		sws = append(sws, s)
	}
	sort.Strings(sws)
	for _, s := range sws {
		fab.Switches = append(fab.Switches, &ginv1.FabricSwitch{Guid: s, Description: descs[s], Tier: tiers[s]})
	}
	var invs []*ginv1.NodeInventory
	var names []string
	for n := range nodeLeaf {
		names = append(names, n)
	}
	for n := range nbrOnly {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		pg := "0x00000000000a" + strconv.FormatInt(int64(0x1000+i), 16)
		inv := &ginv1.NodeInventory{NodeName: n, Hcas: []*ginv1.Hca{{Name: "mlx5_0", Role: ginv1.HcaRole_HCA_ROLE_COMPUTE,
			Ports: []*ginv1.HcaPort{{Port: 1, PortGuid: pg, State: ginv1.PortState_PORT_STATE_ACTIVE, RateGbps: 400}}}}}
		if leaf := nodeLeaf[n]; leaf != "" {
			fab.Links = append(fab.Links, &ginv1.FabricLink{
				A:        &ginv1.FabricEndpoint{Kind: ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_HCA, Guid: pg},
				B:        &ginv1.FabricEndpoint{Kind: ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH, Guid: leaf},
				RateGbps: 400, State: ginv1.LinkState_LINK_STATE_UP})
		}
		if sw := nbrOnly[n]; sw != "" {
			inv.FabricNeighbors = []*ginv1.FabricNeighbor{{Hca: "mlx5_0", Port: 1, SwitchGuid: sw, RateGbps: 400}}
		}
		invs = append(invs, inv)
	}
	for _, l := range links {
		fab.Links = append(fab.Links, &ginv1.FabricLink{
			A:        &ginv1.FabricEndpoint{Kind: ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH, Guid: l.a},
			B:        &ginv1.FabricEndpoint{Kind: ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH, Guid: l.b},
			RateGbps: 400, State: ginv1.LinkState_LINK_STATE_UP})
	}
	return mustBuild(t, invs, fab)
}

func TestSlurmTreeShapes(t *testing.T) {
	const (
		l1, l2, l3, l4 = "0x0000000000000011", "0x0000000000000012", "0x0000000000000013", "0x0000000000000014"
		s1, s2, s3, s4 = "0x0000000000000021", "0x0000000000000022", "0x0000000000000023", "0x0000000000000024"
		c1             = "0x0000000000000031"
	)
	cases := []struct {
		name    string
		g       func(t *testing.T) *graph.Graph
		want    []string // lines that must be present
		wantNot []string
	}{
		{
			name: "fat tree: spines merged, leaves named from MF0 descriptions",
			g: func(t *testing.T) *graph.Graph {
				return tinyGraph(t, map[string]string{"n1": l1, "n2": l1, "n3": l2},
					map[string]string{l1: "MF0;A09-P1-IBLEAF-01:MQM9701/U1", l2: "MF0;A09-P1-IBLEAF-02:MQM9701/U1", s1: "MF0;SPINE-1:MQM9701/U1", s2: "MF0;SPINE-2:MQM9701/U1"},
					map[string]uint32{l1: 1, l2: 1, s1: 2, s2: 2},
					[]tinyLink{{l1, s1}, {l1, s2}, {l2, s1}, {l2, s2}}, nil)
			},
			want: []string{"SwitchName=A09-P1-IBLEAF-01 Nodes=n[1-2]", "SwitchName=A09-P1-IBLEAF-02 Nodes=n3", "SwitchName=spine01 Switches=A09-P1-IBLEAF-[01-02]",
				`# spine01: 0x0000000000000021 "MF0;SPINE-1:MQM9701/U1" tier 2`},
			wantNot: []string{"SwitchName=root"},
		},
		{
			name: "two disjoint fabrics: two top switches, no common root",
			g: func(t *testing.T) *graph.Graph {
				return tinyGraph(t, map[string]string{"n1": l1, "n2": l2}, nil,
					map[string]uint32{l1: 1, l2: 1, s1: 2, s2: 2}, []tinyLink{{l1, s1}, {l2, s2}}, nil)
			},
			want: []string{"SwitchName=leaf01 Nodes=n1", "SwitchName=leaf02 Nodes=n2", "SwitchName=spine01 Switches=leaf01",
				"SwitchName=spine02 Switches=leaf02", "# 2 separate trees (top switches spine01, spine02): no switch connects them, so Slurm keeps each job"},
			wantNot: []string{"SwitchName=root", "Switches=spine"},
		},
		{
			name: "three tiers: pods merged under one core",
			g: func(t *testing.T) *graph.Graph {
				return tinyGraph(t, map[string]string{"n1": l1, "n2": l2, "n3": l3, "n4": l4}, nil,
					map[string]uint32{l1: 1, l2: 1, l3: 1, l4: 1, s1: 2, s2: 2, s3: 2, s4: 2, c1: 3},
					[]tinyLink{{l1, s1}, {l1, s2}, {l2, s1}, {l2, s2}, {l3, s3}, {l3, s4}, {l4, s3}, {l4, s4}, {s1, c1}, {s2, c1}, {s3, c1}, {s4, c1}}, nil)
			},
			want:    []string{"SwitchName=spine01 Switches=leaf[01-02]", "SwitchName=spine02 Switches=leaf[03-04]", "SwitchName=core01 Switches=spine[01-02]"},
			wantNot: []string{"SwitchName=root"},
		},
		{
			name: "unknown nodes and inventory-only leaves",
			g: func(t *testing.T) *graph.Graph {
				return tinyGraph(t, map[string]string{"n1": l1, "n2": ""}, nil,
					map[string]uint32{l1: 1, s1: 2}, []tinyLink{{l1, s1}}, map[string]string{"n3": "0x00000000000000ff"})
			},
			want: []string{"SwitchName=unknown Nodes=n2", "# 3 separate trees (top switches leaf02, spine01, unknown): no switch connects them, so Slurm keeps each job",
				"# leaf02: 0x00000000000000ff \"\" tier 1, known only from node inventories"},
			wantNot: []string{"SwitchName=root"},
		},
		{
			name: "no fabric at all: one unknown switch",
			g: func(t *testing.T) *graph.Graph {
				return tinyGraph(t, map[string]string{"n1": "", "n2": ""}, nil, map[string]uint32{}, nil, nil)
			},
			want:    []string{"SwitchName=unknown Nodes=n[1-2]"},
			wantNot: []string{"SwitchName=root"},
		},
		{
			name: "duplicate descriptions fall back to generated names",
			g: func(t *testing.T) *graph.Graph {
				return tinyGraph(t, map[string]string{"n1": l1, "n2": l2}, map[string]string{l1: "same", l2: "same", s1: "leaf01"},
					map[string]uint32{l1: 1, l2: 1, s1: 2}, []tinyLink{{l1, s1}, {l2, s1}}, nil)
			},
			want: []string{"SwitchName=leaf02 Nodes=n1", "SwitchName=leaf03 Nodes=n2", "SwitchName=leaf01 Switches=leaf[02-03]"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := c.g(t)
			conf, err := SlurmTree(g)
			if err != nil {
				t.Fatal(err)
			}
			parseTree(t, conf, g.Nodes())
			for _, w := range c.want {
				if !strings.Contains(string(conf), w+"\n") {
					t.Errorf("missing line %q in\n%s", w, conf)
				}
			}
			for _, w := range c.wantNot {
				if strings.Contains(string(conf), w) {
					t.Errorf("unexpected %q in\n%s", w, conf)
				}
			}
		})
	}
}

func TestSlurmErrors(t *testing.T) {
	empty, _ := graph.Build(nil, nil)
	if _, err := SlurmTree(empty); err == nil {
		t.Error("SlurmTree(empty graph): no error")
	}
	if _, err := SlurmBlock(empty); err == nil {
		t.Error("SlurmBlock(empty graph): no error")
	}
	_, dgx := dgxCluster(t)
	_, err := SlurmBlock(dgx)
	if err == nil || !strings.Contains(err.Error(), "MNNVL") || !strings.Contains(err.Error(), "dgx[000-007]") {
		t.Errorf("SlurmBlock(DGX H100) = %v, want an error naming MNNVL and the nodes", err)
	}
	bad := mustBuild(t, []*ginv1.NodeInventory{{NodeName: "a,b"}}, nil)
	if _, err := SlurmTree(bad); err == nil {
		t.Error("SlurmTree with node name a,b: no error")
	}
}

func TestSlurmBlockSizes(t *testing.T) {
	cases := []struct {
		trays int
		want  string
	}{
		{18, "BlockSizes=18\n"},
		{20, "BlockSizes=2,4\n"}, // a partial second rack sets the base
		{36, "BlockSizes=18,36\n"},
		{72, "BlockSizes=18,36,72\n"},
	}
	for _, c := range cases {
		invs, _ := simCluster(t, "gb200-nvl72", nodeNames("gb", c.trays), nil)
		out, err := SlurmBlock(mustBuild(t, invs, nil))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(out), c.want) {
			t.Errorf("%d trays: got\n%s\nwant suffix %q", c.trays, out, c.want)
		}
		if n := strings.Count(string(out), "BlockName="); n != (c.trays+17)/18 {
			t.Errorf("%d trays: %d blocks", c.trays, n)
		}
	}
}

// caPort is one named HCA port of the ibnetdiscover fixture.
type caPort struct{ dev, portGUID, leafGUID string }

var (
	caLine   = regexp.MustCompile(`^Ca\s+\d+\s+"H-[0-9a-f]+"\s+#\s+"(\S+) (\S+)"$`)
	caPortLn = regexp.MustCompile(`^\[\d+\]\(([0-9a-f]+)\)\s+"S-([0-9a-f]+)"\[\d+\]`)
)

// fixtureHosts reads the hosts of the fixture and their HCA ports.
func fixtureHosts(t *testing.T, path string) map[string][]caPort {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hosts := map[string][]caPort{}
	sc := bufio.NewScanner(f)
	var host, dev string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := caLine.FindStringSubmatch(line); m != nil {
			host, dev = m[1], m[2]
			continue
		}
		if host != "" {
			if m := caPortLn.FindStringSubmatch(line); m != nil {
				hosts[host] = append(hosts[host], caPort{dev, "0x" + m[1], "0x" + m[2]})
			}
			host = ""
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return hosts
}

func TestSlurmTreeIBNetDiscoverFixture(t *testing.T) {
	const path = "../discovery/fabricscan/testdata/ibnetdiscover/fat-tree-123-hosts.out"
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	fab, err := fabricscan.ParseIBNetDiscover(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	hosts := fixtureHosts(t, path)
	var names []string
	for h := range hosts {
		if strings.Contains(h, "dgx") {
			names = append(names, h)
		}
	}
	sort.Strings(names)
	if len(names) < 40 {
		t.Fatalf("only %d DGX hosts in the fixture", len(names))
	}
	// Every 7th host: a spread over the scalable units.
	var picked []string
	for i := 0; i < len(names); i += 7 {
		picked = append(picked, names[i])
	}
	var invs []*ginv1.NodeInventory
	for _, h := range picked {
		inv := &ginv1.NodeInventory{NodeName: h}
		for _, p := range hosts[h] {
			inv.Hcas = append(inv.Hcas, &ginv1.Hca{Name: p.dev, Role: ginv1.HcaRole_HCA_ROLE_COMPUTE,
				Ports: []*ginv1.HcaPort{{Port: 1, PortGuid: p.portGUID, State: ginv1.PortState_PORT_STATE_ACTIVE, RateGbps: 400}}})
		}
		invs = append(invs, inv)
	}
	// A host the fabric does not know.
	invs = append(invs, &ginv1.NodeInventory{NodeName: "stray01", Hcas: []*ginv1.Hca{{Name: "mlx5_0", Role: ginv1.HcaRole_HCA_ROLE_COMPUTE,
		Ports: []*ginv1.HcaPort{{Port: 1, PortGuid: "0x1234567812345678", State: ginv1.PortState_PORT_STATE_ACTIVE}}}}})
	g := mustBuild(t, invs, fab)
	conf, err := SlurmTree(g)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "ibnetdiscover-fixture.tree.conf", conf)
	tr := parseTree(t, conf, g.Nodes())
	for _, h := range picked {
		sw := tr.leafOf(h)
		got := map[string]bool{}
		for _, guid := range tr.guids[sw] {
			got[guid] = true
		}
		for _, p := range hosts[h] {
			if !got[p.leafGUID] {
				t.Errorf("host %s (%s, port %s) is under %s, whose switches %v do not include its real leaf %s",
					h, p.dev, p.portGUID, sw, tr.guids[sw], p.leafGUID)
			}
		}
	}
	if tr.leafOf("stray01") != UnknownSwitch {
		t.Errorf("stray01 under %q, want %s", tr.leafOf("stray01"), UnknownSwitch)
	}
	if !strings.Contains(string(conf), "IBLEAF") && !strings.Contains(string(conf), "IBSPINE") {
		t.Error("no fixture switch description in the comments")
	}
}

func TestJSONSchema(t *testing.T) {
	_, dgx := dgxCluster(t)
	out, err := JSON(dgx)
	if err != nil {
		t.Fatal(err)
	}
	var doc Document
	dec := json.NewDecoder(strings.NewReader(string(out)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.Schema != JSONSchema || len(doc.Nodes) != 8 || len(doc.Switches) != 2*8+4 {
		t.Fatalf("schema %q, %d nodes, %d switches", doc.Schema, len(doc.Nodes), len(doc.Switches))
	}
	ids := map[string]bool{}
	for _, s := range doc.Switches {
		ids[s.ID] = true
	}
	ports := 0
	for _, n := range doc.Nodes {
		if len(n.GPUs) != 8 || n.Leaf == "" || n.ComputePortsTotal != 8 {
			t.Errorf("node %s: %d GPUs, leaf %q, %d compute ports", n.Name, len(n.GPUs), n.Leaf, n.ComputePortsTotal)
		}
		for _, nic := range n.NICs {
			for _, p := range nic.Ports {
				ids[p.ID] = true
				if p.Rail != nil {
					ports++
				}
			}
		}
	}
	portLinks, swLinks := 0, 0
	for _, l := range doc.Links {
		if !ids[l.A] || !ids[l.B] || l.RateGbps != 400 {
			t.Fatalf("link %+v: unknown endpoint or rate", l)
		}
		switch l.Kind {
		case "port":
			portLinks++
		case "switch":
			swLinks++
		}
	}
	if portLinks != ports || swLinks != 16*4 {
		t.Errorf("%d port links (want %d), %d switch links (want 64)", portLinks, ports, swLinks)
	}
}

var (
	dotVertex = regexp.MustCompile(`^\s+("(?:[^"\\]|\\.)*") \[`)
	dotEdge   = regexp.MustCompile(`^\s+("(?:[^"\\]|\\.)*") -- ("(?:[^"\\]|\\.)*") \[label="[^"]*"\];$`)
)

func TestDOTParses(t *testing.T) {
	_, dgx := dgxCluster(t)
	_, nvl := nvl72Cluster(t)
	for name, g := range map[string]*graph.Graph{"dgx": dgx, "nvl72": nvl} {
		out, err := DOT(g)
		if err != nil {
			t.Fatal(err)
		}
		s := string(out)
		if !strings.HasPrefix(s, "graph \"gin\" {\n") || !strings.HasSuffix(s, "}\n") {
			t.Fatalf("%s: not a graph", name)
		}
		depth := 0
		inQuote := false
		for i := 0; i < len(s); i++ {
			switch c := s[i]; {
			case c == '\\' && inQuote:
				i++
			case c == '"':
				inQuote = !inQuote
			case c == '{' && !inQuote:
				depth++
			case c == '}' && !inQuote:
				depth--
				if depth < 0 {
					t.Fatalf("%s: unbalanced braces", name)
				}
			}
		}
		if depth != 0 || inQuote {
			t.Fatalf("%s: unbalanced braces (%d) or quotes", name, depth)
		}
		declared := map[string]bool{}
		edges := 0
		for _, line := range strings.Split(s, "\n") {
			if m := dotEdge.FindStringSubmatch(line); m != nil {
				edges++
				if !declared[m[1]] || !declared[m[2]] {
					t.Fatalf("%s: edge %s -- %s before its endpoints are declared", name, m[1], m[2])
				}
				continue
			}
			if m := dotVertex.FindStringSubmatch(line); m != nil {
				declared[m[1]] = true
			}
		}
		if edges == 0 || len(declared) != g.Len()+len(g.Switches()) {
			t.Fatalf("%s: %d edges, %d vertices", name, edges, len(declared))
		}
	}
}

// xmlElem is a generic XML element for structure checks.
type xmlElem struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Kids    []xmlElem  `xml:",any"`
}

func (e xmlElem) attr(k string) string {
	for _, a := range e.Attrs {
		if a.Name.Local == k {
			return a.Value
		}
	}
	return ""
}

// ncclNesting is what NCCL's topology parser accepts (nccl-plugin.md §5.1).
var ncclNesting = map[string][]string{
	"system": {"cpu"}, "cpu": {"pci", "nic"}, "pci": {"pci", "gpu", "nic", "pcilink"},
	"gpu": {"nvlink", "c2c"}, "nic": {"net"},
}

func TestNCCLTopoStructure(t *testing.T) {
	for _, profile := range sim.Profiles() {
		t.Run(profile, func(t *testing.T) {
			invs, _ := simCluster(t, profile, []string{"n0"}, nil)
			inv := invs[0]
			out, err := NCCLTopo(mustBuild(t, invs, nil), inv)
			if err != nil {
				t.Fatal(err)
			}
			var root xmlElem
			dec := xml.NewDecoder(strings.NewReader(string(out)))
			if err := dec.Decode(&root); err != nil {
				t.Fatalf("not well-formed: %v\n%s", err, out)
			}
			for {
				tok, err := dec.Token()
				if errors.Is(err, io.EOF) {
					break
				}
				if cd, ok := tok.(xml.CharData); err != nil || !ok || strings.TrimSpace(string(cd)) != "" {
					t.Fatalf("trailing content after </system>: %v %v", tok, err)
				}
			}
			if root.XMLName.Local != "system" || root.attr("version") != "1" {
				t.Fatalf("root <%s version=%q>", root.XMLName.Local, root.attr("version"))
			}
			gpus := map[string]xmlElem{} // busid → gpu
			var nets []xmlElem
			var walk func(parent, e xmlElem)
			walk = func(parent, e xmlElem) {
				if len(e.Attrs) > 16 || len(e.Kids) > 640 {
					t.Errorf("<%s>: %d attributes, %d children", e.XMLName.Local, len(e.Attrs), len(e.Kids))
				}
				for _, a := range e.Attrs {
					if len(a.Value) > 255 || len(a.Name.Local) > 255 {
						t.Errorf("<%s %s>: too long", e.XMLName.Local, a.Name.Local)
					}
				}
				switch e.XMLName.Local {
				case "gpu":
					gpus[parent.attr("busid")] = e
				case "net":
					nets = append(nets, e)
				case "cpu":
					if e.attr("numaid") == "" {
						t.Error("cpu without numaid")
					}
				case "pci":
					if e.attr("busid") == "" || e.attr("class") == "" {
						t.Errorf("pci %v without busid or class", e.Attrs)
					}
				}
				for _, k := range e.Kids {
					ok := false
					for _, allowed := range ncclNesting[e.XMLName.Local] {
						ok = ok || k.XMLName.Local == allowed
					}
					if !ok {
						t.Errorf("<%s> inside <%s>", k.XMLName.Local, e.XMLName.Local)
					}
					walk(e, k)
				}
			}
			walk(xmlElem{}, root)
			if len(gpus) != len(inv.Gpus) {
				t.Fatalf("%d gpus in the XML, %d in the inventory", len(gpus), len(inv.Gpus))
			}
			for _, g := range inv.Gpus {
				x, ok := gpus[g.PciBusId]
				if !ok {
					t.Fatalf("GPU%d (%s) not under a pci with its busid", g.Index, g.PciBusId)
				}
				if x.attr("dev") != strconv.Itoa(int(g.Index)) || x.attr("sm") != strconv.Itoa(int(g.ComputeCapabilityMajor*10+g.ComputeCapabilityMinor)) {
					t.Errorf("GPU%d: dev %q sm %q", g.Index, x.attr("dev"), x.attr("sm"))
				}
				up, sum := 0, 0
				for _, l := range g.Nvlinks {
					if l.State == ginv1.LinkState_LINK_STATE_UP {
						up++
					}
				}
				for _, l := range x.Kids {
					if l.XMLName.Local == "c2c" { // a Grace GPU's C2C link, not an NVLink
						continue
					}
					n, _ := strconv.Atoi(l.attr("count"))
					sum += n
					if l.attr("target") == "" || (l.attr("tclass") != ncclClassNVSwitch && l.attr("tclass") != ncclClassGPU) {
						t.Errorf("GPU%d: nvlink %v", g.Index, l.Attrs)
					}
				}
				if sum != up {
					t.Errorf("GPU%d: %d NVLinks in the XML, %d UP in the inventory", g.Index, sum, up)
				}
			}
			active := 0
			for _, h := range inv.Hcas {
				for _, p := range h.Ports {
					if p.State == ginv1.PortState_PORT_STATE_ACTIVE {
						active++
					}
				}
			}
			if len(nets) != active {
				t.Errorf("%d nets, %d active ports", len(nets), active)
			}
			devs := map[string]bool{}
			for _, n := range nets {
				devs[n.attr("dev")] = true
			}
			for i := range nets {
				if !devs[strconv.Itoa(i)] {
					t.Errorf("no net with dev %d", i)
				}
			}
			for _, n := range nets {
				if n.attr("name") == "" || !strings.HasSuffix(n.attr("speed"), "000") || !strings.HasPrefix(n.attr("guid"), "0x") {
					t.Errorf("net %v", n.Attrs)
				}
			}
		})
	}
}

func TestNCCLTopoDetails(t *testing.T) {
	invs, _ := simCluster(t, "dgx-h100", []string{"n0"}, nil)
	g := mustBuild(t, invs, nil)
	out, err := NCCLTopo(g, invs[0])
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{
		`<system version="1">`,
		`arch="x86_64" vendor="GenuineIntel"`,
		`link_speed="32.0 GT/s PCIe" link_width="16"`,
		`sm="90" rank="0" gdr="1"`,
		`tclass="0x068000"/>`,
		`<net name="mlx5_0" dev="0" speed="400000" port="1" latency="0.000000" guid="0x`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q", want)
		}
	}
	// The same node with its identities as sources write them (NVML bus
	// ids, sysfs GUIDs) writes the same file: both are read canonical.
	raw := proto.CloneOf(invs[0])
	for _, gp := range raw.Gpus {
		gp.PciBusId = "0000" + strings.ToUpper(gp.PciBusId)
		for _, l := range gp.Nvlinks {
			if l.RemotePciBusId != "" {
				l.RemotePciBusId = "0000" + strings.ToUpper(l.RemotePciBusId)
			}
		}
	}
	for _, b := range raw.PcieBridges {
		if strings.Count(b.Id, ":") == 2 {
			b.Id = strings.ToUpper(b.Id)
		}
	}
	if rawOut, err := NCCLTopo(g, raw); err != nil || string(rawOut) != s {
		t.Errorf("source-form identities change the file (err %v)", err)
	}

	tests := []struct {
		name string
		g    *graph.Graph
		inv  *ginv1.NodeInventory
	}{
		{"nil inventory", g, nil},
		{"nil graph", nil, invs[0]},
		{"node not in the graph", g, &ginv1.NodeInventory{NodeName: "x", Gpus: []*ginv1.Gpu{{Index: 0, PcieParentId: "nope"}}}},
		{"GPU without bus id", mustBuild(t, []*ginv1.NodeInventory{{NodeName: "x", Gpus: []*ginv1.Gpu{{Index: 0}}}}, nil),
			&ginv1.NodeInventory{NodeName: "x", Gpus: []*ginv1.Gpu{{Index: 0}}}},
	}
	for _, tc := range tests {
		if _, err := NCCLTopo(tc.g, tc.inv); err == nil {
			t.Errorf("NCCLTopo(%s): no error", tc.name)
		}
	}
}

func TestCPUMask(t *testing.T) {
	cases := []struct {
		list string
		max  int
		want string
	}{
		{"0-3", 7, "0000000f"},
		{"0-71", 143, "00000000,00000000,000000ff,ffffffff,ffffffff"},
		{"72-143", 143, "0000ffff,ffffffff,ffffff00,00000000,00000000"},
		{"0-55,112-167", 223, "00000000,000000ff,ffffffff,ffff0000,00000000,00ffffff,ffffffff"},
	}
	for _, c := range cases {
		got, ok := cpuMask(c.list, c.max)
		if !ok || got != c.want {
			t.Errorf("cpuMask(%q, %d) = %q, %v; want %q", c.list, c.max, got, ok, c.want)
		}
	}
	if _, ok := cpuMask("3-1", 7); ok {
		t.Error("cpuMask(3-1) ok")
	}
}

func TestSlurmName(t *testing.T) {
	cases := map[string]string{
		"MF0;A09-P1-IBLEAF-04-04:MQM9701/U1": "A09-P1-IBLEAF-04-04",
		"sim sg0-rail0-leaf":                 "sim-sg0-rail0-leaf",
		"  weird   name!! ":                  "weird-name",
		"":                                   "",
		"###":                                "",
		strings.Repeat("x", 65):              "",
	}
	for in, want := range cases {
		if got := slurmName(in); got != want {
			t.Errorf("slurmName(%q) = %q, want %q", in, got, want)
		}
	}
}
