// Package discovery turns a node's hardware into a gin.v1.NodeInventory.
//
// Each source of facts is its own collector behind the small Source interface
// (NVML, InfiniBand sysfs, RDMA netlink, fabric scans, and the simulated
// hardware profiles in discovery/sim). Open picks a source from the
// --source flag of gin-agent: "sim:<profile>", "file:<path>" or "auto".
//
// Data flow: discovery → agent (internal/agent) → master (internal/master) →
// graph (internal/graph).
package discovery
