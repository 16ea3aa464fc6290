package graph

// This file exposes the per-GPU facts the cost model needs to derive a
// communicator's shape (internal/costmodel.ShapeOf) without walking the
// inventory again.

// GPULinks is what a GPU's UP NVLinks say about its node's NVLink fabric.
type GPULinks struct {
	// SwitchLinks is the number of UP NVLinks to an NVSwitch (a baseboard
	// switch, or the off-node switches of an MNNVL domain).
	SwitchLinks int
	// Switches is the number of distinct switches those links reach (the
	// off-node domain counts as one).
	Switches int
	// LinkMBps is the smallest per-link bandwidth of the GPU's UP NVLinks,
	// MB/s per direction; 0 without NVLink.
	LinkMBps uint64
	// Domain is the GPU's MNNVL clique ("<cluster_uuid>.<clique_id>") or "".
	Domain string
	// SM is the GPU's compute capability as an SM version (90 for 9.0); 0
	// when the inventory does not say.
	SM int
	// EthernetNIC: the GPU's nearest compute port is Ethernet (RoCE).
	EthernetNIC bool
}

// GPULinks returns the NVLink facts of one GPU.
func (g *Graph) GPULinks(r GPURef) (GPULinks, error) {
	n, i, err := g.lookup(r)
	if err != nil {
		return GPULinks{}, err
	}
	gp := &n.gpus[i]
	l := GPULinks{SwitchLinks: int(gp.swUp), Switches: len(gp.switches), LinkMBps: gp.linkMBps, Domain: gp.domain.String(), SM: int(gp.sm)}
	if gp.near >= 0 {
		l.EthernetNIC = n.ports[gp.near].ethernet()
	}
	return l, nil
}

// NodeGPUs returns the NVML indices of a node's GPUs, ascending; ok is false
// for an unknown node.
func (g *Graph) NodeGPUs(name string) (indices []int, ok bool) {
	n, ok := g.nodes.get(name)
	if !ok {
		return nil, false
	}
	indices = make([]int, len(n.gpus))
	for i, gp := range n.gpus {
		indices[i] = int(gp.index)
	}
	return indices, true
}
