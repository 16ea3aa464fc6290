package fabricscan

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

const (
	fatTree   = "testdata/ibnetdiscover/fat-tree-123-hosts.out"
	malformed = "testdata/ibnetdiscover/malformed.out"
)

func readFile(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixtureTruth counts the fixture by regexp over its lines, independently of
// the parser: non-SHARP CAs, switches, and switches with a port line to a
// non-SHARP CA (the leaves).
type fixtureTruth struct {
	hcas, switches, leaves int
	hosts                  map[string]bool // distinct first words of named HCA descriptions
	unnamed                int             // HCAs with the default "MT4129 ..." description
	portLines              int
}

func countFixture(t *testing.T, b []byte) fixtureTruth {
	t.Helper()
	caRe := regexp.MustCompile(`^Ca\s+\d+\s+"H-[0-9a-f]+"\s+#\s+"([^"]*)"$`)
	swRe := regexp.MustCompile(`^Switch\s+\d+\s+"S-[0-9a-f]+"`)
	toHCARe := regexp.MustCompile(`^\[\d+\]\s+"H-[0-9a-f]+"\[\d+\]\([0-9a-f]+\)\s+#\s+"([^"]*)"`)
	tr := fixtureTruth{hosts: map[string]bool{}}
	inSwitch, leaf := false, false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "[") {
			tr.portLines++
		}
		switch {
		case swRe.MatchString(l):
			tr.switches++
			inSwitch, leaf = true, false
		case l == "":
			if inSwitch && leaf {
				tr.leaves++
			}
			inSwitch = false
		case inSwitch:
			if m := toHCARe.FindStringSubmatch(l); m != nil && !strings.Contains(m[1], "Aggregation Node") {
				leaf = true
			}
		}
		if m := caRe.FindStringSubmatch(l); m != nil && !strings.Contains(m[1], "Aggregation Node") {
			tr.hcas++
			if strings.HasPrefix(m[1], "MT4129 ") {
				tr.unnamed++
			} else {
				tr.hosts[strings.Fields(m[1])[0]] = true
			}
		}
	}
	if inSwitch && leaf {
		tr.leaves++
	}
	return tr
}

