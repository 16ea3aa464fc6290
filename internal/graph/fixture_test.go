package graph

import (
	"path/filepath"
	"strconv"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// TestMatrixMatchesRealTopo compares every GPU/NIC cell (and the GPUs' CPU
// and NUMA affinity) of a simulated node's matrix with a real
// `nvidia-smi topo -m` output of the same system.
func TestMatrixMatchesRealTopo(t *testing.T) {
	tests := []struct {
		profile, fixture string
	}{
		{"dgx-h100", "hgx-h200-12nic.txt"},
		{"dgx-a100", "dgx-a100-mlx5-columns.txt"},
	}
	for _, tc := range tests {
		t.Run(tc.profile, func(t *testing.T) {
			fx := parseTopoFixture(t, filepath.Join("testdata", tc.fixture))
			g := mustBuild(t, []*ginv1.NodeInventory{collect(t, simNode(t, tc.profile, "node001", 0, nil))}, nil)
			m, err := g.Matrix([]string{"node001"}, true)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Devices) != len(fx.columns) {
				t.Fatalf("matrix has %d devices, fixture %d", len(m.Devices), len(fx.columns))
			}
			// Map fixture labels (GPU0, NIC3 or mlx5_3) to matrix rows.
			index := map[string]int{}
			for i, d := range m.Devices {
				index[d.Label] = i
				index[d.ID] = i
			}
			for _, rowLabel := range fx.columns {
				i, ok := index[rowLabel]
				if !ok {
					t.Fatalf("fixture device %s not in the matrix", rowLabel)
				}
				row := fx.rows[rowLabel]
				for c, colLabel := range fx.columns {
					j := index[colLabel]
					if got, want := m.At(i, j).Label(), row[c]; got != want {
						t.Errorf("%s-%s: got %s, want %s", rowLabel, colLabel, got, want)
					}
				}
				if m.Devices[i].Kind != DeviceGPU {
					continue
				}
				n := len(fx.columns)
				if got, want := m.Devices[i].CPUAffinity, row[n]; got != want {
					t.Errorf("%s CPU affinity: got %q, want %q", rowLabel, got, want)
				}
				if got, want := strconv.Itoa(m.Devices[i].NUMANode), row[n+1]; got != want {
					t.Errorf("%s NUMA affinity: got %s, want %s", rowLabel, got, want)
				}
			}
		})
	}
}
