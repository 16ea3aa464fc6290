// Package ginclient is the client side of the masters' gRPC API used by
// ginctl: it dials a master list and runs calls through the one failover
// walk (internal/redirect), which tries every master in turn when one is
// unreachable; any master answers, since followers forward writes to the
// leader.
package ginclient