func TestParseIBNetDiscoverFatTree(t *testing.T) {
	b := readFile(t, fatTree)
	truth := countFixture(t, b)
	// The regexp count must agree with what was read off the file by hand
	// (grep/awk, see testdata/README.md).
	if truth.hcas != 542 || truth.switches != 40 || truth.leaves != 31 || len(truth.hosts) != 122 || truth.unnamed != 69 || truth.portLines != 2228 {
		t.Fatalf("independent count = %+v hosts=%d, want 542 HCAs, 40 switches, 31 leaves, 122 hosts, 69 unnamed, 2228 port lines", truth, len(truth.hosts))
	}

	topo, err := ParseIBNetDiscover(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if topo.Source != "ibnetdiscover" {
		t.Errorf("source = %q", topo.Source)
	}
	tiers := map[uint32]int{}
	swByGUID := map[string]*ginv1.FabricSwitch{}
	for _, sw := range topo.Switches {
		tiers[sw.Tier]++
		swByGUID[sw.Guid] = sw
		wantTier := uint32(1)
		if strings.Contains(sw.Description, "IBSPINE") {
			wantTier = 2
		}
		if sw.Tier != wantTier {
			t.Errorf("switch %s %q tier %d, want %d", sw.Guid, sw.Description, sw.Tier, wantTier)
		}
		if sw.PortCount != 65 || sw.Lid == 0 {
			t.Errorf("switch %s: port_count %d lid %d", sw.Guid, sw.PortCount, sw.Lid)
		}
	}
	if len(topo.Switches) != truth.switches || tiers[1] != truth.leaves || tiers[2] != truth.switches-truth.leaves || len(tiers) != 2 {
		t.Errorf("switches %d tiers %v, want %d leaves and %d spines", len(topo.Switches), tiers, truth.leaves, truth.switches-truth.leaves)
	}

	hcaPorts := map[string]*ginv1.FabricLink{}
	hosts := map[string]bool{}
	var swsw, unnamed int
	for _, l := range topo.Links {
		if l.RateGbps != 400 || l.State != ginv1.LinkState_LINK_STATE_UP {
			t.Errorf("link %v: rate %d state %v, want 400 (4xNDR) UP", l, l.RateGbps, l.State)
		}
		if l.B.Kind != ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH || swByGUID[l.B.Guid] == nil {
			t.Fatalf("link B end %v is not a listed switch", l.B)
		}
		switch l.A.Kind {
		case ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_HCA:
			if hcaPorts[l.A.Guid] != nil {
				t.Errorf("HCA port %s cabled twice", l.A.Guid)
			}
			hcaPorts[l.A.Guid] = l
			if swByGUID[l.B.Guid].Tier != 1 {
				t.Errorf("HCA %v on tier-%d switch", l.A, swByGUID[l.B.Guid].Tier)
			}
			if l.A.NodeName == "" {
				unnamed++
			} else {
				hosts[l.A.NodeName] = true
			}
		case ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH:
			swsw++
			if swByGUID[l.A.Guid].Tier != 1 || swByGUID[l.B.Guid].Tier != 2 {
				t.Errorf("switch link %v→%v is not leaf→spine", l.A, l.B)
			}
		default:
			t.Fatalf("link A end %v", l.A)
		}
	}
	if len(hcaPorts) != truth.hcas || len(hosts) != len(truth.hosts) || unnamed != truth.unnamed {
		t.Errorf("HCA ports %d (hosts %d, unnamed %d), want %d (%d, %d)", len(hcaPorts), len(hosts), unnamed, truth.hcas, len(truth.hosts), truth.unnamed)
	}
	// 2228 port lines = 1114 cables, less the 40 SHARP ones.
	if want := truth.portLines/2 - 40; len(topo.Links) != want || swsw != want-truth.hcas {
		t.Errorf("links %d (switch-switch %d), want %d (%d)", len(topo.Links), swsw, want, want-truth.hcas)
	}
	for g, sw := range swByGUID {
		if strings.Contains(sw.Description, "Aggregation") {
			t.Errorf("SHARP node %s listed", g)
		}
	}

	// A few hosts' leaf switches, read off the file.
	for _, c := range []struct {
		portGUID, host, hca, leaf, leafDesc string
		port, leafPort                      uint32
	}{
		{"0xe09d7303007a5a68", "a08-p1-dgx-04-c17", "mlx5_5", "0x2c5eab0300b87b40", "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1", 1, 17},
		{"0xe09d7303007a4bd8", "a08-p1-dgx-04-c01", "mlx5_5", "0x2c5eab0300b87b40", "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1", 1, 1},
		{"0xe09d730300857d78", "a06-p1-dgx-02-c01", "HCA-6", "0x2c5eab0300b87bc0", "MF0;A09-P1-IBLEAF-04-02:MQM9701/U1", 1, 1},
		{"0xe09d730300858d88", "", "", "0x2c5eab0300b87bc0", "MF0;A09-P1-IBLEAF-04-02:MQM9701/U1", 1, 6}, // "MT4129 ConnectX7   Mellanox Technologies"
	} {
		l := hcaPorts[c.portGUID]
		if l == nil {
			t.Errorf("HCA port %s missing", c.portGUID)
			continue
		}
		if l.A.NodeName != c.host || l.A.Hca != c.hca || l.A.Port != c.port || l.B.Guid != c.leaf || l.B.Port != c.leafPort {
			t.Errorf("HCA %s: got %v → %v, want %s %s port %d → %s port %d", c.portGUID, l.A, l.B, c.host, c.hca, c.port, c.leaf, c.leafPort)
		}
		if d := swByGUID[c.leaf].Description; d != c.leafDesc {
			t.Errorf("leaf %s description %q, want %q", c.leaf, d, c.leafDesc)
		}
	}
	// One leaf-spine cable: A09-P1-IBLEAF-04-04 port 35 → A10-P1-IBSPINE-02 port 32.
	found := false
	for _, l := range topo.Links {
		if l.A.Guid == "0x2c5eab0300b87b40" && l.A.Port == 35 {
			found = l.B.Guid == "0x2c5eab0300c26280" && l.B.Port == 32
		}
	}
	if !found {
		t.Error("leaf 0x2c5eab0300b87b40 port 35 → spine 0x2c5eab0300c26280 port 32 missing")
	}
	if sw := swByGUID["0x2c5eab0300b87b40"]; sw.Lid != 73 {
		t.Errorf("leaf lid %d, want 73", sw.Lid)
	}
}

func TestParseIBNetDiscoverMalformedFixture(t *testing.T) {
	_, err := ParseIBNetDiscover(bytes.NewReader(readFile(t, malformed)))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 10 || !strings.Contains(err.Error(), "ibnetdiscover:10: node line") || !strings.Contains(err.Error(), "no port lines") {
		t.Fatalf("err = %v, want ibnetdiscover:10: node line ...: no port lines", err)
	}
}

// small is a two-switch, two-HCA fabric in ibnetdiscover's format.
const small = `#
# Topology file: generated on Wed Aug  6 16:11:23 2025
#
vendid=0x2c9
devid=0xd2f2
sysimgguid=0x0000000000000001
switchguid=0x1(1)
Switch	41 "S-0000000000000001"		# "MF0;leaf-1:MQM8700/U1" enhanced port 0 lid 10 lmc 0
[1]	"H-00000000000000a0"[1](00000000000000a1) 		# "node001 mlx5_0" lid 100 4xHDR
[2]	"H-00000000000000b0"[2](00000000000000b2) 		# "node002 mlx5_1" lid 101 2xNDR
[40]	"S-0000000000000002"[1]		# "MF0;spine-1:MQM8700/U1" lid 20 4xHDR

vendid=0x2c9
devid=0xd2f2
switchguid=0x2(2)
Switch	41 "S-0000000000000002"		# "MF0;spine-1:MQM8700/U1" base port 0 lid 20 lmc 0
[1]	"S-0000000000000001"[40]		# "MF0;leaf-1:MQM8700/U1" lid 10 4xHDR

vendid=0x2c9
caguid=0xa0
Ca	1 "H-00000000000000a0"		# "node001 mlx5_0"
[1](00000000000000a1) 	"S-0000000000000001"[1]		# lid 100 lmc 0 "MF0;leaf-1:MQM8700/U1" lid 10 4xHDR

Ca	2 "H-00000000000000b0"		# "node002 mlx5_1"
[2](00000000000000b2) 	"S-0000000000000001"[2]		# lid 101 lmc 0 "MF0;leaf-1:MQM8700/U1" lid 10 2xNDR
`

func TestParseIBNetDiscoverSmall(t *testing.T) {
	topo, err := ParseIBNetDiscover(strings.NewReader(small))
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.Switches) != 2 || topo.Switches[0].Guid != "0x0000000000000001" || topo.Switches[0].Tier != 1 || topo.Switches[0].Lid != 10 ||
		topo.Switches[0].PortCount != 41 || topo.Switches[0].Description != "MF0;leaf-1:MQM8700/U1" || topo.Switches[1].Tier != 2 {
		t.Fatalf("switches %v", topo.Switches)
	}
	if len(topo.Links) != 3 {
		t.Fatalf("links %v", topo.Links)
	}
	l := topo.Links[0]
	if l.A.Guid != "0x0000000000000001" || l.A.Port != 40 || l.B.Guid != "0x0000000000000002" || l.B.Port != 1 || l.RateGbps != 200 {
		t.Errorf("leaf-spine link %v", l)
	}
	l = topo.Links[2]
	if l.A.Guid != "0x00000000000000b2" || l.A.Port != 2 || l.A.NodeName != "node002" || l.A.Hca != "mlx5_1" || l.B.Port != 2 || l.RateGbps != 200 {
		t.Errorf("HCA link %v", l)
	}
}

