// Package agent is the gin-agent runtime: it keeps one node's inventory
// current on the masters.
//
// An Agent collects the node's inventory from a Source at start and every
// collect interval, and keeps one AgentService.Session stream open to a
// master (see api/proto/gin/v1/agent.proto for the protocol):
//
//   - It opens the session with a Hello carrying the last generation the
//     master acknowledged and the content hash (inventory.ContentHash) of the
//     current inventory. When the master already holds that content
//     (HelloAck.in_sync) nothing is re-sent, so a master failover does not make
//     every agent re-upload.
//   - Otherwise, and whenever a collection's hash differs from the hash the
//     master holds, it sends the inventory at held generation + 1, with at most
//     one unacknowledged inventory in flight.
//   - It sends a Heartbeat every heartbeat interval (the master may override
//     the interval in any SessionResponse).
//   - It starts at the master its node name hashes to
//     (masteraddr.StartIndex: agents spread over the master list; any
//     master holds sessions and relays writes to the leader) and keeps that session across elections. It
//     follows a leader hint when a master refuses the session and names
//     another (older masters' followers did: leader_hint and
//     FAILED_PRECONDITION), rotates through the configured masters on
//     failure with jittered exponential backoff, and backs off to the
//     maximum when the master rejects the inventory (INVALID_ARGUMENT) or
//     the agent's identity (ALREADY_EXISTS, PERMISSION_DENIED,
//     UNAUTHENTICATED). A leader hint counts only when it names neither the
//     session's master nor the name that master gave itself in its HelloAck.
//   - Away from its home master (the one its name hashes to: after that
//     master failed), it probes the home master's gRPC health for
//     gin.v1.AgentService at a jittered interval and returns once it is
//     SERVING, leaving its session cleanly and re-sending nothing (home.go).
//   - During a failover (reach.go) it passes over a master that just failed
//     without answering, even when a follower still names it as leader, and
//     waits at most a second between attempts while some master answers;
//     the long exponential backoff is for when no master answers at all.
//
// Collection goes on while no master is reachable; Status reports the
// connection state for logs and metrics.
//
// Data flow: discovery (internal/discovery) → agent → master.
package agent
