// Package inventory holds the rules for a NodeInventory that every component
// shares: its content hash (what "unchanged" means), its validation (the
// master's edge: limits and self-consistency), and inventory deltas (what an
// agent sends when only part of its node changed).
package inventory
