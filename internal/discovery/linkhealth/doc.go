// Package linkhealth turns link error counters into health verdicts: an
// NVLink or HCA port whose error rate crosses a configurable threshold is
// marked DEGRADED in the inventory, so the agent reports it to the master (the
// master holds verdicts; Prometheus holds the counters).
package linkhealth
