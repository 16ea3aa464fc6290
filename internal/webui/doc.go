// Package webui is gin-master's read-only web view at /ui/ on --http-bind:
// the cluster's nodes with their state, a node's GPUs, NVLink health and
// `topo -m` matrix, the Raft members and the pinned plans with their
// reasons. The page and its script are embedded (no CDN, a strict
// Content-Security-Policy); its JSON API under
// /ui/api/ answers from the same read paths as gRPC (any replica, so it
// works on a follower) and only reads.
//
// Not done: authorization. Until the security issue's reader role exists,
// whoever reaches --http-bind can read the page (as with /metrics).
package webui
