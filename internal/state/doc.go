// Package state is the master's replicated cluster state: node records
// (inventory, generation, liveness state), the fabric topology, and the
// canonical graph derived from them. Only the Raft FSM (internal/raft) writes
// it, in log order, so every replica holds the same state at the same index;
// readers get immutable snapshots and never block writers for long.
//
// Records stored here are never mutated after they are stored: an update
// replaces the record, so a reader holding one sees a consistent value.
//
// Every master holds every node, so a node's bytes are kept small
// (nodes.go): the inventory is stored compressed in its wire form (~3 KB
// for a DGX H100 instead of ~44 KB of decoded Go objects) next to a
// NodeHead, the record without the inventory and the few inventory fields
// read on hot paths. Node decodes the inventory per call; Head does not.
// Raft snapshots are encoded and restored one node at a time (Capture,
// Restorer) in the same wire format as before, so that neither holds
// every inventory decoded at once.
package state
