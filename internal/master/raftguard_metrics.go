package master

import (
	"github.com/prometheus/client_golang/prometheus"
)

// raftGuardCollector exports the Raft RPCs the TLS layer refused because
// their certificate is not the member it claims to be (internal/raft's
// RPC guard), read at scrape time.
type raftGuardCollector struct {
	s                *Server
	refused, preAuth *prometheus.Desc
}

func newRaftGuardCollector(s *Server) *raftGuardCollector {
	return &raftGuardCollector{s: s, refused: prometheus.NewDesc("gin_master_raft_rpcs_refused_total",
		"Inbound Raft RPCs refused since start because the master certificate that sent them is not the member it claims to be, by rpc (AppendEntries, RequestVote, InstallSnapshot, TimeoutNow, RequestPreVote) and reason (not_member, id_mismatch, addr_mismatch, unknown_rpc, malformed, starting). Only with TLS on.",
		[]string{"server", "rpc", "reason"}, nil),
		preAuth: prometheus.NewDesc("gin_master_raft_connections_refused_total",
			"Connections the Raft TLS port closed before their handshake, by reason: source (a non-member address already holds 4 handshakes), busy (all 64 stranger slots, or all 32 member slots, taken). Only with TLS on.",
			[]string{"server", "reason"}, nil)}
}

// It also carries the relay refusals of membergate.go.
func (c *raftGuardCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.refused
	ch <- c.preAuth
	c.s.metrics.members.counter.Describe(ch)
}

func (c *raftGuardCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.metrics.members.counter.Collect(ch)
	pre := c.s.node.RaftConnsRefused()
	ch <- prometheus.MustNewConstMetric(c.preAuth, prometheus.CounterValue, float64(pre.Source), c.s.cfg.ID, "source")
	ch <- prometheus.MustNewConstMetric(c.preAuth, prometheus.CounterValue, float64(pre.Busy), c.s.cfg.ID, "busy")
	for _, r := range c.s.node.RefusedRPCs() {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(r.Count), c.s.cfg.ID, r.RPC, r.Reason)
	}
}
