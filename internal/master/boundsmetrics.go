package master

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gin-topology/gin/internal/authz"
)

// boundsCollector reports the per-request and per-caller bounds of issue
// #21 and where the Raft log stands against its byte threshold; what each
// bound refused is gin_master_rejected_messages_total{reason=...}
// (names_limit, read_limit, inventory_too_large, inventory_rate).
type boundsCollector struct {
	s                                                       *Server
	names, heavy, invBytes, invChanges, logBytes, snapBytes *prometheus.Desc
	snapsForBytes, dupNow, dupTotal                         *prometheus.Desc
}

func newBoundsCollector(s *Server) *boundsCollector {
	d := prometheus.NewDesc
	id := []string{"server"}
	return &boundsCollector{s: s,
		names:         d("gin_master_request_names_limit", "The most host names one read's hostlist may expand to (the cluster's nodes, at least 4096); past it RESOURCE_EXHAUSTED names_limit.", id, nil),
		heavy:         d("gin_master_heavy_reads_per_identity_limit", "Heavy reads (graph, matrix, node list, path, export, estimate, ordering) one certificate identity runs at once with TLS; past it, after a short wait, RESOURCE_EXHAUSTED read_limit.", id, nil),
		invBytes:      d("gin_master_inventory_bytes_limit", "The most bytes one node's inventory may hold, encoded; past it RESOURCE_EXHAUSTED inventory_too_large.", id, nil),
		invChanges:    d("gin_master_inventory_changes_per_minute_limit", "The inventory changes one node's agent may commit per minute (a bucket of as many); past it RESOURCE_EXHAUSTED inventory_rate.", id, nil),
		logBytes:      d("gin_master_raft_log_bytes_since_compaction", "Raft log bytes appended since the log was last compacted; at gin_master_raft_snapshot_bytes_threshold a snapshot is taken.", id, nil),
		snapBytes:     d("gin_master_raft_snapshot_bytes_threshold", "Raft log bytes since the last compaction that trigger a snapshot (--snapshot-bytes), besides --snapshot-threshold entries.", id, nil),
		snapsForBytes: d("gin_master_raft_snapshots_for_bytes_total", "Snapshots taken because the log's bytes passed the threshold since start.", id, nil),
		dupNow:        d("gin_master_duplicate_agent_sessions", "On the leader: nodes whose agent has held sessions on two masters (or two on one) at once for longer than a reattach takes: one node certificate presented by two machines.", id, nil),
		dupTotal:      d("gin_master_duplicate_agent_sessions_total", "On the leader: times a node was found held on two masters at once past the grace (each logged once, naming the masters).", id, nil),
	}
}

func (c *boundsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.names, c.heavy, c.invBytes, c.invChanges, c.logBytes, c.snapBytes, c.snapsForBytes, c.dupNow, c.dupTotal} {
		ch <- d
	}
}

func (c *boundsCollector) Collect(ch chan<- prometheus.Metric) {
	id := c.s.cfg.ID
	g := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, id)
	}
	g(c.names, float64(readNamesLimit(c.s.store.View())))
	g(c.heavy, authz.DefaultMaxHeavyReadsPerIdentity)
	g(c.invBytes, MaxInventoryBytes)
	g(c.invChanges, InventoryChangesPerMinute)
	g(c.logBytes, float64(c.s.node.LogBytesSinceCompaction()))
	g(c.snapBytes, float64(c.s.node.SnapshotBytesThreshold()))
	ch <- prometheus.MustNewConstMetric(c.snapsForBytes, prometheus.CounterValue, float64(c.s.node.SnapshotsForBytes()), id)
	dupNow, dupTotal := c.s.dups.counts()
	g(c.dupNow, float64(dupNow))
	ch <- prometheus.MustNewConstMetric(c.dupTotal, prometheus.CounterValue, float64(dupTotal), id)
}
