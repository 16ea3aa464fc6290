//go:build linux

package sysfs

import (
	"fmt"

	"github.com/prometheus/procfs/sysfs"
)

// procfsDevice reads one HCA's procfs-covered attributes. Any error (procfs
// fails the whole device on one bad file) sends the caller to the own
// per-file readers.
func procfsDevice(sysRoot, name string) (*ibDevBasics, error) {
	fs, err := sysfs.NewFS(sysRoot)
	if err != nil {
		return nil, err
	}
	d, err := fs.InfiniBandDevice(name)
	if err != nil {
		return nil, err
	}
	b := &ibDevBasics{fw: d.FirmwareVersion, board: d.BoardID, hcaType: d.HCAType, ports: map[uint32]ibPortBasics{}}
	for n, p := range d.Ports {
		if uint64(n) > 1<<31 {
			return nil, fmt.Errorf("port %d out of range", n)
		}
		b.ports[uint32(n)] = ibPortBasics{
			linkLayer: p.LinkLayer,
			stateID:   uint32(p.StateID),
			physID:    uint32(p.PhysStateID),
			// procfs reports bytes/s (Gb/s × 125 000 000).
			rateGbps: uint32(p.Rate / 125_000_000),
		}
	}
	return b, nil
}
