// Package master is gin-master's service layer: the gRPC AgentService that
// receives inventories and heartbeats on any master (a follower relays
// writes to the leader through RelayService and reports its sessions:
// relay.go, reports.go), the TopologyService and AdminService that answer
// queries, the leader's liveness tracker, and the one place where internal
// errors become gRPC statuses (errors.go).
//
// At scale (issue #16): handshakes are admitted by slots and by rate
// (admission.go); a master says it takes agent sessions, for agents
// returning home, only while it is in sync and not overloaded
// (sessionhealth.go); followers report their sessions to the leader as
// deltas (reportdelta.go); a session's long-lived goroutine only receives,
// its work runs on short-lived ones so that its stack stays small
// (freshstack.go).
//
// Writes go through internal/raft (the FSM applies them to internal/state);
// reads are served from internal/state and its canonical graph
// (internal/graph) on any replica, stating the index they were served at.
package master
