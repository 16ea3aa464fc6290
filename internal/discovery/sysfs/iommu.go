package sysfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery"
)

// maxIOMMUGroups bounds the groups counted (a large host has a few hundred).
const maxIOMMUGroups = 1 << 16

// IOMMU reads how the IOMMU handles the DMA of the devices busIDs (the
// node's GPUs and NICs): OFF when the kernel registered no IOMMU
// (/sys/class/iommu empty or absent), else from the type of each device's
// group (/sys/bus/pci/devices/<bdf>/iommu_group/type, Linux >= 5.11):
// TRANSLATED when any is "DMA" or "DMA-FQ", PASSTHROUGH when all that were
// read are "identity", UNSPECIFIED when none could be read. The group count
// is /sys/kernel/iommu_groups's entries, the cmdline the IOMMU arguments of
// procRoot/cmdline.
func IOMMU(sysRoot, procRoot string, busIDs []string) (*ginv1.Iommu, []discovery.ItemError) {
	var errs []discovery.ItemError
	out := &ginv1.Iommu{}
	p := filepath.Join(procRoot, "cmdline")
	if s, err := readFile(p); err == nil {
		out.Cmdline = clip(iommuArgs(s))
	} else if !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, itemErr(p, err))
	}
	units, err := os.ReadDir(filepath.Join(sysRoot, "class", "iommu"))
	if (err != nil && errors.Is(err, os.ErrNotExist)) || (err == nil && len(units) == 0) {
		out.Mode = ginv1.IommuMode_IOMMU_MODE_OFF
		return out, errs
	}
	if err != nil {
		return out, append(errs, itemErr(filepath.Join(sysRoot, "class", "iommu"), err))
	}
	if groups, err := os.ReadDir(filepath.Join(sysRoot, "kernel", "iommu_groups")); err == nil {
		out.GroupCount = uint32(min(len(groups), maxIOMMUGroups))
	} else {
		errs = append(errs, itemErr(filepath.Join(sysRoot, "kernel", "iommu_groups"), err))
	}
	identity, translated := 0, 0
	for _, raw := range busIDs {
		bdf, ok := NormalizeBusID(raw)
		if !ok {
			continue
		}
		p := filepath.Join(pciDevPath(sysRoot, bdf), "iommu_group", "type")
		s, err := readFile(p)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, itemErr(p, err))
			}
			continue
		}
		switch s {
		case "identity":
			identity++
		case "DMA", "DMA-FQ":
			translated++
		}
	}
	switch {
	case translated > 0:
		out.Mode = ginv1.IommuMode_IOMMU_MODE_TRANSLATED
	case identity > 0:
		out.Mode = ginv1.IommuMode_IOMMU_MODE_PASSTHROUGH
	}
	return out, errs
}

// iommuArgs keeps the IOMMU arguments of a kernel command line.
func iommuArgs(cmdline string) string {
	var keep []string
	for _, a := range strings.Fields(cmdline) {
		k, _, _ := strings.Cut(a, "=")
		switch k {
		case "iommu", "intel_iommu", "amd_iommu", "iommu.passthrough", "iommu.strict":
			keep = append(keep, a)
		}
	}
	return strings.Join(keep, " ")
}

// GPUDirectRDMA reads what GPUDirect RDMA needs: the nvidia_peermem module
// (or the older nv_peer_mem) loaded, or dma-buf (kernel >= 5.12 and the
// NVIDIA open kernel modules, whose /proc/driver/nvidia/version says "Open
// Kernel Module"). nil when the NVIDIA kernel module is not loaded
// (/sys/module/nvidia absent): nothing to say.
func GPUDirectRDMA(sysRoot, procRoot, kernelVersion string) *ginv1.GpuDirectRdma {
	if _, err := os.Stat(filepath.Join(sysRoot, "module", "nvidia")); err != nil {
		return nil
	}
	out := &ginv1.GpuDirectRdma{}
	for _, m := range []string{"nvidia_peermem", "nv_peer_mem"} {
		if _, err := os.Stat(filepath.Join(sysRoot, "module", m)); err == nil {
			out.PeermemLoaded = true
		}
	}
	if v, err := readFile(filepath.Join(procRoot, "driver", "nvidia", "version")); err == nil &&
		strings.Contains(v, "Open Kernel Module") && kernelAtLeast(kernelVersion, 5, 12) {
		out.Dmabuf = true
	}
	return out
}

// kernelAtLeast compares a release string ("6.8.0-1015-nvidia") with
// major.minor; false when it does not parse.
func kernelAtLeast(release string, major, minor int) bool {
	var ma, mi int
	n := 0
	for i, part := range strings.SplitN(release, ".", 3) {
		if i == 2 {
			break
		}
		v, ok := leadingInt(part)
		if !ok {
			return false
		}
		if i == 0 {
			ma = v
		} else {
			mi = v
		}
		n++
	}
	if n < 2 {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

func leadingInt(s string) (int, bool) {
	v, n := 0, 0
	for n < len(s) && n < 6 && s[n] >= '0' && s[n] <= '9' {
		v = v*10 + int(s[n]-'0')
		n++
	}
	return v, n > 0
}
