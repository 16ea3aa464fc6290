package graph

// Path is the route between two devices and what it can carry.
type Path struct {
	Class Class
	// NVLinks is the number of links in the bonded set (NVLink, MNNVL).
	NVLinks int
	// SwitchHops is the number of fabric switches crossed (NET): 1 on the
	// same leaf, 3 through a spine; 0 when the fabric attachment is unknown.
	SwitchHops int
	// BottleneckMBps is the narrowest link on the path, MB/s per direction;
	// 0 when unknown.
	BottleneckMBps uint64
	// Oversubscription is the worst downlink:uplink ratio of a switch on the
	// path (1 = non-blocking); 0 when unknown or not applicable.
	Oversubscription float64
	// FromNIC and ToNIC are the HCAs used at each end of a NET path
	// ("node001/mlx5_0").
	FromNIC, ToNIC string
	// GPUDirect is true when both GPUs of a NET path reach their NIC through
	// a PCIe switch (PIX or PXB) or over C2C to a NIC of their own CPU (P2C,
	// GPUDirect RDMA over C2C since NCCL 2.23), so GPUDirect RDMA is possible.
	GPUDirect bool
	// C2C is true when a GPU of a NET path reaches its NIC over its C2C link
	// and its CPU's PCIe (P2C): BottleneckMBps then counts the C2C link and
	// the NIC's PCIe link, not a PCIe path from the GPU.
	C2C bool
	// Hops are the vertices on the path, from the first device to the last.
	Hops []Hop
	// Note says why a path is degraded or unknown.
	Note string
}

// Label is what `topo -m` prints for the path: "X", "NV18", "PIX", "PXB",
// "PHB", "NODE", "SYS", "MNNVL", "NET3".
func (p Path) Label() string {
	switch p.Class {
	case ClassNVLink:
		return label(p.Class, p.NVLinks)
	case ClassNET:
		return label(p.Class, p.SwitchHops)
	}
	return p.Class.String()
}

// Hop is one vertex on a path.
type Hop struct {
	// Kind is "gpu", "pcie", "host-bridge", "cpu", "nvswitch", "nvlink-domain",
	// "port" or "switch".
	Kind string
	// ID is the vertex's identity: GPU UUID, PCI address, NUMA node,
	// "mlx5_0/1", switch GUID.
	ID string
	// Node is the node the vertex is in; empty for fabric switches.
	Node string
	// LinkMBps is the bandwidth of the link entering this hop (0 for the
	// first hop or when unknown).
	LinkMBps uint64
}

// GPURef names one GPU of the graph.
type GPURef struct {
	Node  string
	Index int
	UUID  string
}
