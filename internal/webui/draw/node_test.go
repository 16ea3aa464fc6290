package draw

import (
	"bytes"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/graph"
)

func matrixOf(t *testing.T, g *graph.Graph, node string) *ginv1.GetMatrixResponse {
	t.Helper()
	m, err := g.Matrix([]string{node}, true)
	if err != nil {
		t.Fatal(err)
	}
	devs, cells := graph.MatrixToProto(m)
	return &ginv1.GetMatrixResponse{Devices: devs, Cells: cells}
}

// node002 of the dev cluster with GPU3's NVLink 7 down: the grid marks that
// link and no other; the matrix has the classes `ginctl topo -m` prints.
func TestNodeDevCluster(t *testing.T) {
	c := simCluster(t, "dgx-h100", 4, sim.DefaultFabricSpec(), devFaults, nil)
	inv := c.invs[1]
	var b bytes.Buffer
	if err := NVLinks(&b, inv); err != nil {
		t.Fatal(err)
	}
	grid := b.Bytes()
	wellFormed(t, grid)
	golden(t, "nvlinks-node002.svg", grid)
	if e := elementOf(grid, "data-link", "node002/GPU3/nvlink7"); !strings.Contains(e, `data-state="down"`) {
		t.Fatalf("GPU3 NVLink 7 drawn as %q, want down", e)
	}
	if n := bytes.Count(grid, []byte(`data-state="down"`)); n != 1 {
		t.Fatalf("%d links drawn down, want 1", n)
	}
	if n := bytes.Count(grid, []byte(`data-link="node002/GPU`)); n != 8*18 {
		t.Fatalf("%d NVLinks drawn, want 8 × 18", n)
	}

	b.Reset()
	if err := Matrix(&b, matrixOf(t, c.g, "node002")); err != nil {
		t.Fatal(err)
	}
	wellFormed(t, b.Bytes())
	golden(t, "matrix-node002.svg", b.Bytes())
	for _, want := range []string{">NV18<", ">NV17<", ">PIX<", ">SYS<", `class="c-nv"`, `class="c-sys"`} {
		if !bytes.Contains(b.Bytes(), []byte(want)) {
			t.Errorf("matrix lacks %s", want)
		}
	}

	b.Reset()
	inv3 := c.invs[2]
	if err := HCAs(&b, inv3); err != nil {
		t.Fatal(err)
	}
	wellFormed(t, b.Bytes())
	golden(t, "hcas-node003.svg", b.Bytes())
	if e := elementOf(b.Bytes(), "data-link", "node003/mlx5_0/1"); !strings.Contains(e, `data-state="down"`) {
		t.Fatalf("node003 mlx5_0/1 drawn as %q, want down", e)
	}

	b.Reset()
	if err := PCIeTree(&b, inv); err != nil {
		t.Fatal(err)
	}
	wellFormed(t, b.Bytes())
	golden(t, "pcie-node002.svg", b.Bytes())
	for _, g := range inv.GetGpus() {
		if !bytes.Contains(b.Bytes(), []byte(g.GetPciBusId())) {
			t.Errorf("PCIe tree lacks GPU%d at %s", g.GetIndex(), g.GetPciBusId())
		}
	}

	fs := InventoryFindings(inv)
	if len(fs) != 1 || fs[0].Subject != "GPU3/nvlink7" {
		t.Fatalf("findings %+v, want GPU3/nvlink7 down only", fs)
	}
}

// Bad input is refused, not drawn: a matrix whose cells do not match its
// devices, NVLink indexes past the bound.
func TestNodeBadInput(t *testing.T) {
	if err := Matrix(&bytes.Buffer{}, &ginv1.GetMatrixResponse{Devices: []*ginv1.MatrixDevice{{Label: "GPU0"}}}); err == nil {
		t.Error("matrix without cells drawn")
	}
	inv := &ginv1.NodeInventory{NodeName: "n", Gpus: []*ginv1.Gpu{{Nvlinks: []*ginv1.NvLink{{Index: maxNVLinks}}}}}
	if err := NVLinks(&bytes.Buffer{}, inv); err == nil {
		t.Error("NVLink index past the bound drawn")
	}
}
