// Package master is gin-master's service layer: the gRPC AgentService that
// receives inventories and heartbeats, the TopologyService and AdminService
// that answer queries, the leader-only liveness tracker, and the one place
// where internal errors become gRPC statuses (errors.go).
//
// Writes go through internal/raft (the FSM applies them to internal/state);
// reads are served from internal/state and its canonical graph
// (internal/graph) on any replica, stating the index they were served at.
package master
