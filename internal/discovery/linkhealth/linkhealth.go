package linkhealth

import (
	"fmt"
	"sync"
	"time"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery"
)

// DefaultMaxErrorsPerMinute is the default threshold.
const DefaultMaxErrorsPerMinute = 10

// IsPortErrorCounter reports whether an HCA port counter counts link errors.
func IsPortErrorCounter(name string) bool {
	switch name {
	case "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
		"local_link_integrity_errors", "excessive_buffer_overrun_errors", "port_rcv_remote_physical_errors":
		return true
	}
	return false
}

type key struct {
	kind string // "gpu" or "port"
	id   string // GPU UUID (or PCI id) / HCA name
	n    int    // link index / port number
}

type sample struct {
	errs uint64
	at   time.Time
}

// Evaluator keeps the previous counter sample per link and the verdicts.
// It is safe for concurrent use.
type Evaluator struct {
	maxPerMinute float64

	mu       sync.Mutex
	prev     map[key]sample
	degraded map[key]bool
	seen     map[key]bool
}

// New returns an evaluator; maxErrorsPerMinute <= 0 means the default.
func New(maxErrorsPerMinute float64) *Evaluator {
	if maxErrorsPerMinute <= 0 {
		maxErrorsPerMinute = DefaultMaxErrorsPerMinute
	}
	return &Evaluator{maxPerMinute: maxErrorsPerMinute, prev: map[key]sample{}, degraded: map[key]bool{}, seen: map[key]bool{}}
}

// Validate checks a threshold given on the command line.
func Validate(maxErrorsPerMinute float64) error {
	if maxErrorsPerMinute <= 0 || maxErrorsPerMinute > 1e9 {
		return fmt.Errorf("link error threshold %g errors/minute: want > 0 and <= 1e9", maxErrorsPerMinute)
	}
	return nil
}

func sum(vs ...*uint64) (uint64, bool) {
	var s uint64
	found := false
	for _, v := range vs {
		if v != nil {
			s += *v
			found = true
		}
	}
	return s, found
}

// Observe feeds one sample of counters taken at now.
func (e *Evaluator) Observe(now time.Time, c discovery.Counters) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, l := range c.NVLinks {
		id := l.UUID
		if id == "" {
			id = l.PCIBusID
		}
		if errs, ok := sum(l.CRCFlit, l.CRCData, l.Replay, l.Recovery, l.SymbolErrors); ok {
			e.observe(key{"gpu", id, l.Link}, errs, now)
		}
	}
	for _, p := range c.Ports {
		var errs uint64
		found := false
		for name, v := range p.Counters {
			if IsPortErrorCounter(name) {
				errs += v
				found = true
			}
		}
		if found {
			e.observe(key{"port", p.Device, int(p.Port)}, errs, now)
		}
	}
}

func (e *Evaluator) observe(k key, errs uint64, now time.Time) {
	e.seen[k] = true
	prev, ok := e.prev[k]
	e.prev[k] = sample{errs: errs, at: now}
	if !ok || errs < prev.errs || !now.After(prev.at) {
		return // first sample, counter reset, or no time passed: no rate yet
	}
	perMinute := float64(errs-prev.errs) / now.Sub(prev.at).Minutes()
	e.degraded[k] = perMinute > e.maxPerMinute
}

// Apply writes the verdicts into inv: DEGRADED for links over the threshold,
// HEALTHY for links with counters under it; links without counters keep
// whatever health they had.
func (e *Evaluator) Apply(inv *ginv1.NodeInventory) {
	e.mu.Lock()
	defer e.mu.Unlock()
	verdict := func(k key) (ginv1.LinkHealth, bool) {
		if !e.seen[k] {
			return 0, false
		}
		if e.degraded[k] {
			return ginv1.LinkHealth_LINK_HEALTH_DEGRADED, true
		}
		return ginv1.LinkHealth_LINK_HEALTH_HEALTHY, true
	}
	for _, g := range inv.GetGpus() {
		for _, l := range g.GetNvlinks() {
			k := key{"gpu", g.GetUuid(), int(l.GetIndex())}
			if !e.seen[k] {
				k.id = g.GetPciBusId()
			}
			if h, ok := verdict(k); ok {
				l.Health = h
			}
		}
	}
	for _, h := range inv.GetHcas() {
		for _, p := range h.GetPorts() {
			if v, ok := verdict(key{"port", h.GetName(), int(p.GetPort())}); ok {
				p.Health = v
			}
		}
	}
}
