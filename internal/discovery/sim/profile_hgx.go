package sim

import (
	"fmt"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// hgxSocket is the layout of one socket of an 8-GPU HGX board (DGX H100
// layout, reproduced cell for cell from fixtures/topo-m/hgx-h200-12nic.txt).
// Blocks are listed in PCI bus order, which is also mlx5 naming order.
type hgxBlock struct {
	base    int  // host bridge bus; the block uses base..base+5
	gpu     int  // GPU index, or -1 for the storage block
	storage bool // a dual-port storage NIC (two functions under one switch)
}

var hgxLayout = [2][]hgxBlock{
	{{base: 0x15, gpu: 0}, {base: 0x26, gpu: -1, storage: true}, {base: 0x37, gpu: 1}, {base: 0x48, gpu: 2}, {base: 0x59, gpu: 3}},
	{{base: 0x9a, gpu: 4}, {base: 0xab, gpu: -1, storage: true}, {base: 0xbc, gpu: 5}, {base: 0xcd, gpu: 6}, {base: 0xde, gpu: 7}},
}

// buildHGX lays out 8 GPUs on two sockets. Each GPU and its compute NIC have
// their own host bridge and level-1 PCIe switch, each under its own level-2
// switch (GPU↔NIC = PXB, other devices of the socket = NODE, other socket =
// SYS); the storage dual-port NIC's two functions share one switch (PIX).
func buildHGX(b *builder, m gpuModel, model string, compute, storage hcaModel) {
	b.host(model, 62400,
		numaNode(0, 0, "0-55,112-167"),
		numaNode(1, 1, "56-111,168-223"))
	nic := 0
	gpus := make([]*ginv1.Gpu, 8)
	for socket, blocks := range hgxLayout {
		numa := int32(socket)
		for _, blk := range blocks {
			hb := b.hostBridge(blk.base, numa, "Intel Sapphire Rapids root complex")
			if blk.storage {
				sw := b.pcieSwitch(busID(blk.base+1, 0), hb, numa, 5, 16, "PCIe switch (storage NIC)")
				for fn := range 2 {
					b.hca(storage, fmt.Sprintf("mlx5_%d", nic), busID(blk.base+2, fn), sw, numa)
					nic++
				}
				continue
			}
			l1 := b.pcieSwitch(busID(blk.base+1, 0), hb, numa, 5, 16, "Broadcom PEX89144 (level 1)")
			l2g := b.pcieSwitch(busID(blk.base+2, 0), l1, numa, 5, 16, "Broadcom PEX89144 (level 2, GPU)")
			gpus[blk.gpu] = b.gpu(m, blk.gpu, busID(blk.base+3, 0), l2g, numa)
			l2n := b.pcieSwitch(busID(blk.base+4, 0), l1, numa, 5, 16, "Broadcom PEX89144 (level 2, NIC)")
			b.hca(compute, fmt.Sprintf("mlx5_%d", nic), busID(blk.base+5, 0), l2n, numa)
			nic++
		}
	}
	b.inv.Gpus = gpus // GPUs in index order
}

// buildDGXH100: 8× H100 SXM5, 18 NVLink4 links each to 4 NVSwitches (NV18).
func buildDGXH100(b *builder) {
	buildHGX(b, h100, "NVIDIA DGX H100", cx7Compute, cx7Storage)
	sw := b.nvswitches(4, 0x05, "NVIDIA NVSwitch (3rd generation)", 64)
	b.wireToSwitches(h100, sw, 0)
}

// buildHGXB200: 8× B200, 18 NVLink5 links each to 2 NVSwitches (NV18).
func buildHGXB200(b *builder) {
	buildHGX(b, b200, "NVIDIA HGX B200", cx7Compute, bf3Storage)
	sw := b.nvswitches(2, 0x05, "NVIDIA NVLink5 Switch", 72)
	b.wireToSwitches(b200, sw, 0)
}
