package sim

import (
	"fmt"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// buildRTX3090Pair: a workstation with two GeForce RTX 3090 bridged by a
// 4-link NVLink3 bridge (NV4). Each GPU hangs on its own CPU root port of the
// same host bridge, so without NVLink they would be PHB. No HCAs.
func buildRTX3090Pair(b *builder) {
	b.host("Workstation (AMD Ryzen Threadripper PRO 5975WX)", 0, numaNode(0, 0, "0-63"))
	hb := b.hostBridge(0x00, 0, "AMD root complex")
	var gpus [2]*ginv1.Gpu
	for i, bus := range []int{0x01, 0x21} {
		rp := b.pcieSwitch(fmt.Sprintf("0000:00:%02x.1", 1+2*i), hb, 0, 4, 16, "PCIe root port")
		gpus[i] = b.gpu(rtx3090, i, busID(bus, 0), rp, 0)
	}
	b.wireDirect(rtx3090, gpus[0], gpus[1], 4)
}

// buildPCIe8GPU: a two-socket PCIe server with 8× L40S and no NVLink. Each
// socket has two host bridges, each with one PCIe switch holding two GPUs
// (PIX); the first switch of each socket also holds a 100G RoCE compute NIC.
func buildPCIe8GPU(b *builder) {
	// 3 UPI links at 11.2 GT/s.
	b.host("Supermicro SYS-421GE-TNRT", 67200,
		numaNode(0, 0, "0-31,64-95"),
		numaNode(1, 1, "32-63,96-127"))
	nic := 0
	for hbIdx, base := range []int{0x17, 0x38, 0x97, 0xb8} {
		numa := int32(hbIdx / 2)
		hb := b.hostBridge(base, numa, "Intel Ice Lake root complex")
		sw := b.pcieSwitch(busID(base+1, 0), hb, numa, 4, 16, "Broadcom PEX88096")
		for j := range 2 {
			g := 2*hbIdx + j
			b.gpu(l40s, g, busID(base+2+j, 0), sw, numa)
		}
		if hbIdx%2 == 0 {
			b.hca(cx6DxCompute, fmt.Sprintf("mlx5_%d", nic), busID(base+4, 0), sw, numa)
			nic++
		}
	}
}
