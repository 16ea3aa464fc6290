package export

import (
	"errors"
	"strings"
	"testing"
)

// TestPlace: a node's place in the model is its switches from its leaf
// group to the root and its NVLink block, the same the engines render.
func TestPlace(t *testing.T) {
	const (
		l1, l2, s1, c1 = "0x0000000000000011", "0x0000000000000012", "0x0000000000000021", "0x0000000000000031"
	)
	g := tinyGraph(t, map[string]string{"n1": l1, "n2": l2, "n3": ""},
		map[string]string{l1: "MF0;LEAF-A:MQM9701/U1"},
		map[string]uint32{l1: 1, l2: 1, s1: 2, c1: 3}, []tinyLink{{l1, s1}, {l2, s1}, {s1, c1}}, nil)
	top, err := Build(g)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		node string
		path string // switch names, leaf first
		ok   bool
	}{
		{"n1", "LEAF-A spine01 core01", true},
		{"n2", "leaf01 spine01 core01", true},
		{"n3", UnknownSwitch, true},
		{"n9", "", false},
	}
	for _, tc := range tests {
		path, block, ok := top.Place(tc.node)
		var names []string
		for _, s := range path {
			names = append(names, s.Name)
		}
		if got := strings.Join(names, " "); got != tc.path || ok != tc.ok || block != nil {
			t.Errorf("Place(%s) = %q, block %v, %v; want %q, no block, %v", tc.node, got, block, ok, tc.path, tc.ok)
		}
	}
	if len(top.NoDomain) != 3 || len(top.Blocks) != 0 {
		t.Errorf("blocks %v, no domain %v; want none and all three", top.Blocks, top.NoDomain)
	}
	conf, err := SlurmTree(g)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range top.Tree.Switches {
		if !strings.Contains(string(conf), "SwitchName="+s.Name+" ") {
			t.Errorf("the model's switch %s is not in the rendered tree:\n%s", s.Name, conf)
		}
	}
}

func TestPlaceBlocks(t *testing.T) {
	invs, _ := simCluster(t, "gb200-nvl72", nodeNames("gb", 20), nil)
	top, err := Build(mustBuild(t, invs, nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Blocks) != 2 || len(top.Blocks[0].Nodes) != 18 || len(top.Blocks[1].Nodes) != 2 {
		t.Fatalf("blocks %v, want 18 and 2 trays", top.Blocks)
	}
	_, b, ok := top.Place(top.Blocks[1].Nodes[0])
	if !ok || b != top.Blocks[1] || b.Name != "block02" {
		t.Fatalf("Place(%s) block %v, want block02", top.Blocks[1].Nodes[0], b)
	}
	if _, err := Build(nil); !errors.Is(err, ErrNoNodes) {
		t.Fatalf("Build(nil) = %v, want ErrNoNodes", err)
	}
}
