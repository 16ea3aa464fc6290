package master

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// liveCollector exports the leader's live job verdicts (only the leader
// has any: a follower exports no series): gin_job_suspect for each
// confirmed suspect, its slowdown, and the windows taken and refused.
type liveCollector struct {
	l                          *liveService
	suspect, slowdown, windows *prometheus.Desc
}

func newLiveCollector(l *liveService) *liveCollector {
	labels := []string{"job", "node", "component", "kind"}
	return &liveCollector{l: l,
		suspect: prometheus.NewDesc("gin_job_suspect",
			"1 for each confirmed suspect of a running job: kind slow-link (component: the NIC), straggler or hang (component: the GPU); ginctl job report --job ID shows the evidence (docs/LIVE.md). Exported by the leader only.",
			labels, nil),
		slowdown: prometheus.NewDesc("gin_job_suspect_slowdown",
			"How much slower than the job's healthy ranks a confirmed suspect is (1.5: takes 1.5x as long); for a hang, the stall over the job's mean collective time.",
			labels, nil),
		windows: prometheus.NewDesc("gin_live_windows_total",
			"Rank windows (profiler reports, through the agents) this master took as leader, by outcome: accepted, refused (invalid, or past the live bounds).",
			[]string{"outcome"}, nil),
	}
}

func (c *liveCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.suspect
	ch <- c.slowdown
	ch <- c.windows
}

func (c *liveCollector) Collect(ch chan<- prometheus.Metric) {
	seen := map[string]bool{}
	for job, ss := range c.l.det.Suspects() {
		for _, s := range ss {
			if !s.GetConfirmed() {
				continue
			}
			// Two communicators of a job can name one component: one series.
			k := fmt.Sprintf("%s\x00%s\x00%s\x00%s", job, s.GetNode(), s.GetComponent(), s.GetKind())
			if seen[k] {
				continue
			}
			seen[k] = true
			ch <- prometheus.MustNewConstMetric(c.suspect, prometheus.GaugeValue, 1, job, s.GetNode(), s.GetComponent(), s.GetKind())
			ch <- prometheus.MustNewConstMetric(c.slowdown, prometheus.GaugeValue, s.GetSlowdown(), job, s.GetNode(), s.GetComponent(), s.GetKind())
		}
	}
	ch <- prometheus.MustNewConstMetric(c.windows, prometheus.CounterValue, float64(c.l.windows.Load()), "accepted")
	ch <- prometheus.MustNewConstMetric(c.windows, prometheus.CounterValue, float64(c.l.refused.Load()), "refused")
}
