// Package state is the master's replicated cluster state: node records
// (inventory, generation, liveness state), the fabric topology, and the
// canonical graph derived from them. Only the Raft FSM (internal/raft) writes
// it, in log order, so every replica holds the same state at the same index;
// readers get immutable snapshots and never block writers for long.
//
// Records stored here are never mutated after they are stored: an update
// replaces the record, so a reader holding one sees a consistent value.
package state