func TestParseIBNetDiscoverErrors(t *testing.T) {
	replace := func(old, new string) string {
		if !strings.Contains(small, old) {
			t.Fatalf("%q not in small", old)
		}
		return strings.Replace(small, old, new, 1)
	}
	for _, c := range []struct {
		name, in string
		line     int
		want     string
	}{
		{"empty", "", 0, "no Switch or Ca node"},
		{"comments only", "#\n# x\n\n", 0, "no Switch or Ca node"},
		{"bad port number", replace("[40]\t", "[x]\t"), 11, `port line "[x]`},
		{"port zero", replace("[40]\t", "[0]\t"), 11, "bad port number"},
		{"port beyond count", replace("[40]\t", "[42]\t"), 11, "beyond the node's 41 ports"},
		{"bad peer port", replace(`"S-0000000000000002"[1]`, `"S-0000000000000002"[z]`), 11, "bad peer port number"},
		{"bad guid", replace(`[1]	"H-00000000000000a0"`, `[1]	"H-00000000000000zz"`), 9, "bad node id"},
		{"unknown line", replace("devid=0xd2f2\nsysimgguid", "garbage here\nsysimgguid"), 5, "not a node, port"},
		{"bad attr", replace("sysimgguid=0x0000000000000001", "sysimgguid=zz"), 6, "not 0x-prefixed"},
		{"port outside block", "[1]\t\"S-01\"[1]\t\t# \"x\" lid 1 4xHDR\n", 1, "outside a node block"},
		{"missing peer block", strings.Split(small, "vendid=0x2c9\ncaguid=0xa0")[0], 9, "has no node block (truncated output?)"},
		{"truncated mid line", small[:strings.LastIndex(small, "[2](00000000000000b2)")+9], 25, "unbalanced parenthesis"},
		{"asymmetric", replace(`[1](00000000000000a1) 	"S-0000000000000001"[1]`, `[1](00000000000000a1) 	"S-0000000000000001"[3]`), 9, "points elsewhere"},
		{"duplicate port", replace("[2]\t\"H-00000000000000b0\"", "[1]\t\"H-00000000000000b0\""), 10, "repeated"},
		{"duplicate node", small + "\nCa\t1 \"H-00000000000000a0\"\t\t# \"x y\"\n[1](a1) \"S-0000000000000001\"[1]\t\t# lid 1 lmc 0 \"x\" lid 10 4xHDR\n", 27, "node GUID repeated (first at line 21)"},
		{"kind mismatch", replace(`Ca	2 "H-00000000000000b0"`, `Ca	2 "S-00000000000000b0"`), 24, "does not match"},
		{"switch line lacks lid", replace("enhanced port 0 lid 10 lmc 0", "enhanced"), 8, "lacks"},
		{"no description", replace(`# "node002 mlx5_1"`+"\n[2](", "\n[2]("), 24, `missing "#"`},
		{"no lid in port line", replace(`"MF0;spine-1:MQM8700/U1" lid 20 4xHDR`, `"MF0;spine-1:MQM8700/U1"`), 11, "missing peer description and lid"},
		{"node without ports", replace("[1]\t\"S-0000000000000001\"[40]\t\t# \"MF0;leaf-1:MQM8700/U1\" lid 10 4xHDR\n", ""), 16, "no port lines"},
	} {
		t.Run(c.name, func(t *testing.T) {
			topo, err := ParseIBNetDiscover(strings.NewReader(c.in))
			if err == nil {
				t.Fatalf("no error; topology %v", topo)
			}
			if topo != nil {
				t.Errorf("half result with error")
			}
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line != c.line || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v (line %d), want line %d and %q", err, lineOf(pe), c.line, c.want)
			}
		})
	}
}

