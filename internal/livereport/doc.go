// Package livereport is gin-agent's side of live job telemetry: it takes
// the report frames the node's ranks send on the node socket (the profiler
// plugin, internal/ncclplugin/profiler; internal/rankreport's format),
// checks who sent them, adds what only the agent knows (the NIC nearest
// the rank's GPU, from the node's inventory: the rail that carries its
// cross-node traffic), and sends the node's windows to the masters once a
// flush interval (LiveService.ReportRanks): one call a second per node,
// never one per event.
//
// Trust: any local user can write to the node socket. A frame's pid must
// be the connecting process's (SO_PEERCRED), and a (job, communicator,
// rank) stays with the user that first reported it, so one user cannot
// speak for another's ranks. Memory is bounded (MaxPending windows, then
// the oldest are dropped and counted).
package livereport
