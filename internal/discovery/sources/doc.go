// Package sources opens the discovery source named by gin-agent's --source
// flag: "sim:<profile>" (internal/discovery/sim), "file:<path>" (an inventory
// saved with `gin-agent --once -o json`) or "auto" (the node's real hardware:
// NVML, sysfs, RDMA netlink). It sits above the collectors so that they can
// share the types of internal/discovery without import cycles.
package sources
