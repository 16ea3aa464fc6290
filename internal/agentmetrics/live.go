package agentmetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gin-topology/gin/internal/livereport"
)

// LiveReports counts the rank reports the agent took and sent
// (internal/livereport.Collector).
type LiveReports interface {
	Counts() livereport.Counts
}

// LiveCollector reports live job telemetry on the node: rank windows taken
// from the node socket, refused, dropped, and delivered to the masters.
type LiveCollector struct {
	hostname string
	src      LiveReports
	windows  *prometheus.Desc
}

// NewLive returns the live telemetry collector.
func NewLive(hostname string, src LiveReports) *LiveCollector {
	return &LiveCollector{hostname: hostname, src: src,
		windows: prometheus.NewDesc("gin_agent_live_windows_total",
			"Rank windows of the profiler plugin (libnccl-profiler-gin.so) by outcome: taken from the node socket, refused (malformed, a pid not the sender's, a rank another user reports), dropped (held past livereport.MaxPending), sent to the masters, send_failed (the masters did not take them).",
			[]string{"outcome", "hostname"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *LiveCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.windows }

// Collect implements prometheus.Collector.
func (c *LiveCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.src.Counts()
	for _, o := range []struct {
		name string
		v    uint64
	}{{"taken", n.Taken}, {"refused", n.Refused}, {"dropped", n.Dropped}, {"sent", n.Sent}, {"send_failed", n.SendFailed}} {
		ch <- prometheus.MustNewConstMetric(c.windows, prometheus.CounterValue, float64(o.v), o.name, c.hostname)
	}
}
