package sim

import (
	"fmt"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// a100Block is one NUMA node's PCIe block of a DGX A100 (NPS4), listed in PCI
// bus order (= mlx5 naming order). Reproduces fixtures/topo-m/
// dgx-a100-mlx5-columns.txt cell for cell.
type a100Block struct {
	base    int   // host bridge bus
	numa    int32 // NUMA node (NPS4: 0-3 socket 0, 4-7 socket 1)
	gpus    []int // GPU indices; empty for a storage block
	storage bool
}

var a100Layout = []a100Block{
	{base: 0x01, numa: 3, gpus: []int{0, 1}},
	{base: 0x41, numa: 1, gpus: []int{2, 3}},
	{base: 0x61, numa: 2, storage: true},
	{base: 0x81, numa: 7, gpus: []int{4, 5}},
	{base: 0xb1, numa: 5, gpus: []int{6, 7}},
	{base: 0xe1, numa: 6, storage: true},
}

// buildDGXA100: 8× A100 SXM4 80GB, 12 NVLink3 links each to 6 NVSwitches
// (NV12); 2× EPYC 7742 in NPS4 (8 NUMA nodes). Each GPU NUMA node has one
// host bridge and one level-1 switch, under which every GPU and compute NIC
// has its own level-2 switch (all PXB to each other); storage dual-port NICs
// sit on NUMA nodes without GPUs (SYS to every GPU, PIX to each other).
func buildDGXA100(b *builder) {
	var numa []*ginv1.NumaNode
	for k := range 8 {
		numa = append(numa, numaNode(uint32(k), uint32(k/4),
			fmt.Sprintf("%d-%d,%d-%d", 16*k, 16*k+15, 128+16*k, 128+16*k+15)))
	}
	b.host("NVIDIA DGX A100", 0, numa...)
	gpus := make([]*ginv1.Gpu, 8)
	nic := 0
	for _, blk := range a100Layout {
		hb := b.hostBridge(blk.base, blk.numa, "AMD EPYC root complex")
		if blk.storage {
			sw := b.pcieSwitch(busID(blk.base+1, 0), hb, blk.numa, 4, 16, "PCIe switch (storage NIC)")
			for fn := range 2 {
				b.hca(cx6Storage, fmt.Sprintf("mlx5_%d", nic), busID(blk.base+2, fn), sw, blk.numa)
				nic++
			}
			continue
		}
		l1 := b.pcieSwitch(busID(blk.base+1, 0), hb, blk.numa, 4, 16, "Broadcom PEX88096 (level 1)")
		bus := blk.base + 2
		for _, g := range blk.gpus {
			l2 := b.pcieSwitch(busID(bus, 0), l1, blk.numa, 4, 16, "Broadcom PEX88096 (level 2)")
			gpus[g] = b.gpu(a100, g, busID(bus+1, 0), l2, blk.numa)
			bus += 2
		}
		for range 2 {
			l2 := b.pcieSwitch(busID(bus, 0), l1, blk.numa, 4, 16, "Broadcom PEX88096 (level 2)")
			b.hca(cx6Compute, fmt.Sprintf("mlx5_%d", nic), busID(bus+1, 0), l2, blk.numa)
			nic++
			bus += 2
		}
	}
	b.inv.Gpus = gpus
	sw := b.nvswitches(6, 0xc0, "NVIDIA NVSwitch (2nd generation)", 36)
	b.wireToSwitches(a100, sw, 0)
}