func lineOf(pe *ParseError) int {
	if pe == nil {
		return -1
	}
	return pe.Line
}

func TestParseIBNetDiscoverBounds(t *testing.T) {
	b := readFile(t, fatTree)
	for _, c := range []struct {
		name               string
		maxBytes           int64
		maxNodes, maxLinks int
		want               string
	}{
		{"bytes", int64(len(b) - 1), MaxNodes, MaxLinks, "larger than 64 MiB"},
		{"nodes", MaxInputBytes, 100, MaxLinks, "more than 100 nodes"},
		{"links", MaxInputBytes, MaxNodes, 1000, "more than 1000 port lines"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseIBNetDiscover(bytes.NewReader(b), c.maxBytes, c.maxNodes, c.maxLinks)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
	if _, err := parseIBNetDiscover(bytes.NewReader(b), int64(len(b)), MaxNodes, MaxLinks); err != nil {
		t.Errorf("exactly at the byte limit: %v", err)
	}
	long := "Ca\t1 \"H-01\"\t\t# \"" + strings.Repeat("x", maxLineBytes) + "\"\n"
	if _, err := ParseIBNetDiscover(strings.NewReader(long)); err == nil || !strings.Contains(err.Error(), "line longer") {
		t.Errorf("long line: %v", err)
	}
}

func TestRateGbps(t *testing.T) {
	for _, c := range []struct {
		tok  string
		want uint32
		ok   bool
	}{
		{"4xNDR", 400, true}, {"4xHDR", 200, true}, {"2xNDR", 200, true}, {"4xEDR", 100, true},
		{"4xFDR", 56, true}, {"4xFDR10", 40, true}, {"4xQDR", 40, true}, {"4xDDR", 20, true},
		{"4xSDR", 10, true}, {"1xSDR", 3, true}, {"12xQDR", 120, true}, {"4xXDR", 800, true},
		{"1xHDR", 50, true}, {"8xNDR", 800, true},
		{"", 0, false}, {"4x", 0, false}, {"xNDR", 0, false}, {"4xFOO", 0, false}, {"0xNDR", 0, false}, {"4NDR", 0, false},
	} {
		if got, ok := RateGbps(c.tok); got != c.want || ok != c.ok {
			t.Errorf("RateGbps(%q) = %d, %v; want %d, %v", c.tok, got, ok, c.want, c.ok)
		}
	}
}

func TestSplitHostHCA(t *testing.T) {
	for _, c := range []struct{ desc, host, hca string }{
		{"a08-p1-dgx-04-c01 mlx5_5", "a08-p1-dgx-04-c01", "mlx5_5"},
		{"node001 HCA-1", "node001", "HCA-1"},
		{"MT4129 ConnectX7   Mellanox Technologies", "", ""},
		{"Mellanox Technologies Aggregation Node", "", ""},
		{"single", "", ""},
		{"a;b mlx5_0", "", ""},
	} {
		if h, d := splitHostHCA(c.desc); h != c.host || d != c.hca {
			t.Errorf("splitHostHCA(%q) = %q, %q", c.desc, h, d)
		}
	}
	if !isSHARP("Mellanox Technologies Aggregation Node") || !isSHARP("SHARP AN sw1") || isSHARP("sharpie-01 mlx5_0") {
		t.Error("isSHARP")
	}
}

func FuzzParseIBNetDiscover(f *testing.F) {
	f.Add([]byte(small))
	f.Add(readFile(f, malformed))
	fixture := readFile(f, fatTree)
	f.Add(fixture[:4096])
	f.Add(fixture[:len(fixture)/50])
	f.Fuzz(func(t *testing.T, in []byte) {
		topo, err := ParseIBNetDiscover(bytes.NewReader(in))
		if err != nil {
			if topo != nil {
				t.Fatal("result with error")
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *ParseError", err)
			}
			return
		}
		sw := map[string]bool{}
		for _, s := range topo.Switches {
			if sw[s.Guid] {
				t.Fatalf("switch %s twice", s.Guid)
			}
			sw[s.Guid] = true
		}
		cables := map[string]bool{}
		for _, l := range topo.Links {
			for _, e := range []*ginv1.FabricEndpoint{l.A, l.B} {
				if e == nil {
					t.Fatal("nil endpoint")
				}
				if e.Kind == ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH && !sw[e.Guid] {
					t.Fatalf("link end %v names no listed switch", e)
				}
				key := fmt.Sprint(e.Kind, e.Guid, "/", e.Port)
				if e.Kind == ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH && cables[key] {
					t.Fatalf("switch port %v cabled twice", e)
				}
				cables[key] = true
			}
		}
	})
}

// synth writes an ibnetdiscover dump of a fabric given as cables between
// (node, port) ends, each node a switch ("S") or CA ("H") with a
// description. Every cable is printed from both ends, as ibnetdiscover does.
type synthNode struct {
	kind byte // 'S' or 'H'
	guid uint64
	desc string
}

type synthEnd struct {
	node int
	port int
}

func synth(nodes []synthNode, cables [][2]synthEnd, rate string) string {
	byNode := map[int][][2]synthEnd{}
	for _, c := range cables {
		byNode[c[0].node] = append(byNode[c[0].node], c)
		byNode[c[1].node] = append(byNode[c[1].node], [2]synthEnd{c[1], c[0]})
	}
	var b strings.Builder
	b.WriteString("#\n# Topology file: synthetic\n#\n\n")
	for i, n := range nodes {
		if n.kind == 'S' {
			fmt.Fprintf(&b, "vendid=0x2c9\ndevid=0xd2f2\nsysimgguid=0x%x\nswitchguid=0x%x(%x)\n", n.guid, n.guid, n.guid)
			fmt.Fprintf(&b, "Switch\t65 \"S-%016x\"\t\t# \"%s\" enhanced port 0 lid %d lmc 0\n", n.guid, n.desc, i+1)
		} else {
			fmt.Fprintf(&b, "vendid=0x2c9\ndevid=0x1021\nsysimgguid=0x%x\ncaguid=0x%x\n", n.guid, n.guid)
			fmt.Fprintf(&b, "Ca\t2 \"H-%016x\"\t\t# \"%s\"\n", n.guid, n.desc)
		}
		for _, c := range byNode[i] {
			peer := nodes[c[1].node]
			if n.kind == 'S' {
				fmt.Fprintf(&b, "[%d]\t\"%c-%016x\"[%d]", c[0].port, peer.kind, peer.guid, c[1].port)
				if peer.kind == 'H' {
					fmt.Fprintf(&b, "(%016x) ", peer.guid+uint64(c[1].port))
				}
				fmt.Fprintf(&b, "\t\t# \"%s\" lid %d %s\n", peer.desc, c[1].node+1, rate)
			} else {
				fmt.Fprintf(&b, "[%d](%016x) \t\"%c-%016x\"[%d]\t\t# lid %d lmc 0 \"%s\" lid %d %s\n",
					c[0].port, n.guid+uint64(c[0].port), peer.kind, peer.guid, c[1].port, i+1, peer.desc, c[1].node+1, rate)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestParseIBNetDiscoverThreeTiers: leaf → spine → core, SHARP nodes on
// every switch (which must not make spines and cores look like leaves),
// and a two-switch island with no HCA (tier 0).
func TestParseIBNetDiscoverThreeTiers(t *testing.T) {
	var nodes []synthNode
	add := func(kind byte, desc string) int {
		nodes = append(nodes, synthNode{kind, uint64(0x1000 + len(nodes)*0x10), desc})
		return len(nodes) - 1
	}
	core := add('S', "MF0;core-1:MQM9790/U1")
	spines := []int{add('S', "MF0;spine-1:MQM9790/U1"), add('S', "MF0;spine-2:MQM9790/U1")}
	leaves := []int{add('S', "MF0;leaf-1:MQM9790/U1"), add('S', "MF0;leaf-2:MQM9790/U1"), add('S', "MF0;leaf-3:MQM9790/U1")}
	island := []int{add('S', "MF0;lab-1:MQM8700/U1"), add('S', "MF0;lab-2:MQM8700/U1")}
	var cables [][2]synthEnd
	for i, s := range spines {
		cables = append(cables, [2]synthEnd{{s, 40}, {core, i + 1}})
		for j, l := range leaves {
			cables = append(cables, [2]synthEnd{{l, 33 + i}, {s, j + 1}})
		}
	}
	cables = append(cables, [2]synthEnd{{island[0], 1}, {island[1], 1}})
	for j, l := range leaves {
		for h := range 2 {
			ca := add('H', fmt.Sprintf("node%d%d mlx5_%d", j, h, h))
			cables = append(cables, [2]synthEnd{{ca, 1}, {l, h + 1}})
		}
	}
	for _, s := range append(append(append([]int{core}, spines...), leaves...), island...) {
		agg := add('H', "Mellanox Technologies Aggregation Node")
		cables = append(cables, [2]synthEnd{{agg, 1}, {s, 65}})
	}
	topo, err := ParseIBNetDiscover(strings.NewReader(synth(nodes, cables, "4xXDR")))
	if err != nil {
		t.Fatal(err)
	}
	tiers := map[string]uint32{}
	for _, sw := range topo.Switches {
		tiers[strings.Split(strings.TrimPrefix(sw.Description, "MF0;"), ":")[0]] = sw.Tier
	}
	want := map[string]uint32{"core-1": 3, "spine-1": 2, "spine-2": 2, "leaf-1": 1, "leaf-2": 1, "leaf-3": 1, "lab-1": 0, "lab-2": 0}
	if fmt.Sprint(tiers) != fmt.Sprint(want) {
		t.Errorf("tiers %v, want %v", tiers, want)
	}
	// 2 spine-core + 6 leaf-spine + 1 island + 6 HCA cables; no SHARP.
	if len(topo.Links) != 15 {
		t.Errorf("%d links, want 15", len(topo.Links))
	}
	for _, l := range topo.Links {
		if l.RateGbps != 800 {
			t.Errorf("rate %d, want 800 (4xXDR)", l.RateGbps)
		}
		if l.A.Kind == ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_HCA && (l.A.Guid != fmt.Sprintf("0x%016x", mustHex(t, l.A.Guid)) || l.A.Hca == "" || l.A.Port != 1) {
			t.Errorf("HCA end %v", l.A)
		}
	}
}

func mustHex(t *testing.T, s string) uint64 {
	v, err := parseHex(strings.TrimPrefix(s, "0x"))
	if err != nil {
		t.Fatal(err)
	}
	return v
}
