package sources

import (
	"context"
	"time"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery"
	"github.com/gin-topology/gin/internal/discovery/linkhealth"
)

// healthSource decorates a source that also reads counters: every collection
// samples the counters and marks links over the error threshold DEGRADED, so
// the change reaches the master as a new inventory generation.
type healthSource struct {
	src      discovery.Source
	counters discovery.CounterSource
	eval     *linkhealth.Evaluator
	now      func() time.Time
}

// WithHealth returns src with link health verdicts applied at every
// collection, when src reads counters; otherwise src unchanged.
func WithHealth(src discovery.Source, maxErrorsPerMinute float64) discovery.Source {
	cs, ok := src.(discovery.CounterSource)
	if !ok {
		return src
	}
	return &healthSource{src: src, counters: cs, eval: linkhealth.New(maxErrorsPerMinute), now: time.Now}
}

func (h *healthSource) Name() string { return h.src.Name() }

func (h *healthSource) Collect(ctx context.Context) (*ginv1.NodeInventory, error) {
	inv, err := h.src.Collect(ctx)
	if err != nil {
		return nil, err
	}
	h.eval.Observe(h.now(), h.counters.Counters(ctx))
	h.eval.Apply(inv)
	return inv, nil
}

// Counters passes the counters through (for the metrics collector).
func (h *healthSource) Counters(ctx context.Context) discovery.Counters {
	return h.counters.Counters(ctx)
}
