package sim

import (
	"encoding/hex"
	"fmt"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// TraysPerRack is the number of compute trays in one GB200 NVL72 rack (one
// NVLink domain): node Index/TraysPerRack is the node's rack.
const TraysPerRack = 18

// GB200 NVLink-C2C as the sim reports it per GPU. NVIDIA's GB200 material
// gives NVLink-C2C as 900 GB/s bidirectional (450 GB/s per direction); the
// link count and per-link rate NVML reports on GB200 (FI_DEV_C2C_LINK_COUNT,
// FI_DEV_C2C_LINK_GET_MAX_BW) are not in the public material used here, so
// the split into 10 links of 45 GB/s is the sim's (NCCL's topology dump of a
// GB10 shows the same form: 8 C2C links of 43.1 GB/s, NVIDIA/nccl PR #2202).
// Any such value is far above a NIC's PCIe Gen5 x16 link (63 GB/s), which
// therefore bounds GPU→NIC traffic.
const (
	gb200C2CLinks    = 10
	gb200C2CLinkMBps = 45000
)

// buildGB200Tray: one GB200 NVL72 compute tray, laid out as a real tray's
// `nvidia-smi topo -m` shows it (sgl-project/sglang issue #11208, driver
// 570.172.08): 4 GPUs with NV18 between every pair, 6 NICs, every GPU↔NIC
// cell SYS; CPU affinity 0-71 for GPU0 and GPU1 (NUMA 0), 72-143 for GPU2
// and GPU3 (NUMA 1); each GPU also its own NUMA node (the "GPU NUMA ID"
// column: 2, 10, 18, 26; what NVML's GetNumaNodeId returns, hence the
// GPUs' numa_node). Two Grace CPUs, node 0 = GPUs 0,1 + cores 0-71, node 1
// = GPUs 2,3 + cores 72-143 (ishandhanani/srt-slurm PR #164).
//
// The GPUs are not on the Graces' PCIe fabric: each reaches its Grace over
// NVLink-C2C (modelled as its own root on that Grace), so a NIC is SYS
// even on the GPU's own Grace, while NCCL (2.23+) routes GPU→C2C→CPU→PCIe
// →NIC as its P2C path type and keeps GPUDirect RDMA. Each Grace has two
// CX-7 400G compute NICs and one BlueField-3 (storage), each on its own
// root complex. 18 NVLink5 links per GPU go to the rack's NVLink switch trays
// (off-node: remote_pci_bus_id empty), MNNVL fabric membership per rack.
func buildGB200Tray(b *builder) {
	b.host("NVIDIA GB200 NVL72 compute tray", 0,
		numaNode(0, 0, "0-71"),
		numaNode(1, 1, "72-143"))
	rack := b.index / TraysPerRack
	d := digest(b.cluster, "", "nvl72-rack", fmt.Sprint(rack))
	x := hex.EncodeToString(d[:16])
	clusterUUID := x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
	for g := range 4 {
		grace := int32(g / 2)
		base := 0x01 + 0x10*g
		hb := b.hostBridge(base, grace, "NVIDIA Grace NVLink-C2C (GPU)")
		gpu := b.gpu(gb200, g, busID(base+1, 0), hb, int32(2+8*g))
		gpu.C2C = &ginv1.C2CLink{LinksUp: gb200C2CLinks, LinkMbPerS: gb200C2CLinkMBps}
		gpu.Fabric = &ginv1.MnnvlFabric{
			ClusterUuid: clusterUUID, CliqueId: 1,
			State: ginv1.FabricState_FABRIC_STATE_COMPLETED, HealthMask: 0,
		}
	}
	// Compute NICs mlx5_0, mlx5_1 on Grace 0 and mlx5_2, mlx5_3 on Grace 1;
	// storage mlx5_4 (Grace 0), mlx5_5 (Grace 1).
	for n := range 4 {
		grace := int32(n / 2)
		base := 0x41 + 0x10*n
		hb := b.hostBridge(base, grace, "NVIDIA Grace root complex")
		b.hca(cx7Compute, fmt.Sprintf("mlx5_%d", n), busID(base+1, 0), hb, grace)
	}
	for s := range 2 {
		grace := int32(s)
		base := 0x81 + 0x10*s
		hb := b.hostBridge(base, grace, "NVIDIA Grace root complex")
		b.hca(bf3Storage, fmt.Sprintf("mlx5_%d", 4+s), busID(base+1, 0), hb, grace)
	}
	// 18 NVLink switch chips in the rack's 9 switch trays.
	b.wireToSwitches(gb200, nil, 18)
}
