package export

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/inventory"
)

// TestEnginesShareOneModel: every golden file is rendered by its engine
// from one Topology per graph, built once; the engines run concurrently on
// that one instance and leave it as it was built (they only read it).
func TestEnginesShareOneModel(t *testing.T) {
	dgxInvs, dgx := dgxCluster(t)
	nvlInvs, nvl := nvl72Cluster(t)
	a100Invs, _ := simCluster(t, "dgx-a100", []string{"a100"}, nil)
	pcieInvs, _ := simCluster(t, "pcie-8gpu", []string{"ws"}, nil)
	type render struct {
		golden string
		run    func(*Topology) ([]byte, error)
	}
	nccl := func(inv *ginv1.NodeInventory) func(*Topology) ([]byte, error) {
		return func(t *Topology) ([]byte, error) { return t.NCCLTopo(inv) }
	}
	cases := []struct {
		name    string
		g       *graph.Graph
		renders []render
	}{
		{"dgx-h100-8", dgx, []render{
			{"dgx-h100-8.tree.conf", (*Topology).SlurmTree},
			{"dgx-h100-8.json", (*Topology).JSON},
			{"dgx-h100-8.dot", (*Topology).DOT},
			{"dgx-h100.nccl.xml", nccl(dgxInvs[0])},
		}},
		{"gb200-nvl72-36", nvl, []render{
			{"gb200-nvl72-36.block.conf", (*Topology).SlurmBlock},
			{"gb200-nvl72-36.tree.conf", (*Topology).SlurmTree},
			{"gb200-nvl72.nccl.xml", nccl(nvlInvs[0])},
		}},
		{"dgx-a100", mustBuild(t, a100Invs, nil), []render{{"dgx-a100.nccl.xml", nccl(a100Invs[0])}}},
		{"pcie-8gpu", mustBuild(t, pcieInvs, nil), []render{{"pcie-8gpu.nccl.xml", nccl(pcieInvs[0])}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			model, err := Build(c.g)
			if err != nil {
				t.Fatal(err)
			}
			const rounds = 2
			out := make([][]byte, len(c.renders)*rounds)
			errs := make([]error, len(out))
			var wg sync.WaitGroup
			for i := range out {
				wg.Add(1)
				go func() {
					defer wg.Done()
					out[i], errs[i] = c.renders[i%len(c.renders)].run(model)
				}()
			}
			wg.Wait()
			for i, r := range c.renders {
				for k := range rounds {
					if err := errs[k*len(c.renders)+i]; err != nil {
						t.Fatalf("%s: %v", r.golden, err)
					}
				}
				golden(t, r.golden, out[i])
				if string(out[len(c.renders)+i]) != string(out[i]) {
					t.Errorf("%s: two renders of one model differ", r.golden)
				}
			}
			again, err := Build(c.g)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(model, again) {
				t.Error("rendering changed the model")
			}
			// NCCLTopo(g, inv) renders one node's part of the model: the
			// same Host.
			for _, h := range model.Hosts {
				if part, ok := hostTopology(c.g, h.Name).Host(h.Name); !ok || !reflect.DeepEqual(part, h) {
					t.Fatalf("%s: the one-node model's Host differs from the model's", h.Name)
				}
			}
		})
	}
}

