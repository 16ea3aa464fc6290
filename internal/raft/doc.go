// Package raft replicates the master's state with hashicorp/raft: the FSM that
// applies typed, versioned commands (gin.state.v1.Command) to internal/state,
// checksummed snapshots, the durable stores (raft-wal log, file snapshots) and
// the Node that opens them on a data directory and proposes commands.
//
// Every command is idempotent, because a leader that loses leadership leaves
// the outcome of a write unknown and clients retry it. A command this binary
// does not know (written by a newer version during a rolling upgrade) is
// skipped with a warning instead of stopping the FSM.
package raft
