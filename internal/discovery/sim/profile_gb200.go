package sim

import (
	"encoding/hex"
	"fmt"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// TraysPerRack is the number of compute trays in one GB200 NVL72 rack (one
// NVLink domain): node Index/TraysPerRack is the node's rack.
const TraysPerRack = 18

// buildGB200Tray: one GB200 NVL72 compute tray: 2 Grace CPUs (NUMA 0 and 1),
// 4 B200-class GPUs (2 per Grace), 18 NVLink5 links per GPU to the rack's
// NVLink switch trays (off-node: remote_pci_bus_id empty), MNNVL fabric
// membership per rack. One CX-7 400G compute NIC per GPU under the GPU's
// PCIe switch (PIX), one BlueField-3 per Grace for storage.
func buildGB200Tray(b *builder) {
	b.host("NVIDIA GB200 NVL72 compute tray", 0,
		numaNode(0, 0, "0-71"),
		numaNode(1, 1, "72-143"))
	rack := b.index / TraysPerRack
	d := digest(b.cluster, "", "nvl72-rack", fmt.Sprint(rack))
	x := hex.EncodeToString(d[:16])
	clusterUUID := x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
	for g := range 4 {
		numa := int32(g / 2)
		base := 0x01 + 0x10*g
		hb := b.hostBridge(base, numa, "NVIDIA Grace root complex")
		sw := b.pcieSwitch(busID(base+1, 0), hb, numa, 5, 16, "PCIe switch (GPU + NIC)")
		gpu := b.gpu(gb200, g, busID(base+2, 0), sw, numa)
		gpu.Fabric = &ginv1.MnnvlFabric{
			ClusterUuid: clusterUUID, CliqueId: 1,
			State: ginv1.FabricState_FABRIC_STATE_COMPLETED, HealthMask: 0,
		}
		b.hca(cx7Compute, fmt.Sprintf("mlx5_%d", g), busID(base+3, 0), sw, numa)
	}
	for s := range 2 {
		numa := int32(s)
		base := 0x41 + 0x10*s
		hb := b.hostBridge(base, numa, "NVIDIA Grace root complex")
		b.hca(bf3Storage, fmt.Sprintf("mlx5_%d", 4+s), busID(base+1, 0), hb, numa)
	}
	// 18 NVLink switch chips in the rack's 9 switch trays.
	b.wireToSwitches(gb200, nil, 18)
}