// TestModelLenient: the model the JSON, DOT and NCCL engines render exists
// for graphs the Slurm formats refuse (no nodes, names no hostlist
// carries), and its Slurm engines refuse them as Build does.
func TestModelLenient(t *testing.T) {
	empty := mustBuild(t, nil, nil)
	bad := mustBuild(t, []*ginv1.NodeInventory{{NodeName: "a b"}}, nil)
	for name, g := range map[string]*graph.Graph{"empty": empty, "bad name": bad} {
		_, buildErr := Build(g)
		if buildErr == nil {
			t.Fatalf("%s: Build accepted it", name)
		}
		m := newTopology(g)
		if _, err := m.SlurmTree(); err == nil || err.Error() != slurmError(buildErr).Error() {
			t.Errorf("%s: SlurmTree() = %v, want %v", name, err, slurmError(buildErr))
		}
		if _, err := m.SlurmBlock(); err == nil || err.Error() != slurmError(buildErr).Error() {
			t.Errorf("%s: SlurmBlock() = %v, want %v", name, err, slurmError(buildErr))
		}
	}
	if _, err := Build(empty); !errors.Is(err, ErrNoNodes) {
		t.Errorf("Build(empty) = %v, want ErrNoNodes", err)
	}
	if h, ok := newTopology(bad).Host("a b"); !ok || h.Name != "a b" {
		t.Errorf("Host(%q) = %v, %v", "a b", h, ok)
	}
}

// FuzzEngines: the model of any inventory the graph accepts renders with
// every engine or is refused with an error, never a panic. The NCCL engine
// takes an inventory besides the model: one the master would accept
// (inventory.Validate) gives well-formed XML of bounded size, and one that
// does not match the model (a simulated node of the same name) does not
// panic either. The JSON document is valid JSON.
func FuzzEngines(f *testing.F) {
	others := map[string]*ginv1.NodeInventory{}
	for _, p := range sim.Profiles() {
		invs, _ := simCluster(f, p, []string{"n0"}, nil)
		others[p] = invs[0]
		b, err := proto.Marshal(invs[0])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, p)
	}
	f.Add([]byte{}, "")
	f.Fuzz(func(t *testing.T, data []byte, other string) {
		inv := &ginv1.NodeInventory{}
		if proto.Unmarshal(data, inv) != nil {
			return
		}
		g, err := graph.Build([]*ginv1.NodeInventory{inv}, nil)
		if err != nil {
			return
		}
		m := newTopology(g)
		_, _ = m.SlurmTree()
		_, _ = m.SlurmBlock()
		if doc, err := m.JSON(); err != nil || !json.Valid(doc) {
			t.Fatalf("JSON: %v\n%s", err, doc)
		}
		if dot, err := m.DOT(); err != nil || !strings.HasSuffix(string(dot), "}\n") {
			t.Fatalf("DOT: %v\n%s", err, dot)
		}
		out, err := m.NCCLTopo(inv)
		if o := others[other]; o != nil {
			o = proto.CloneOf(o)
			o.NodeName = inv.NodeName
			_, _ = m.NCCLTopo(o)
		}
		if err != nil || inventory.Validate(inv) != nil {
			return
		}
		// Every element is at most a few hundred bytes and stands for at
		// most one device, port or link of the inventory.
		if limit := 4096 + 64*len(data); len(out) > limit {
			t.Fatalf("%d bytes of XML from a %d-byte inventory", len(out), len(data))
		}
		dec := xml.NewDecoder(strings.NewReader(string(out)))
		for {
			_, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("not well-formed: %v\n%s", err, out)
			}
		}
	})
}

// FuzzDOTString: whatever a description or node name holds, it stays one
// DOT string: quoted, no raw line break, every quote inside escaped.
func FuzzDOTString(f *testing.F) {
	for _, s := range []string{"", "MF0;leaf-1:MQM9701/U1", "a\"b", "a\\", "x\ny\r", "\\\"", "tier 1\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := dotString(s)
		if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' || strings.ContainsAny(q, "\n\r") {
			t.Fatalf("dotString(%q) = %s", s, q)
		}
		body := q[1 : len(q)-1]
		for i := 0; i < len(body); i++ {
			switch body[i] {
			case '\\':
				i++ // the escaped byte
				if i == len(body) {
					t.Fatalf("dotString(%q) = %s: ends in a lone backslash", s, q)
				}
			case '"':
				t.Fatalf("dotString(%q) = %s: unescaped quote", s, q)
			}
		}
		if len(q) > 2+2*len(s) {
			t.Fatalf("dotString(%q) is %d bytes", s, len(q))
		}
	})
}
