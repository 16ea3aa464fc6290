package sysfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery"
)

// PCI Express extended configuration space, as pciutils' lspci walks it
// (lib/header.h, ls-ecaps.c): extended capabilities start at 0x100, each
// with a 32-bit header (ID in bits 15:0, version 19:16, next offset 31:20);
// the ACS capability (ID 0x000D) holds ACSCap at +4 and ACSCtl at +6.
const (
	extCapStart  = 0x100
	extCapACS    = 0x000d
	configMax    = 4096
	maxExtCapHop = (configMax - extCapStart) / 4 // a longer chain is a loop
)

// ACS control bits (ACSCtl), as lspci -vvv names them.
const (
	ACSSrcValid    = 1 << 0
	ACSTransBlk    = 1 << 1
	ACSReqRedir    = 1 << 2
	ACSCmpltRedir  = 1 << 3
	ACSUpstreamFwd = 1 << 4
	ACSEgressCtrl  = 1 << 5
	ACSDirectTrans = 1 << 6
)

// ErrNoACS says a config space has no ACS capability (or no extended
// space at all, as when a non-root user reads only the first 64 bytes).
var ErrNoACS = errors.New("no ACS capability")

// ParseACS finds the ACS extended capability in a PCI config space (the
// bytes of /sys/bus/pci/devices/<bdf>/config) and returns its capability
// and control registers. It returns ErrNoACS when the space is shorter than
// the extended area or the capability list does not contain ACS, and an
// error for a list that loops or points outside the space.
func ParseACS(config []byte) (*ginv1.PcieAcs, error) {
	if len(config) < extCapStart+4 {
		return nil, ErrNoACS
	}
	if len(config) > configMax {
		config = config[:configMax]
	}
	off := extCapStart
	for hop := 0; ; hop++ {
		if hop > maxExtCapHop {
			return nil, fmt.Errorf("%w: extended capability list loops", errMalformed)
		}
		h := binary.LittleEndian.Uint32(config[off:])
		if h == 0 || h == 0xffffffff {
			return nil, ErrNoACS // empty list, or a device that is gone
		}
		if h&0xffff == extCapACS {
			if off+8 > len(config) {
				return nil, fmt.Errorf("%w: ACS capability at 0x%x runs past the config space (%d bytes)", errMalformed, off, len(config))
			}
			return &ginv1.PcieAcs{
				Capability: uint32(binary.LittleEndian.Uint16(config[off+4:])),
				Control:    uint32(binary.LittleEndian.Uint16(config[off+6:])),
			}, nil
		}
		next := int(h>>20) &^ 3
		if next == 0 {
			return nil, ErrNoACS
		}
		if next < extCapStart || next+4 > len(config) {
			return nil, fmt.Errorf("%w: extended capability at 0x%x points to 0x%x, outside 0x100..0x%x", errMalformed, off, next, len(config)-4)
		}
		off = next
	}
}

// ACSBlocksP2P reports whether an ACS control register redirects or blocks
// peer-to-peer requests (ReqRedir, CmpltRedir or EgressCtrl without
// DirectTrans): then a GPU's DMA to a NIC under the same switch goes up to
// the root complex instead of across the switch. NCCL's troubleshooting
// guide ("PCI Access Control Services") says to disable it.
func ACSBlocksP2P(ctl uint32) bool {
	return ctl&(ACSReqRedir|ACSCmpltRedir|ACSEgressCtrl) != 0
}

// ACSText renders an ACS control register as lspci -vvv does
// ("SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-").
func ACSText(ctl uint32) string {
	names := []string{"SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans"}
	b := make([]byte, 0, 96)
	for i, n := range names {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, n...)
		if ctl&(1<<i) != 0 {
			b = append(b, '+')
		} else {
			b = append(b, '-')
		}
	}
	return string(b)
}

// AttachACS reads the config space of every PCIe bridge below a host bridge
// and sets its ACS registers. A config space that cannot be read (not root:
// the kernel then gives the first 64 bytes only, which ParseACS reports as
// no ACS) or has no ACS leaves the bridge's field unset; a malformed
// capability list is an ItemError.
func AttachACS(sysRoot string, bridges []*ginv1.PcieBridge) []discovery.ItemError {
	var errs []discovery.ItemError
	for _, b := range bridges {
		if b.GetKind() == ginv1.PcieBridgeKind_PCIE_BRIDGE_KIND_HOST_BRIDGE {
			continue
		}
		bdf, ok := NormalizeBusID(b.GetId())
		if !ok {
			continue
		}
		p := filepath.Join(pciDevPath(sysRoot, bdf), "config")
		c, err := readConfig(p)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, itemErr(p, err))
			}
			continue
		}
		acs, err := ParseACS(c)
		switch {
		case errors.Is(err, ErrNoACS):
		case err != nil:
			errs = append(errs, itemErr(p, err))
		default:
			b.Acs = acs
		}
	}
	return errs
}

// readConfig reads at most configMax bytes of a config space file.
func readConfig(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, configMax)
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil || m == 0 {
			break
		}
	}
	return buf[:n], nil
}
