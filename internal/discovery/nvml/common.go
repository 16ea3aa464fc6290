package nvml

import (
	"errors"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/devid"
)

// source is the discovery.ItemError Source of this collector.
const source = "nvml"

// ErrNoDriver is returned by New when libnvidia-ml.so.1 cannot be loaded: the
// node has no NVIDIA driver (or no GPU). The agent goes on without GPUs.
var ErrNoDriver = errors.New("no NVIDIA driver on this node: libnvidia-ml.so.1 not found")

// ErrNoNVML is returned by New in a build without cgo: go-nvml cannot be
// compiled there, so this binary cannot read GPUs at all.
var ErrNoNVML = errors.New("NVML support not compiled in (gin-agent was built with CGO_ENABLED=0)")

// Result is the NVML part of a node inventory.
type Result struct {
	// GPUs in NVML index order. PcieParentId, PcieLink are left empty and
	// NumaNode is -1 unless NVML reports it: the sysfs collector fills them.
	GPUs []*ginv1.Gpu
	// NVSwitches reached by the GPUs' NVLinks, one per remote PCI bus id,
	// sorted by bus id. LinkCount is the number of GPU links seen into it.
	NVSwitches []*ginv1.NvSwitch
	// DriverVersion is the kernel driver version ("550.54.15").
	DriverVersion string
	// CUDADriverVersion is the CUDA version the driver supports ("12.4").
	CUDADriverVersion string
}

// P2PPair is the NVML view of how two GPUs reach each other.
type P2PPair struct {
	// GPU indices (NVML order), A < B.
	A, B int
	// Level is the PCIe common ancestor as nvidia-smi topo -m names it:
	// "INTERNAL", "PIX", "PXB", "PHB", "NODE", "SYS"; "" when unknown.
	Level string
	// NVLink and Read report P2P_STATUS_OK for P2P_CAPS_INDEX_NVLINK and
	// P2P_CAPS_INDEX_READ from A to B.
	NVLink, Read bool
}

// NormalizeBusID converts a PCI bus id to the canonical (sysfs) form
// (internal/devid.PCIBusID: NVML's 8-digit upper-case domain, the legacy
// form without a domain, C-string padding). A string that is not a bus id
// is returned trimmed of blanks and NULs.
func NormalizeBusID(s string) string {
	if id, ok := devid.PCIBusID(s); ok {
		return id
	}
	return strings.Trim(s, " \t\r\n\x00")
}

// NVLinkGeneration translates the code NVML's GetNvLinkVersion returns
// (nvmlNvlinkVersion_t) to the NVLink generation: 1 (1.0), 2 (2.0, 2.2),
// 3 (3.0, 3.1), 4 (4.0), 5 (5.0), 6 (6.0). It returns 0 for
// NVML_NVLINK_VERSION_INVALID and for codes it does not know.
func NVLinkGeneration(code uint32) uint32 {
	switch code {
	case 1: // NVML_NVLINK_VERSION_1_0
		return 1
	case 2, 3: // 2_0, 2_2
		return 2
	case 4, 5: // 3_0, 3_1
		return 3
	case 6: // 4_0
		return 4
	case 7: // 5_0
		return 5
	case 8: // 6_0
		return 6
	}
	return 0
}

// NVLinkBandwidthMBps is the nominal per-direction bandwidth of one link of
// an NVLink generation in MB/s; 0 when not known (NVLink 6 and unknown
// generations). A reduced-width link (a GeForce bridge) is not detected.
func NVLinkBandwidthMBps(generation uint32) uint64 {
	switch generation {
	case 1:
		return 20000
	case 2, 3, 4:
		return 25000
	case 5:
		return 50000
	}
	return 0
}
