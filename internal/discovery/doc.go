// Package discovery holds what every collector of gin-agent shares: the
// Source interface (a node's inventory, now), the counter types that go to
// Prometheus, and ItemError (one unreadable item that never hides the rest).
//
// The collectors live in sub-packages, one per source of facts: nvml (GPUs,
// NVLinks, NVSwitches, MNNVL), sysfs (PCIe tree, InfiniBand/RoCE HCAs, port
// counters, host facts), rdmanl (RDMA QPs over netlink), fabricscan
// (ibnetdiscover and LLDP) and sim (simulated hardware profiles). Package
// sources picks one from the --source flag.
//
// Data flow: discovery → agent (internal/agent) → master (internal/master) →
// graph (internal/graph).
package discovery
