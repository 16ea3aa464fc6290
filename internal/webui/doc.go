// Package webui is gin-master's read-only web view at /ui/ on --http-bind:
// the fabric drawn (internal/webui/draw, server-rendered SVG), the
// cluster's nodes with their state, the Raft members and the pinned plans
// with their reasons; a node's page (/ui/node) draws its NVLinks, `topo -m`,
// HCA ports and PCIe tree, a job's (/ui/job) while it runs its ranks and
// suspects (the leader's live state, Backend.JobLive), its nodes on the
// fabric with the suspects marked and its plan as charts, and /ui/estimate
// the scaling of the placement classes.
// Pages, templates, styles and script are embedded (no CDN, a strict
// Content-Security-Policy: no inline script or style); its JSON API under
// /ui/api/ answers from the same read paths as gRPC (any replica, so it
// works on a follower) and only reads.
//
// Who may read it is decided by the master in front of it: on a cluster
// with mutual TLS only a client certificate of the cluster's CA naming
// reader, scheduler, admin or master (docs/SECURITY.md).
package webui
