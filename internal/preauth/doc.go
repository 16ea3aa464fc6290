// Package preauth bounds what anyone who reaches a listening port can
// hold before authentication: a Limiter counts the connections of each
// source address still in their TLS handshake (or, on HTTP, not yet past
// their first request) and refuses, at once and without waiting, one past
// the bound for its address or past the bound of all of them together.
// A connection leaves the count when its handshake ends, whatever the
// outcome, so a finished session never holds a slot. The master puts one
// in front of its gRPC port (Credentials) and its HTTP port (ConnState);
// the Raft port keeps a pool of its own for members and counts strangers
// with one (internal/raft).
package preauth
