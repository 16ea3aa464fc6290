package sources

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery"
	"github.com/gin-topology/gin/internal/discovery/nvml"
	"github.com/gin-topology/gin/internal/discovery/rdmanl"
	"github.com/gin-topology/gin/internal/discovery/sysfs/sysfstest"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/inventory"
)

// fakeGPUs stands in for NVML: one H100 at the bus id the sysfs fixture has.
type fakeGPUs struct{}

func (fakeGPUs) Inventory(context.Context) (nvml.Result, []discovery.ItemError) {
	return nvml.Result{
		GPUs: []*ginv1.Gpu{{Uuid: "GPU-0f0e0d0c-0000-1111-2222-333344445555", Index: 0, Model: "NVIDIA H100 80GB HBM3",
			PciBusId: "0000:07:00.0", NumaNode: -1, ComputeCapabilityMajor: 9}},
		DriverVersion: "570.124.06", CUDADriverVersion: "12.8",
	}, nil
}

func (fakeGPUs) Counters(context.Context) ([]discovery.NVLinkCounters, []discovery.GPUSample, []discovery.ItemError) {
	return nil, []discovery.GPUSample{{Index: 0, UUID: "GPU-0f0e0d0c-0000-1111-2222-333344445555"}}, nil
}

// The real-hardware source on a fixture node in the kernel's sysfs layout:
// what it reports is a valid inventory whose classes follow the PCIe tree.
func TestAutoOnFixtureNode(t *testing.T) {
	archive, err := os.ReadFile(filepath.Join("..", "sysfs", "testdata", "node.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	root := sysfstest.Materialize(t, string(archive))
	a := newAuto("dgx-h100-017", AutoOptions{SysRoot: root + "/sys", ProcRoot: root + "/proc", EtcRoot: root + "/etc", StorageHCAs: []string{"mlx5_2", "mlx5_3"}})
	a.gpus = fakeGPUs{}
	a.lookup = nil
	a.dumpQPs = func(context.Context) ([][]byte, error) { return nil, rdmanl.ErrNoRDMA }

	inv, err := a.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := inventory.Validate(inv); err != nil {
		t.Fatalf("the auto source's inventory does not validate: %v", err)
	}
	if inv.GetHost().GetMachineId() == "" || len(inv.GetHost().GetNumaNodes()) != 2 || inv.GetHost().GetDriverVersion() != "570.124.06" {
		t.Errorf("host = %v", inv.GetHost())
	}
	gpu := inv.GetGpus()[0]
	if gpu.GetPcieParentId() == "" || gpu.GetNumaNode() != 0 || gpu.GetPcieLink().GetGeneration() != 5 {
		t.Errorf("GPU PCIe placement = parent %q numa %d link %v", gpu.GetPcieParentId(), gpu.GetNumaNode(), gpu.GetPcieLink())
	}
	if len(inv.GetHcas()) != 6 {
		t.Fatalf("%d HCAs, want 6", len(inv.GetHcas()))
	}
	c := a.Counters(context.Background())
	if len(c.Errors) == 0 || len(c.Ports) == 0 {
		t.Errorf("counters: %d ports, %d item errors; the fixture has damaged files", len(c.Ports), len(c.Errors))
	}

	g, err := graph.Build([]*ginv1.NodeInventory{inv}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := g.Matrix([]string{"dgx-h100-017"}, true)
	if err != nil {
		t.Fatal(err)
	}
	idx := map[string]int{}
	for i, d := range m.Devices {
		idx[d.ID] = i
	}
	// GPU and mlx5_0 hang on two downstream ports of one switch: PIX, as
	// nvidia-smi prints it. mlx5_1 is one switch level up: PXB. mlx5_2 sits
	// on the other socket: SYS.
	for _, tc := range []struct {
		hca  string
		want graph.Class
	}{{"mlx5_0", graph.ClassPIX}, {"mlx5_1", graph.ClassPXB}, {"mlx5_2", graph.ClassSYS}} {
		if got := m.At(idx[gpu.GetUuid()], idx[tc.hca]).Class; got != tc.want {
			t.Errorf("GPU0 to %s: %v, want %v", tc.hca, got, tc.want)
		}
	}
}
