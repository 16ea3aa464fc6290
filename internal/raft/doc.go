// Package raft replicates the master's state with hashicorp/raft: the FSM that
// applies typed, versioned commands (gin.state.v1.Command) to internal/state,
// checksummed snapshots, the durable stores (raft-wal log, file snapshots) and
// the Node that opens them on a data directory and proposes commands.
//
// Every command is idempotent, because a leader that loses leadership leaves
// the outcome of a write unknown and clients retry it. A command this binary
// does not know (written by a newer version during a rolling upgrade) is
// skipped and counted (Node.SkippedEntries) instead of stopping the FSM: the
// server keeps replicating and voting, so the cluster keeps its quorum, while
// internal/master refuses to serve from the incomplete state until the
// server runs the newer version (which re-applies the log on restart).
// Rule for whoever adds a command type: the masters must be upgraded before
// anything proposes it, or an old leader can be elected that does not know it.
//
// Config.Recover (gin-master --recover) brings back a cluster that lost its
// quorum: before starting, hashicorp/raft's RecoverCluster rewrites the
// stored configuration to this server (plus RecoverPeers) and commits its
// whole log; a data dir without Raft state is refused untouched
// (CheckRecoverable, ErrNoState).
package raft
