package authz

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/pki"
)

// DefaultMaxHeavyReadsPerIdentity bounds the heavy reads (HeavyReads) one
// certificate identity runs at once; a further one waits up to
// heavyReadWait for a slot, then is refused. One identity (a stolen
// reader certificate, the reader certificate every job shares) cannot have
// a master build more large answers at once than this, whatever it sends.
const DefaultMaxHeavyReadsPerIdentity = 8

// heavyReadWait is how long a heavy read past the bound waits for a slot
// before it is refused (a burst of one user's reads is served in turn).
const heavyReadWait = 2 * time.Second

// HeavyReads are the methods whose answer a master builds over many nodes
// (a graph, a matrix, a list of every node, an export, an ordering or an
// estimate over a job's nodes): their cost grows with the request, so they
// are bounded per identity.
func HeavyReads() map[string]bool {
	return map[string]bool{
		ginv1.TopologyService_ListNodes_FullMethodName: true,
		ginv1.TopologyService_GetGraph_FullMethodName:  true,
		ginv1.TopologyService_GetPath_FullMethodName:   true,
		ginv1.TopologyService_GetMatrix_FullMethodName: true,
		ginv1.PlanService_Estimate_FullMethodName:      true,
		ginv1.PlanService_OrderNodes_FullMethodName:    true,
		ginv1.PlanService_Export_FullMethodName:        true,
	}
}

// heavyReads is the per-identity bound on HeavyReads at once.
type heavyReads struct {
	methods map[string]bool
	max     int
	wait    time.Duration
	refused atomic.Uint64

	mu   sync.Mutex
	sems map[pki.Identity]*heavySem
}

// heavySem is one identity's slots; users counts holders and waiters, so
// that the entry goes when none is left.
type heavySem struct {
	slots chan struct{}
	users int
}

func newHeavyReads(max int) *heavyReads {
	return &heavyReads{methods: HeavyReads(), max: max, wait: heavyReadWait, sems: map[pki.Identity]*heavySem{}}
}

// acquire takes one of id's slots for method, waiting at most h.wait; it
// returns the release, or the refusal.
func (h *heavyReads) acquire(ctx context.Context, id pki.Identity, method string) (func(), error) {
	if !h.methods[method] || h.max <= 0 {
		return func() {}, nil
	}
	h.mu.Lock()
	sem := h.sems[id]
	if sem == nil {
		sem = &heavySem{slots: make(chan struct{}, h.max)}
		h.sems[id] = sem
	}
	sem.users++
	h.mu.Unlock()
	done := func() {
		h.mu.Lock()
		if sem.users--; sem.users == 0 {
			delete(h.sems, id)
		}
		h.mu.Unlock()
	}
	select {
	case sem.slots <- struct{}{}:
		return func() { <-sem.slots; done() }, nil
	default:
	}
	t := time.NewTimer(h.wait)
	defer t.Stop()
	select {
	case sem.slots <- struct{}{}:
		return func() { <-sem.slots; done() }, nil
	case <-ctx.Done():
		done()
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-t.C:
		done()
		h.refused.Add(1)
		st := status.Newf(codes.ResourceExhausted, "%s: %s already runs %d heavy reads (graph, matrix, node list, export, estimate, ordering), the most one identity may at once; retry when one ends",
			method, id, h.max)
		if wd, err := st.WithDetails(apierr.Info(apierr.ReasonReadLimit, nil)); err == nil {
			st = wd
		}
		return nil, st.Err()
	}
}

// HeavyReadsRefused is how many heavy reads were refused because their
// identity ran DefaultMaxHeavyReadsPerIdentity already (also counted by
// the master as gin_master_rejected_messages_total{reason="read_limit"}).
func (a *Authorizer) HeavyReadsRefused() uint64 { return a.heavy.refused.Load() }

// WithHeavyReads sets the heavy reads one identity may run at once and how
// long one past that waits for a slot (tests; the masters keep the
// defaults), and returns a. Set it before serving.
func (a *Authorizer) WithHeavyReads(max int, wait time.Duration) *Authorizer {
	a.heavy = newHeavyReads(max)
	a.heavy.wait = wait
	return a
}
