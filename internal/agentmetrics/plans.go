package agentmetrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// PlanAnswers counts the plan socket's answers (internal/plansock.Server).
type PlanAnswers interface {
	// Answered is the answers by status (OK, NOT_FOUND, UNAVAILABLE,
	// BAD_REQUEST), zeros included.
	Answered() map[string]uint64
	// SuppressedLines is the caller-caused log lines the socket's rate
	// limit left out.
	SuppressedLines() uint64
}

// PlanFetches counts the plan store's fetches from the masters
// (internal/nodeplans.Store).
type PlanFetches interface {
	// FetchResults is the fetches by result (ok, not_found, error), zeros
	// included.
	FetchResults() map[string]uint64
	// Refused is the requests refused without a fetch because their user
	// (not root) asked for too many distinct jobs not held.
	Refused() uint64
}

// PlanCollector reports the node-local plan path: requests answered on the
// plan socket and plans fetched from the masters. It implements
// prometheus.Collector.
type PlanCollector struct {
	hostname string
	answers  PlanAnswers
	fetches  PlanFetches

	requests, fetchResults, refused, suppressed *prometheus.Desc
}

// NewPlans returns the plan collector of an agent that serves plans.
func NewPlans(hostname string, answers PlanAnswers, fetches PlanFetches) *PlanCollector {
	d := prometheus.NewDesc
	return &PlanCollector{hostname: hostname, answers: answers, fetches: fetches,
		requests: d("gin_agent_plan_requests_total", "Plan requests answered on the agent's plan socket (ranks, the Slurm prolog), by answer status: ok, not_found, unavailable, bad_request.",
			[]string{"status", "hostname"}, nil),
		fetchResults: d("gin_agent_plan_fetches_total", "Plans asked of the masters for a job the agent did not hold, by result: ok, not_found (the job has no plan), error (masters unreachable or failing, or a plan that failed verification).",
			[]string{"result", "hostname"}, nil),
		refused: d("gin_agent_plan_requests_refused_total", "Plan requests refused without asking the masters because their user (not root) had asked for more distinct jobs this node does not hold than the store's bound (nodeplans.MaxJobsPerUID in nodeplans.FailureTTL).",
			[]string{"hostname"}, nil),
		suppressed: d("gin_agent_plan_socket_log_lines_suppressed_total", "Plan socket log lines a caller caused (no plan served, connection refused, answer not delivered) left out by their rate limit (1/s after a burst of 10); every answer is still counted in gin_agent_plan_requests_total.",
			[]string{"hostname"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *PlanCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.requests
	ch <- c.fetchResults
	ch <- c.refused
	ch <- c.suppressed
}

// Collect implements prometheus.Collector.
func (c *PlanCollector) Collect(ch chan<- prometheus.Metric) {
	for status, n := range c.answers.Answered() {
		ch <- counter(c.requests, float64(n), strings.ToLower(status), c.hostname)
	}
	for result, n := range c.fetches.FetchResults() {
		ch <- counter(c.fetchResults, float64(n), result, c.hostname)
	}
	ch <- counter(c.refused, float64(c.fetches.Refused()), c.hostname)
	ch <- counter(c.suppressed, float64(c.answers.SuppressedLines()), c.hostname)
}
