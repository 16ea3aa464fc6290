package render

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// legend is nvidia-smi's legend, text as the tool prints it, followed by
// GIN's own classes.
const legend = `Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
  MNNVL = Connection through the multi-node NVLink fabric (another node of the same NVLink clique)
  NET# = Connection across the scale-out network through # switches
  NET  = Connection across the network through switches GIN does not know (port not in the imported fabric)
`

// bandwidthLegend replaces the class legend under a bandwidth matrix.
const bandwidthLegend = `Legend:

  X    = Self
  #    = Bottleneck bandwidth of the path between the two devices, GB/s per direction
         (its slowest link: NVLink, PCIe, or a NIC port or switch link across the network)
  N/A  = Unknown (a link of the path has no known bandwidth)
`

// ClassLabel is what a matrix cell prints for a class: "X", "NV18", "PIX",
// "PXB", "PHB", "NODE", "SYS", "MNNVL", "NET3" ("NET" when the number of
// switches is unknown), "N/A" for an unspecified class.
func ClassLabel(c ginv1.PathClass, count uint32) string {
	switch c {
	case ginv1.PathClass_PATH_CLASS_SELF:
		return "X"
	case ginv1.PathClass_PATH_CLASS_NVLINK:
		return "NV" + strconv.FormatUint(uint64(count), 10)
	case ginv1.PathClass_PATH_CLASS_PIX:
		return "PIX"
	case ginv1.PathClass_PATH_CLASS_PXB:
		return "PXB"
	case ginv1.PathClass_PATH_CLASS_PHB:
		return "PHB"
	case ginv1.PathClass_PATH_CLASS_NODE:
		return "NODE"
	case ginv1.PathClass_PATH_CLASS_SYS:
		return "SYS"
	case ginv1.PathClass_PATH_CLASS_MNNVL:
		return "MNNVL"
	case ginv1.PathClass_PATH_CLASS_NET:
		if count == 0 {
			return "NET"
		}
		return "NET" + strconv.FormatUint(uint64(count), 10)
	}
	return "N/A"
}

// TopoMatrix prints a matrix as `nvidia-smi topo -m` does: a tab-separated
// header of device labels, one row per device (GPU rows end with their CPU
// and NUMA affinity), then the legend and the NIC legend. Devices are
// labelled "GPU0" when all come from one node, else "node001/GPU0". With
// bandwidth, cells show the bottleneck bandwidth in GB/s per direction
// instead of the class.
func TopoMatrix(w io.Writer, m *ginv1.GetMatrixResponse, bandwidth bool) error {
	if m == nil {
		return errors.New("render: nil matrix")
	}
	n := len(m.Devices)
	if len(m.Cells) != n*n {
		return fmt.Errorf("render: matrix has %d devices but %d cells, want %d", n, len(m.Cells), n*n)
	}
	for i, d := range m.Devices {
		if d == nil {
			return fmt.Errorf("render: device %d is null", i)
		}
	}
	multiNode := false
	hasGPU := false
	for _, d := range m.Devices {
		multiNode = multiNode || d.NodeName != m.Devices[0].NodeName
		hasGPU = hasGPU || d.Kind == ginv1.MatrixDeviceKind_MATRIX_DEVICE_KIND_GPU
	}
	labels := make([]string, n)
	for i, d := range m.Devices {
		labels[i] = d.Label
		if multiNode {
			labels[i] = d.NodeName + "/" + d.Label
		}
	}

	bw := bufio.NewWriter(w)
	for _, l := range labels {
		bw.WriteString("\t" + l)
	}
	if hasGPU {
		bw.WriteString("\tCPU Affinity\tNUMA Affinity")
	}
	bw.WriteString("\n")
	for i, d := range m.Devices {
		bw.WriteString(labels[i])
		for j := range n {
			bw.WriteString("\t" + cellText(m.Cells[i*n+j], bandwidth))
		}
		if d.Kind == ginv1.MatrixDeviceKind_MATRIX_DEVICE_KIND_GPU {
			bw.WriteString("\t" + orNA(d.CpuAffinity) + "\t" + numaText(d.NumaNode))
		}
		bw.WriteString("\n")
	}
	bw.WriteString("\n")
	if bandwidth {
		bw.WriteString(bandwidthLegend)
	} else {
		bw.WriteString(legend)
	}
	first := true
	for i, d := range m.Devices {
		if d.Kind != ginv1.MatrixDeviceKind_MATRIX_DEVICE_KIND_NIC {
			continue
		}
		if first {
			bw.WriteString("\nNIC Legend:\n\n")
			first = false
		}
		bw.WriteString("  " + labels[i] + ": " + d.NodeName + "/" + d.Id + "\n")
	}
	return bw.Flush()
}

func cellText(c *ginv1.MatrixCell, bandwidth bool) string {
	if c == nil {
		return "N/A"
	}
	if c.Class == ginv1.PathClass_PATH_CLASS_SELF {
		return " X "
	}
	if !bandwidth {
		return ClassLabel(c.Class, c.Count)
	}
	if c.BottleneckMbPerS == 0 {
		return "N/A"
	}
	return strconv.FormatFloat(float64(c.BottleneckMbPerS)/1000, 'f', 1, 64)
}

func orNA(s string) string {
	if s == "" {
		return "N/A"
	}
	return s
}

func numaText(n int32) string {
	if n < 0 {
		return "N/A"
	}
	return strconv.Itoa(int(n))
}
