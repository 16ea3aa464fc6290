package render

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/graph"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// small is a hand-made two-node matrix: two NVLinked GPUs and a NIC on
// node001, one GPU on node002 behind the network.
func small(oneNode bool) *ginv1.GetMatrixResponse {
	gpu, nic := ginv1.MatrixDeviceKind_MATRIX_DEVICE_KIND_GPU, ginv1.MatrixDeviceKind_MATRIX_DEVICE_KIND_NIC
	m := &ginv1.GetMatrixResponse{Devices: []*ginv1.MatrixDevice{
		{NodeName: "node001", Kind: gpu, Label: "GPU0", Id: "GPU-0", CpuAffinity: "0-55,112-167", NumaNode: 0},
		{NodeName: "node001", Kind: gpu, Label: "GPU1", Id: "GPU-1", CpuAffinity: "", NumaNode: -1},
		{NodeName: "node001", Kind: nic, Label: "NIC0", Id: "mlx5_0", NumaNode: 0},
		{NodeName: "node002", Kind: gpu, Label: "GPU0", Id: "GPU-2", CpuAffinity: "0-55,112-167", NumaNode: 0},
	}}
	c := func(cl ginv1.PathClass, count uint32, mbps uint64) *ginv1.MatrixCell {
		return &ginv1.MatrixCell{Class: cl, Count: count, BottleneckMbPerS: mbps}
	}
	self, nv, pxb, net := ginv1.PathClass_PATH_CLASS_SELF, ginv1.PathClass_PATH_CLASS_NVLINK, ginv1.PathClass_PATH_CLASS_PXB, ginv1.PathClass_PATH_CLASS_NET
	m.Cells = []*ginv1.MatrixCell{
		c(self, 0, 0), c(nv, 18, 450000), c(pxb, 0, 63015), c(net, 3, 50000),
		c(nv, 18, 450000), c(self, 0, 0), c(pxb, 0, 63015), c(net, 3, 25000),
		c(pxb, 0, 63015), c(pxb, 0, 63015), c(self, 0, 0), c(net, 0, 0),
		c(net, 3, 50000), c(net, 3, 25000), c(net, 0, 0), c(self, 0, 0),
	}
	if oneNode {
		m.Devices = m.Devices[:3]
		m.Cells = []*ginv1.MatrixCell{m.Cells[0], m.Cells[1], m.Cells[2], m.Cells[4], m.Cells[5], m.Cells[6], m.Cells[8], m.Cells[9], m.Cells[10]}
	}
	return m
}

func TestTopoMatrixGolden(t *testing.T) {
	tests := []struct {
		name      string
		m         *ginv1.GetMatrixResponse
		bandwidth bool
	}{
		{"one-node", small(true), false},
		{"two-nodes", small(false), false},
		{"two-nodes-bandwidth", small(false), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := TopoMatrix(&buf, tc.m, tc.bandwidth); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("output differs from %s (run with -update after checking):\n%s", golden, buf.String())
			}
		})
	}
}

func TestTopoMatrixErrors(t *testing.T) {
	if err := TopoMatrix(&bytes.Buffer{}, nil, false); err == nil {
		t.Error("nil matrix")
	}
	m := small(true)
	m.Cells = m.Cells[:4]
	if err := TopoMatrix(&bytes.Buffer{}, m, false); err == nil || !strings.Contains(err.Error(), "cells") {
		t.Errorf("short cells: %v", err)
	}
}

func TestClassLabel(t *testing.T) {
	for _, tc := range []struct {
		c     ginv1.PathClass
		count uint32
		want  string
	}{
		{ginv1.PathClass_PATH_CLASS_SELF, 0, "X"}, {ginv1.PathClass_PATH_CLASS_NVLINK, 18, "NV18"},
		{ginv1.PathClass_PATH_CLASS_PIX, 0, "PIX"}, {ginv1.PathClass_PATH_CLASS_PXB, 0, "PXB"},
		{ginv1.PathClass_PATH_CLASS_PHB, 0, "PHB"}, {ginv1.PathClass_PATH_CLASS_NODE, 0, "NODE"},
		{ginv1.PathClass_PATH_CLASS_SYS, 0, "SYS"}, {ginv1.PathClass_PATH_CLASS_MNNVL, 18, "MNNVL"},
		{ginv1.PathClass_PATH_CLASS_NET, 3, "NET3"}, {ginv1.PathClass_PATH_CLASS_NET, 0, "NET"},
		{ginv1.PathClass_PATH_CLASS_UNSPECIFIED, 0, "N/A"},
	} {
		if got := ClassLabel(tc.c, tc.count); got != tc.want {
			t.Errorf("%v %d: %s, want %s", tc.c, tc.count, got, tc.want)
		}
	}
}

