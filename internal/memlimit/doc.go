// Package memlimit sets a process's soft memory limit
// (runtime/debug.SetMemoryLimit) from a flag: a size ("900MiB", "1.5GiB",
// "1073741824"), "off", or "auto", which derives it from the cgroup the
// process runs in (a container's or a systemd unit's MemoryMax=): 90% of
// the limit, so that the garbage collector works harder before the kernel
// kills the process; without a cgroup limit "auto" keeps the Go runtime's
// default (no limit, or what GOMEMLIMIT says).
package memlimit
