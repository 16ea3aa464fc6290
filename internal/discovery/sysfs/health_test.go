package sysfs

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sysfs/sysfstest"
)

// healthFixture is node.txtar with testdata/health.txtar over it.
func healthFixture(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "health.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	return nodeFixture(t, string(b))
}

func TestPCIeTreeMaxLink(t *testing.T) {
	root := healthFixture(t)
	_, devices, errs := PCIeTree(root+"/sys", []string{"0000:07:00.0", "0000:17:00.0", "0000:18:00.0"})
	wantErrItems(t, root, errs)
	for _, tc := range []struct {
		bdf  string
		want *ginv1.PcieLink
	}{
		{"0000:07:00.0", &ginv1.PcieLink{Generation: 3, Width: 8, MaxGeneration: 5, MaxWidth: 16}}, // trained down
		{"0000:17:00.0", &ginv1.PcieLink{Generation: 5, Width: 16, MaxGeneration: 5, MaxWidth: 16}},
		{"0000:18:00.0", gen5x16()}, // no max_* files: unknown, not an error
	} {
		protoDiff(t, "link of "+tc.bdf, devices[tc.bdf].Link, tc.want)
	}
}

func TestAttachACS(t *testing.T) {
	root := healthFixture(t)
	bridges, _, _ := PCIeTree(root+"/sys", []string{"0000:07:00.0", "0000:17:00.0", "0000:18:00.0"})
	errs := AttachACS(root+"/sys", bridges)
	wantErrItems(t, root, errs)
	got := map[string]*ginv1.PcieAcs{}
	for _, b := range bridges {
		got[b.GetId()] = b.GetAcs()
	}
	protoDiff(t, "ACS of 0000:04:01.0", got["0000:04:01.0"], &ginv1.PcieAcs{Capability: 0x5f, Control: 0x1d})
	protoDiff(t, "ACS of 0000:04:00.0", got["0000:04:00.0"], &ginv1.PcieAcs{Capability: 0x5f})
	for _, id := range []string{"0000:00:01.0", "0000:01:00.0", "pci0000:00"} {
		if got[id] != nil {
			t.Errorf("%s: ACS %v; want none (64-byte config, no config file, host bridge)", id, got[id])
		}
	}
	if s := ACSText(0x1d); s != "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-" {
		t.Errorf("ACSText(0x1d) = %q", s)
	}
	if !ACSBlocksP2P(0x1d) || ACSBlocksP2P(0x01) || ACSBlocksP2P(0) {
		t.Error("ACSBlocksP2P: want true for ReqRedir/CmpltRedir, false for SrcValid only and 0")
	}
}

// extCap writes an extended capability header at off.
func extCap(b []byte, off int, id uint16, next int) {
	binary.LittleEndian.PutUint32(b[off:], uint32(id)|1<<16|uint32(next)<<20)
}

func TestParseACS(t *testing.T) {
	space := func(f func(b []byte)) []byte { b := make([]byte, 4096); f(b); return b }
	for _, tc := range []struct {
		name    string
		config  []byte
		want    *ginv1.PcieAcs
		wantErr error // nil, ErrNoACS or errMalformed
	}{
		{"ACS first", space(func(b []byte) { extCap(b, 0x100, 0x0d, 0); b[0x104], b[0x106] = 0x7f, 0x1d }), &ginv1.PcieAcs{Capability: 0x7f, Control: 0x1d}, nil},
		{"ACS after AER and DPC", space(func(b []byte) {
			extCap(b, 0x100, 0x01, 0x148)
			extCap(b, 0x148, 0x1d, 0x2a0)
			extCap(b, 0x2a0, 0x0d, 0)
			b[0x2a4], b[0x2a6] = 0x5f, 0x04
		}), &ginv1.PcieAcs{Capability: 0x5f, Control: 0x04}, nil},
		{"list without ACS", space(func(b []byte) { extCap(b, 0x100, 0x01, 0x148); extCap(b, 0x148, 0x1d, 0) }), nil, ErrNoACS},
		{"no extended space (256 bytes)", make([]byte, 256), nil, ErrNoACS},
		{"non-root read (64 bytes)", make([]byte, 64), nil, ErrNoACS},
		{"device gone (all ones)", space(func(b []byte) {
			for i := range b {
				b[i] = 0xff
			}
		}), nil, ErrNoACS},
		{"loop", space(func(b []byte) { extCap(b, 0x100, 0x01, 0x148); extCap(b, 0x148, 0x1d, 0x100) }), nil, errMalformed},
		{"self loop", space(func(b []byte) { extCap(b, 0x100, 0x01, 0x100) }), nil, errMalformed},
		{"next below 0x100", space(func(b []byte) { extCap(b, 0x100, 0x01, 0x40) }), nil, errMalformed},
		{"next past the end", space(func(b []byte) { extCap(b, 0x100, 0x01, 0xffc) })[:0x200], nil, errMalformed},
		{"ACS header at the last word", space(func(b []byte) { extCap(b, 0x100, 0x01, 0x1fc); extCap(b, 0x1fc, 0x0d, 0) })[:0x200], nil, errMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseACS(tc.config)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			protoDiff(t, "ACS", got, tc.want)
		})
	}
}