// TestMatchesNvidiaSmi renders a simulated DGX H100 and compares it with a
// real `nvidia-smi topo -m` output of the same layout, line by line: the
// matrix (less nvidia-smi's trailing "GPU NUMA ID" column) and the legend
// up to its last nvidia-smi line.
func TestMatchesNvidiaSmi(t *testing.T) {
	src, err := sim.NewSource("dgx-h100", sim.NodeOptions{NodeName: "node001", Cluster: "c"})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := src.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build([]*ginv1.NodeInventory{inv}, nil)
	if err != nil {
		t.Fatal(err)
	}
	gm, err := g.Matrix(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	devs, cells := graph.MatrixToProto(gm)
	var buf bytes.Buffer
	if err := TopoMatrix(&buf, &ginv1.GetMatrixResponse{Devices: devs, Cells: cells}, false); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(buf.String(), "\n")

	f, err := os.Open(filepath.Join("..", "graph", "testdata", "hgx-h200-12nic.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text(); !strings.HasPrefix(l, "#") {
			l = strings.TrimSuffix(l, "\tGPU NUMA ID")
			l = strings.TrimSuffix(l, "\t\tN/A")
			want = append(want, l)
		}
	}
	for i, w := range want {
		if i > 0 && strings.HasPrefix(want[i-1], "  NV#") {
			break // GIN's own legend lines follow
		}
		// The published fixture lost the trailing space of its last " X ".
		if i >= len(got) || strings.TrimRight(got[i], " ") != w {
			g := ""
			if i < len(got) {
				g = got[i]
			}
			t.Errorf("line %d:\n got %q\nwant %q", i+1, g, w)
		}
	}
	if !strings.Contains(buf.String(), "  NIC11: node001/mlx5_11\n") {
		t.Error("NIC legend missing NIC11")
	}
}

// TestGB200TrayMatchesRealShape renders a simulated GB200 compute tray and
// checks it cell by cell against the shape of a real tray's `nvidia-smi
// topo -m` (sgl-project/sglang issue #11208, driver 570.172.08; not copied
// here): GPU0-3 and NIC0-5 as columns, NV18 between every GPU pair, SYS in
// every GPU↔NIC cell (the GPUs reach the Graces' PCIe over NVLink-C2C),
// CPU affinity 0-71 and NUMA 0 for GPU0-1, 72-143 and NUMA 1 for GPU2-3.
func TestGB200TrayMatchesRealShape(t *testing.T) {
	src, err := sim.NewSource("gb200-nvl72", sim.NodeOptions{NodeName: "tray", Cluster: "c"})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := src.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build([]*ginv1.NodeInventory{inv}, nil)
	if err != nil {
		t.Fatal(err)
	}
	gm, err := g.Matrix(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	devs, cells := graph.MatrixToProto(gm)
	var buf bytes.Buffer
	if err := TopoMatrix(&buf, &ginv1.GetMatrixResponse{Devices: devs, Cells: cells}, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	header := strings.Split(lines[0], "\t")
	wantHeader := []string{"", "GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1", "NIC2", "NIC3", "NIC4", "NIC5", "CPU Affinity", "NUMA Affinity"}
	if strings.Join(header, "|") != strings.Join(wantHeader, "|") {
		t.Fatalf("header %q, want %q", header, wantHeader)
	}
	for gpu := range 4 {
		row := strings.Split(lines[1+gpu], "\t")
		if len(row) != len(wantHeader) || row[0] != header[1+gpu] {
			t.Fatalf("row %d: %q", gpu, row)
		}
		for col := 1; col <= 10; col++ {
			want := "SYS"
			switch {
			case col == 1+gpu:
				want = " X "
			case col <= 4:
				want = "NV18"
			}
			if row[col] != want {
				t.Errorf("%s-%s: %q, want %q", row[0], header[col], row[col], want)
			}
		}
		cpus, numa := "0-71", "0"
		if gpu >= 2 {
			cpus, numa = "72-143", "1"
		}
		if row[11] != cpus || row[12] != numa {
			t.Errorf("%s: CPU affinity %q NUMA %q, want %q %q", row[0], row[11], row[12], cpus, numa)
		}
	}
}
