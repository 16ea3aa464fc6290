// Package archtest holds no code: its test enforces the layering that
// docs/ARCHITECTURE.md draws (what must never import what), read from
// `go list`, plus the two "one place" rules of the wire contract that a
// reviewer would otherwise have to re-check by hand.
package archtest
