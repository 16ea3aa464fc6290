// Package sysfs holds gin-agent's Linux sysfs collectors: the PCIe tree
// above GPUs and NICs, the InfiniBand/RoCE HCAs and their ports, the HCA
// port counters, and host facts (hostname, machine id, model, kernel, NUMA
// nodes).
//
// Every collector takes its roots as arguments ("/sys", "/proc", "/etc" on a
// real node; DefaultSysRoot, DefaultProcRoot, DefaultEtcRoot), so tests run
// on fixture trees laid out exactly as the kernel lays out sysfs (see
// testdata/node.txtar and the materialiser in fixture_test.go).
//
// Error model: collectors never stop at the first failure. Each unreadable
// or malformed file becomes a discovery.ItemError (Source "sysfs", Item the
// file's path or "<dev> port <n> <what>") and the collector goes on with
// the next file, port and device: one bad HCA never hides another. Values
// that could not be read stay at their zero value (NUMA nodes at -1).
//
// InfiniBand: device and port attributes covered by
// github.com/prometheus/procfs (fw_ver, board_id, hca_type, link_layer,
// state, phys_state, rate) are taken from sysfs.FS.InfiniBandDevice, one
// device at a time. procfs fails a whole device on one bad file (a
// malformed rate or counter, a missing fw_ver); such a device is re-read
// with this package's own per-file readers so that the ItemError names the
// bad file and the rest of the device is still reported. Attributes procfs
// does not read (sys_image_guid, node_guid formatting, lid, sm_lid, GIDs,
// gid_attrs/ndevs, the device symlink, numa_node, the netdev) always come
// from the own readers. The procfs path is Linux-only (procfs_linux.go);
// elsewhere the own readers read every attribute (same files, same results:
// the tests check both paths agree). Port counters (PortCounters) are read file by file
// from counters/, counters_ext/ and hw_counters/ with procfs's conventions
// (data counters ×4 to bytes, "N/A (no PMA)", EINVAL and EOPNOTSUPP skipped
// as unsupported); the tests cross-check the values against procfs.
//
// GUIDs (node, system image, port) are reported as "0x" + 16 lower-case hex
// digits, as ibstat prints them and as the simulated sources report them.
//
// Data flow: sysfs → discovery (hardware source) → agent → master → graph.
package sysfs