func FuzzParseACS(f *testing.F) {
	f.Add(make([]byte, 64))
	b, err := os.ReadFile(filepath.Join("testdata", "health.txtar"))
	if err != nil {
		f.Fatal(err)
	}
	root := sysfstest.Materialize(f, string(b))
	for _, p := range []string{
		"sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0/0000:04:01.0/config",
		"sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0/0000:04:00.0/config",
	} {
		c, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, config []byte) {
		acs, err := ParseACS(config)
		if err == nil {
			if acs == nil || acs.Capability > 0xffff || acs.Control > 0xffff {
				t.Fatalf("ParseACS = %v, nil: want 16-bit registers", acs)
			}
			return
		}
		if acs != nil {
			t.Fatalf("ParseACS returned %v with error %v", acs, err)
		}
		if !errors.Is(err, ErrNoACS) && !errors.Is(err, errMalformed) {
			t.Fatalf("error %v is neither ErrNoACS nor malformed", err)
		}
	})
}

func TestIOMMUAndGPUDirect(t *testing.T) {
	root := healthFixture(t)
	io, errs := IOMMU(root+"/sys", root+"/proc", []string{"0000:07:00.0", "0000:17:00.0"})
	wantErrItems(t, root, errs)
	protoDiff(t, "IOMMU", io, &ginv1.Iommu{Mode: ginv1.IommuMode_IOMMU_MODE_TRANSLATED, GroupCount: 3, Cmdline: "intel_iommu=on"})

	// Only the NIC: its group is identity.
	io, _ = IOMMU(root+"/sys", root+"/proc", []string{"0000:17:00.0"})
	if io.GetMode() != ginv1.IommuMode_IOMMU_MODE_PASSTHROUGH {
		t.Errorf("NIC only: mode %v, want passthrough", io.GetMode())
	}
	// No IOMMU registered (the base fixture has no /sys/class/iommu).
	bare := nodeFixture(t)
	io, errs = IOMMU(bare+"/sys", bare+"/proc", []string{"0000:07:00.0"})
	wantErrItems(t, bare, errs)
	if io.GetMode() != ginv1.IommuMode_IOMMU_MODE_OFF {
		t.Errorf("no IOMMU: mode %v, want off", io.GetMode())
	}

	protoDiff(t, "GPUDirect", GPUDirectRDMA(root+"/sys", root+"/proc", "6.8.0-1015-nvidia"), &ginv1.GpuDirectRdma{PeermemLoaded: true, Dmabuf: true})
	protoDiff(t, "GPUDirect, old kernel", GPUDirectRDMA(root+"/sys", root+"/proc", "5.4.0-150-generic"), &ginv1.GpuDirectRdma{PeermemLoaded: true})
	remove(t, root, "sys/module/nvidia_peermem")
	protoDiff(t, "GPUDirect, no peermem", GPUDirectRDMA(root+"/sys", root+"/proc", "5.15.0"), &ginv1.GpuDirectRdma{Dmabuf: true})
	if g := GPUDirectRDMA(bare+"/sys", bare+"/proc", "6.8.0"); g != nil {
		t.Errorf("no nvidia module: %v, want nil", g)
	}
}

func TestIOMMUArgs(t *testing.T) {
	for in, want := range map[string]string{
		"BOOT_IMAGE=/vmlinuz ro quiet":                             "",
		"ro iommu=pt intel_iommu=on quiet":                         "iommu=pt intel_iommu=on",
		"amd_iommu=on iommu.passthrough=1 iommu.strict=0 iommufoo": "amd_iommu=on iommu.passthrough=1 iommu.strict=0",
	} {
		if got := iommuArgs(in); got != want {
			t.Errorf("iommuArgs(%q) = %q, want %q", in, got, want)
		}
	}
}
