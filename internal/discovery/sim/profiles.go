package sim

import (
	"sort"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// profileTable maps profile names to the functions that lay them out. It is
// built on demand so the package holds no mutable state.
func profileTable() map[string]func(*builder) {
	return map[string]func(*builder){
		"dgx-h100":            buildDGXH100,
		"hgx-b200":            buildHGXB200,
		"dgx-a100":            buildDGXA100,
		"gb200-nvl72":         buildGB200Tray,
		"rtx3090-nvlink-pair": buildRTX3090Pair,
		"pcie-8gpu":           buildPCIe8GPU,
	}
}

// Profiles lists the profile names, sorted.
func Profiles() []string {
	t := profileTable()
	names := make([]string, 0, len(t))
	for n := range t {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NIC products used by the profiles.
var (
	// ConnectX-7 NDR 400G InfiniBand, compute rail.
	cx7Compute = hcaModel{hcaType: "MT4129", boardID: "MT_0000000838", firmware: "28.39.1002", pcieGen: 5,
		role: ginv1.HcaRole_HCA_ROLE_COMPUTE, rateGbps: 400, linkLayer: ginv1.LinkLayer_LINK_LAYER_INFINIBAND}
	// ConnectX-7 dual-port, RoCE storage / in-band.
	cx7Storage = hcaModel{hcaType: "MT4129", boardID: "MT_0000000892", firmware: "28.39.1002", pcieGen: 5,
		role: ginv1.HcaRole_HCA_ROLE_STORAGE, rateGbps: 400, linkLayer: ginv1.LinkLayer_LINK_LAYER_ETHERNET}
	// ConnectX-6 HDR 200G InfiniBand, compute rail.
	cx6Compute = hcaModel{hcaType: "MT4123", boardID: "MT_0000000223", firmware: "20.39.1002", pcieGen: 4,
		role: ginv1.HcaRole_HCA_ROLE_COMPUTE, rateGbps: 200, linkLayer: ginv1.LinkLayer_LINK_LAYER_INFINIBAND}
	// ConnectX-6 dual-port 200G, RoCE storage / in-band.
	cx6Storage = hcaModel{hcaType: "MT4123", boardID: "MT_0000000224", firmware: "20.39.1002", pcieGen: 4,
		role: ginv1.HcaRole_HCA_ROLE_STORAGE, rateGbps: 200, linkLayer: ginv1.LinkLayer_LINK_LAYER_ETHERNET}
	// ConnectX-6 Dx 100G Ethernet used as the (RoCE) compute NIC.
	cx6DxCompute = hcaModel{hcaType: "MT4125", boardID: "MT_0000000359", firmware: "22.39.1002", pcieGen: 4,
		role: ginv1.HcaRole_HCA_ROLE_COMPUTE, rateGbps: 100, linkLayer: ginv1.LinkLayer_LINK_LAYER_ETHERNET}
	// BlueField-3 400G, storage / in-band.
	bf3Storage = hcaModel{hcaType: "MT41692", boardID: "MT_0000000884", firmware: "32.39.1002", pcieGen: 5,
		role: ginv1.HcaRole_HCA_ROLE_STORAGE, rateGbps: 400, linkLayer: ginv1.LinkLayer_LINK_LAYER_ETHERNET}
)

// GPU products used by the profiles (telemetry.md §6).
var (
	h100 = gpuModel{name: "NVIDIA H100 80GB HBM3", arch: "Hopper", ccMajor: 9, ccMinor: 0,
		memoryBytes: 81559 << 20, pcieGen: 5, nvlinkVer: 4, linkMBps: 25000, nvlinkPerGPU: 18}
	b200 = gpuModel{name: "NVIDIA B200", arch: "Blackwell", ccMajor: 10, ccMinor: 0,
		memoryBytes: 183359 << 20, pcieGen: 5, nvlinkVer: 5, linkMBps: 50000, nvlinkPerGPU: 18}
	gb200 = gpuModel{name: "NVIDIA GB200", arch: "Blackwell", ccMajor: 10, ccMinor: 0,
		memoryBytes: 189471 << 20, pcieGen: 5, nvlinkVer: 5, linkMBps: 50000, nvlinkPerGPU: 18}
	a100 = gpuModel{name: "NVIDIA A100-SXM4-80GB", arch: "Ampere", ccMajor: 8, ccMinor: 0,
		memoryBytes: 81920 << 20, pcieGen: 4, nvlinkVer: 3, linkMBps: 25000, nvlinkPerGPU: 12}
	rtx3090 = gpuModel{name: "NVIDIA GeForce RTX 3090", arch: "Ampere", ccMajor: 8, ccMinor: 6,
		memoryBytes: 24576 << 20, pcieGen: 4, nvlinkVer: 3, linkMBps: 14062, nvlinkPerGPU: 4, noSerial: true}
	l40s = gpuModel{name: "NVIDIA L40S", arch: "Ada Lovelace", ccMajor: 8, ccMinor: 9,
		memoryBytes: 46068 << 20, pcieGen: 4}
)
