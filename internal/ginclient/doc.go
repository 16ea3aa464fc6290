// Package ginclient is the client side of the masters' gRPC API used by
// ginctl: it dials a master list and runs calls through the one redirect
// follower (internal/redirect), which tries every master in turn when one
// is unreachable and goes straight to the leader a follower names in its
// leader hint (unary calls; a stream's hint is not read).
package ginclient
