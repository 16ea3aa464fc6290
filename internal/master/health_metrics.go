package master

import (
	"github.com/prometheus/client_golang/prometheus"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	nodehealth "github.com/gin-topology/gin/internal/health"
)

// healthCollector exports the node verdicts of this replica's state at
// scrape time (from checkService's cache: the rules rerun only after a
// write): one gin_health_node_verdict series per node, and the count of
// findings per check and severity. Every master exports the same values
// from its replica; the alert rules aggregate over masters.
type healthCollector struct {
	c                       *checkService
	verdict, findings, seen *prometheus.Desc
}

func newHealthCollector(c *checkService) *healthCollector {
	return &healthCollector{c: c,
		verdict: prometheus.NewDesc("gin_health_node_verdict",
			"1 for each node with its current health verdict (pass, warn, fail) and reason (ginctl check; docs/HEALTH.md).",
			[]string{"node", "verdict", "reason"}, nil),
		findings: prometheus.NewDesc("gin_health_findings",
			"Findings of the node health rules across the cluster, by check and severity (ginctl check lists them).",
			[]string{"check", "severity"}, nil),
		seen: prometheus.NewDesc("gin_health_nodes",
			"Nodes by health verdict.", []string{"verdict"}, nil),
	}
}

func (h *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- h.verdict
	ch <- h.findings
	ch <- h.seen
}

func (h *healthCollector) Collect(ch chan<- prometheus.Metric) {
	vs := h.c.current()
	type key struct{ check, sev string }
	findings := map[key]int{}
	nodes := map[string]int{"pass": 0, "warn": 0, "fail": 0}
	for _, v := range vs {
		label := nodehealth.Label(v.GetVerdict())
		nodes[label]++
		ch <- prometheus.MustNewConstMetric(h.verdict, prometheus.GaugeValue, 1, v.GetNode(), label, v.GetReason())
		for _, f := range v.GetFindings() {
			findings[key{f.GetCheck(), nodehealth.Label(f.GetSeverity())}]++
		}
	}
	for _, c := range nodehealth.Checks {
		for _, sev := range []ginv1.Verdict{ginv1.Verdict_VERDICT_WARN, ginv1.Verdict_VERDICT_FAIL} {
			k := key{c, nodehealth.Label(sev)}
			ch <- prometheus.MustNewConstMetric(h.findings, prometheus.GaugeValue, float64(findings[k]), k.check, k.sev)
		}
	}
	for verdict, n := range nodes {
		ch <- prometheus.MustNewConstMetric(h.seen, prometheus.GaugeValue, float64(n), verdict)
	}
}
