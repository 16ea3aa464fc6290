package sysfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery"
)

// Host reads the host facts sysfs, procfs and /etc hold:
//   - hostname: procRoot/sys/kernel/hostname;
//   - machine id: etcRoot/machine-id, else sysRoot/class/dmi/id/product_uuid
//     (lower-cased; root-only on most kernels);
//   - system model: sysRoot/class/dmi/id/product_name (absent without DMI,
//     e.g. on many Arm servers: then empty and no error);
//   - kernel version: procRoot/sys/kernel/osrelease;
//   - NUMA nodes: sysRoot/devices/system/node/node<N>/cpulist, in id order,
//     socket from the first CPU's topology/physical_package_id. Nodes with
//     no CPUs (GPU or CXL memory nodes) are not CPU NUMA nodes and are left
//     out. A kernel without NUMA (no node directory) yields one node 0 with
//     the CPUs of devices/system/cpu/online.
//
// Driver and CUDA versions come from NVML, not from here.
func Host(sysRoot, procRoot, etcRoot string) (*ginv1.Host, []discovery.ItemError) {
	var errs []discovery.ItemError
	fail := func(item string, err error) { errs = append(errs, itemErr(item, err)) }
	h := &ginv1.Host{}

	p := filepath.Join(procRoot, "sys", "kernel", "hostname")
	if s, err := readFile(p); err != nil {
		fail(p, err)
	} else {
		h.Hostname = s
	}
	p = filepath.Join(procRoot, "sys", "kernel", "osrelease")
	if s, err := readFile(p); err != nil {
		fail(p, err)
	} else {
		h.KernelVersion = s
	}

	mp := filepath.Join(etcRoot, "machine-id")
	mid, merr := readFile(mp)
	if merr == nil && mid == "" {
		merr = fmt.Errorf("%w: empty", errMalformed)
	}
	if merr == nil {
		h.MachineId = mid
	} else {
		up := filepath.Join(sysRoot, "class", "dmi", "id", "product_uuid")
		uuid, uerr := readFile(up)
		if uerr == nil && uuid == "" {
			uerr = fmt.Errorf("%w: empty", errMalformed)
		}
		if uerr == nil {
			h.MachineId = strings.ToLower(uuid)
		} else {
			fail(mp, merr)
			fail(up, uerr)
		}
	}

	p = filepath.Join(sysRoot, "class", "dmi", "id", "product_name")
	if s, err := readFile(p); err == nil {
		h.SystemModel = s
	} else if !errors.Is(err, os.ErrNotExist) {
		fail(p, err)
	}

	h.NumaNodes, errs = numaNodes(sysRoot, errs)
	return h, errs
}

func numaNodes(sysRoot string, errs []discovery.ItemError) ([]*ginv1.NumaNode, []discovery.ItemError) {
	fail := func(item string, err error) { errs = append(errs, itemErr(item, err)) }
	dir := filepath.Join(sysRoot, "devices", "system", "node")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		p := filepath.Join(sysRoot, "devices", "system", "cpu", "online")
		cpus, err := readFile(p)
		if err != nil {
			fail(p, err)
			return nil, errs
		}
		sock, err := socketOf(sysRoot, cpus)
		if err != nil {
			fail(p, err)
		}
		return []*ginv1.NumaNode{{Id: 0, Socket: sock, CpuList: cpus}}, errs
	}
	if err != nil {
		fail(dir, err)
		return nil, errs
	}
	var ids []uint64
	for _, e := range ents {
		s, ok := strings.CutPrefix(e.Name(), "node")
		if !ok {
			continue
		}
		if id, err := strconv.ParseUint(s, 10, 32); err == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var nodes []*ginv1.NumaNode
	for _, id := range ids {
		p := filepath.Join(dir, "node"+strconv.FormatUint(id, 10), "cpulist")
		cpus, err := readFile(p)
		if err != nil {
			fail(p, err)
			continue
		}
		if cpus == "" {
			continue // memory-only node
		}
		sock, err := socketOf(sysRoot, cpus)
		if err != nil {
			fail(p, err)
		}
		nodes = append(nodes, &ginv1.NumaNode{Id: uint32(id), Socket: sock, CpuList: cpus})
	}
	return nodes, errs
}

// socketOf returns the physical package of the first CPU of a kernel CPU
// list ("0-55,112-167").
func socketOf(sysRoot, cpuList string) (uint32, error) {
	first := cpuList
	if i := strings.IndexAny(first, ",-"); i >= 0 {
		first = first[:i]
	}
	cpu, err := strconv.ParseUint(first, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: CPU list %q", errMalformed, clip(cpuList))
	}
	p := filepath.Join(sysRoot, "devices", "system", "cpu", "cpu"+strconv.FormatUint(cpu, 10), "topology", "physical_package_id")
	s, err := readFile(p)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p, err)
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil || v < 0 {
		// -1 on some virtual machines: no package information.
		return 0, fmt.Errorf("%s: %w: %q is not a package id", p, errMalformed, clip(s))
	}
	return uint32(v), nil
}
