package export

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/hostlist"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files")

const testCluster = "export-test"

// simCluster builds count simulated nodes of a profile named prefix000..
// (or with names given), cabled into a simulated fabric (spec "" = none).
func simCluster(t testing.TB, profile string, names []string, spec *sim.FabricSpec) ([]*ginv1.NodeInventory, *ginv1.FabricTopology) {
	t.Helper()
	fnodes := make([]sim.FabricNode, len(names))
	for i, n := range names {
		fnodes[i] = sim.FabricNode{Name: n, Profile: profile, Index: i}
	}
	c, err := sim.NewCluster(testCluster, spec, fnodes)
	if err != nil {
		t.Fatal(err)
	}
	if c.Fabric != nil {
		c.Fabric.ScannedAt = nil // deterministic
	}
	invs, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return invs, c.Fabric
}

func nodeNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

func mustBuild(t testing.TB, invs []*ginv1.NodeInventory, fab *ginv1.FabricTopology) *graph.Graph {
	t.Helper()
	g, err := graph.Build(invs, fab)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run go test -update after checking):\n--- got ---\n%s", path, head(got, 60))
	}
}

func head(b []byte, lines int) string {
	ls := strings.SplitAfter(string(b), "\n")
	if len(ls) > lines {
		ls = append(ls[:lines], "...\n")
	}
	return strings.Join(ls, "")
}

// slurmTree is a parsed topology.conf for topology/tree.
type slurmTree struct {
	nodes    map[string][]string // switch → nodes
	switches map[string][]string // switch → child switches
	order    []string
	guids    map[string][]string // switch → "0x..." GUIDs in its comments
}

var commentGUID = regexp.MustCompile(`^# ([A-Za-z0-9._-]+): (0x[0-9a-f]{16}|\S+) `)

// parseTree parses a tree topology.conf and checks what Slurm requires:
// valid, unique names of at most 64 characters, every child switch defined,
// no switch with two parents, one root, every node under exactly one switch.
func parseTree(t *testing.T, conf []byte, wantNodes []string) slurmTree {
	t.Helper()
	tr := slurmTree{nodes: map[string][]string{}, switches: map[string][]string{}, guids: map[string][]string{}}
	for _, line := range strings.Split(strings.TrimRight(string(conf), "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			if m := commentGUID.FindStringSubmatch(line); m != nil {
				tr.guids[m[1]] = append(tr.guids[m[1]], m[2])
			}
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 || !strings.HasPrefix(f[0], "SwitchName=") {
			t.Fatalf("bad line %q", line)
		}
		name := strings.TrimPrefix(f[0], "SwitchName=")
		if name == "" || len(name) > 64 || strings.Trim(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != "" {
			t.Fatalf("bad switch name %q", name)
		}
		if _, dup := tr.nodes[name]; dup {
			t.Fatalf("switch %s defined twice", name)
		}
		if _, dup := tr.switches[name]; dup {
			t.Fatalf("switch %s defined twice", name)
		}
		tr.order = append(tr.order, name)
		k, v, _ := strings.Cut(f[1], "=")
		list, err := hostlist.Expand(v)
		if err != nil || len(list) == 0 {
			t.Fatalf("line %q: hostlist %q: %v", line, v, err)
		}
		switch k {
		case "Nodes":
			tr.nodes[name] = list
		case "Switches":
			tr.switches[name] = list
		default:
			t.Fatalf("line %q: want Nodes= or Switches=", line)
		}
	}
	parent := map[string]string{}
	for sw, kids := range tr.switches {
		for _, k := range kids {
			_, isLeaf := tr.nodes[k]
			_, isInner := tr.switches[k]
			if !isLeaf && !isInner {
				t.Fatalf("switch %s: child %s is not defined", sw, k)
			}
			if p, two := parent[k]; two {
				t.Fatalf("switch %s has two parents, %s and %s", k, p, sw)
			}
			parent[k] = sw
		}
	}
	var roots []string
	for _, s := range tr.order {
		if _, ok := parent[s]; !ok {
			roots = append(roots, s)
		}
	}
	// A forest: one tree per disjoint fabric, listed in the header comment.
	if len(roots) == 0 {
		t.Fatal("no top switch")
	}
	if len(roots) > 1 && !strings.Contains(string(conf), fmt.Sprintf("# %d separate trees (top switches %s)", len(roots), strings.Join(roots, ", "))) {
		t.Fatalf("%d top switches %v, but the header does not list them:\n%s", len(roots), roots, conf)
	}
	seen := map[string]string{}
	for sw, ns := range tr.nodes {
		for _, n := range ns {
			if o, dup := seen[n]; dup {
				t.Fatalf("node %s under %s and %s", n, o, sw)
			}
			seen[n] = sw
		}
	}
	if len(seen) != len(wantNodes) {
		t.Fatalf("%d nodes in the tree, want %d", len(seen), len(wantNodes))
	}
	for _, n := range wantNodes {
		if _, ok := seen[n]; !ok {
			t.Fatalf("node %s missing from the tree", n)
		}
	}
	return tr
}

// leafOf returns the switch holding a node.
func (tr slurmTree) leafOf(node string) string {
	for sw, ns := range tr.nodes {
		for _, n := range ns {
			if n == node {
				return sw
			}
		}
	}
	return ""
}
