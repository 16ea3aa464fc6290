package sysfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/gin-topology/gin/internal/discovery"
)

// counterDirs are the per-port counter directories, in the order read:
// IB PMA counters, the pre-4.5 64-bit ones (mlx4), driver counters (mlx5
// RoCE). Their file names do not collide.
var counterDirs = []string{"counters", "counters_ext", "hw_counters"}

// dataCounters are reported by the kernel in 4-byte words ("divided by 4
// (lanes)"); PortCounters multiplies them by 4, as procfs and node_exporter
// do.
var dataCounters = map[string]bool{
	"port_rcv_data": true, "port_xmit_data": true,
	"port_rcv_data_64": true, "port_xmit_data_64": true,
}

// noPMA is what counters read on devices without a performance management
// agent (iWARP, some virtual functions).
const noPMA = "N/A (no PMA)"

// PortCounters reads the counters of every port of every RDMA device under
// sysRoot/class/infiniband, sorted by device and port: each regular file
// of ports/<n>/counters, counters_ext and hw_counters, keyed by file name
// (port_rcv_data, symbol_error, link_downed, out_of_sequence,
// local_ack_timeout_err, ...). port_rcv_data and port_xmit_data (and their
// _64 forms) are converted to bytes (×4).
//
// Counters the driver does not provide (a missing directory, "N/A (no
// PMA)", a read answered EINVAL or EOPNOTSUPP) are skipped silently; any
// other unreadable or malformed file is skipped with an ItemError, and the
// port's other counters are still reported. No class/infiniband directory
// means no devices: nil and no error.
func PortCounters(sysRoot string) ([]discovery.PortCounters, []discovery.ItemError) {
	dir := filepath.Join(sysRoot, "class", "infiniband")
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, []discovery.ItemError{itemErr(dir, err)}
	}
	var (
		out  []discovery.PortCounters
		errs []discovery.ItemError
	)
	for _, e := range ents {
		pdir := filepath.Join(dir, e.Name(), "ports")
		ports, err := sortedNumeric(pdir)
		if err != nil {
			errs = append(errs, itemErr(pdir, err))
			continue
		}
		for _, n := range ports {
			pc := discovery.PortCounters{Device: e.Name(), Port: uint32(n), Counters: map[string]uint64{}}
			for _, cd := range counterDirs {
				errs = append(errs, readCounterDir(filepath.Join(pdir, strconv.FormatUint(n, 10), cd), pc.Counters)...)
			}
			out = append(out, pc)
		}
	}
	return out, errs
}

// readCounterDir adds the counters of one directory to into.
func readCounterDir(dir string, into map[string]uint64) []discovery.ItemError {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return []discovery.ItemError{itemErr(dir, err)}
	}
	var errs []discovery.ItemError
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		s, err := readFile(p)
		if err != nil {
			if !unsupported(err) {
				errs = append(errs, itemErr(p, err))
			}
			continue
		}
		if s == noPMA {
			continue
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			errs = append(errs, itemErr(p, fmt.Errorf("%w: %q is not a counter", errMalformed, clip(s))))
			continue
		}
		if dataCounters[e.Name()] {
			v *= 4
		}
		into[e.Name()] = v
	}
	return errs
}
