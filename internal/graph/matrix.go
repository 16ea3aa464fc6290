package graph

import (
	"fmt"
	"strconv"
)

// MaxMatrixDevices bounds the rows (and columns) of a matrix.
const MaxMatrixDevices = 512

// DeviceKind is the kind of a matrix row.
type DeviceKind uint8

// Matrix device kinds (numbered as gin.v1.MatrixDeviceKind).
const (
	DeviceGPU DeviceKind = 1
	DeviceNIC DeviceKind = 2
)

// Device is one row (and column) of a matrix.
type Device struct {
	Node string
	// Label is the node-local label `nvidia-smi topo -m` prints: "GPU0",
	// "NIC3" (NIC j is the j-th HCA in name order).
	Label string
	// ID is the GPU UUID or the HCA name ("mlx5_3").
	ID   string
	Kind DeviceKind
	// CPUAffinity and NUMANode are the CPUs and NUMA node the device is
	// affine to; "" and -1 when unknown.
	CPUAffinity string
	NUMANode    int
}

// Cell is one cell of a matrix.
type Cell struct {
	Class Class
	// Count is the NVLink count (NVLink, MNNVL) or the switch hops (NET).
	Count          int
	BottleneckMBps uint64
}

// Label is what `topo -m` prints for the cell.
func (c Cell) Label() string { return label(c.Class, c.Count) }

// Matrix is a square matrix over devices, cells in row-major order.
type Matrix struct {
	Devices []Device
	Cells   []Cell
}

// At returns the cell of row i, column j.
func (m *Matrix) At(i, j int) Cell { return m.Cells[i*len(m.Devices)+j] }

// matrixDev is a device's place in the graph.
type matrixDev struct {
	n   *node
	gpu int // index into n.gpus, or -1
	hca int // index into n.hcas, or -1
}

// Matrix computes the `nvidia-smi topo -m` matrix over the GPUs (and, with
// includeNICs, the NICs) of the named nodes, in the order given (all nodes,
// sorted, when nodes is empty). Inside a node cells are NVLink or PCIe
// classes; across nodes GPU pairs are MNNVL or NET, and NIC cells the
// network path (NET with switch hops).
func (g *Graph) Matrix(nodes []string, includeNICs bool) (*Matrix, error) {
	if len(nodes) == 0 {
		nodes = g.names.all()
	}
	seen := make(map[string]bool, len(nodes))
	var devs []matrixDev
	total := 0
	for _, name := range nodes {
		if seen[name] {
			continue
		}
		seen[name] = true
		n, ok := g.nodes.get(name)
		if !ok {
			return nil, fmt.Errorf("matrix: no node %q in the graph", name)
		}
		total += len(n.gpus)
		if includeNICs {
			total += len(n.hcas)
		}
		if total > MaxMatrixDevices {
			return nil, fmt.Errorf("matrix: more than %d devices (%d nodes so far): narrow --nodes", MaxMatrixDevices, len(seen))
		}
		for i := range n.gpus {
			devs = append(devs, matrixDev{n: n, gpu: i, hca: -1})
		}
		if includeNICs {
			for i := range n.hcas {
				devs = append(devs, matrixDev{n: n, gpu: -1, hca: i})
			}
		}
	}
	m := &Matrix{Devices: make([]Device, len(devs)), Cells: make([]Cell, len(devs)*len(devs))}
	for i, d := range devs {
		m.Devices[i] = d.describe()
	}
	for i, a := range devs {
		for j, b := range devs {
			m.Cells[i*len(devs)+j] = g.cell(a, b, i == j)
		}
	}
	return m, nil
}

func (d matrixDev) describe() Device {
	n := d.n
	if d.gpu >= 0 {
		gp := &n.gpus[d.gpu]
		return Device{Node: n.name, Label: "GPU" + strconv.Itoa(int(gp.index)), ID: gp.uuid, Kind: DeviceGPU,
			CPUAffinity: n.cpus(gp.dev.numa), NUMANode: int(gp.dev.numa)}
	}
	h := &n.hcas[d.hca]
	return Device{Node: n.name, Label: "NIC" + strconv.Itoa(d.hca), ID: h.name.String(), Kind: DeviceNIC,
		CPUAffinity: n.cpus(h.dev.numa), NUMANode: int(h.dev.numa)}
}

// pcieDev, port and PCIe bandwidth to that port, of a matrix device.
func (d matrixDev) endpoint() (pcieDev, int, uint64) {
	if d.gpu >= 0 {
		gp := &d.n.gpus[d.gpu]
		return gp.dev, int(gp.near), uint64(gp.nearMBps)
	}
	h := &d.n.hcas[d.hca]
	best := -1
	for i := range int(h.numPorts) {
		pi := int(h.firstPort) + i
		if best < 0 || d.n.ports[pi].active() && !d.n.ports[best].active() {
			best = pi
		}
	}
	return h.dev, best, 0
}

func (g *Graph) cell(a, b matrixDev, self bool) Cell {
	if self {
		return Cell{Class: ClassSelf}
	}
	if a.gpu >= 0 && b.gpu >= 0 {
		p := g.gpuPath(a.n, a.gpu, b.n, b.gpu, false)
		return pathCell(p)
	}
	da, pa, mbpsA := a.endpoint()
	db, pb, mbpsB := b.endpoint()
	if a.n == b.n {
		cls, mbps := a.n.pcieClass(da, db)
		return Cell{Class: cls, BottleneckMBps: mbps}
	}
	return pathCell(g.netPath(a.n, pa, mbpsA, b.n, pb, mbpsB, nil, false))
}

func pathCell(p Path) Cell {
	c := Cell{Class: p.Class, BottleneckMBps: p.BottleneckMBps}
	switch p.Class {
	case ClassNVLink, ClassMNNVL:
		c.Count = p.NVLinks
	case ClassNET:
		c.Count = p.SwitchHops
	}
	return c
}
