// Package ginclient is the client side of the masters' gRPC API used by
// ginctl (and later the NCCL plugin's plan client): it dials a master list,
// tries every master in turn when one is unreachable, and moves to the leader
// when a follower names it.
package ginclient
