package graph

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
)

// FuzzBuild feeds arbitrary inventories to WithNode, Matrix and Path: the
// graph may reject them but must never panic.
func FuzzBuild(f *testing.F) {
	invs, fab, _ := simCluster(f, "dgx-h100", 2, "leaf-groups=2")
	g := mustBuild(f, invs, fab)
	for _, p := range sim.Profiles() {
		b, err := proto.Marshal(collect(f, simNode(f, p, "fuzz", 0, nil)))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		inv := &ginv1.NodeInventory{}
		if proto.Unmarshal(data, inv) != nil {
			return
		}
		g2, err := g.WithNode(inv)
		if err != nil {
			return
		}
		if _, err := g2.Matrix([]string{inv.NodeName, "node000"}, true); err != nil {
			// Only the device limit may refuse a valid node.
			if len(inv.Gpus)+len(inv.Hcas) <= MaxMatrixDevices-20 {
				t.Fatalf("matrix: %v", err)
			}
		}
		peer := GPURef{Node: "node000", Index: 0}
		if inv.NodeName == "node000" {
			peer = GPURef{Node: "node001", Index: 0}
		}
		for _, gp := range inv.Gpus {
			ref := GPURef{Node: inv.NodeName, Index: int(gp.Index)}
			for _, other := range inv.Gpus[:min(len(inv.Gpus), 4)] {
				if _, err := g2.Path(ref, GPURef{Node: inv.NodeName, Index: int(other.Index)}); err != nil {
					t.Fatalf("path inside the node: %v", err)
				}
			}
			if _, err := g2.Path(ref, peer); err != nil {
				t.Fatalf("path across nodes: %v", err)
			}
			if gp.Uuid != "" {
				if _, err := g2.ResolveGPU(gp.Uuid); err != nil {
					t.Fatalf("resolve %q: %v", gp.Uuid, err)
				}
			}
		}
		if _, ok := g2.NodeInfo(inv.NodeName); !ok {
			t.Fatal(fmt.Sprintf("node %q missing", inv.NodeName))
		}
	})
}
