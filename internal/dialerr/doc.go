// Package dialerr tells, from the text of a gRPC client's error, why it
// could not talk to a master at all: plaintext against a master serving
// mutual TLS, TLS against a plaintext port, an HTTP port instead of the
// gRPC one, nothing listening, an unknown host. grpc-go reports these as
// UNAVAILABLE with its transport's words only; ginctl and gin-agent turn
// the Cause into one sentence saying what to do. It is a leaf.
package dialerr
