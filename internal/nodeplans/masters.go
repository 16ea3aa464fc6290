package nodeplans

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/planread"
	"github.com/gin-topology/gin/internal/plansock"
	"github.com/gin-topology/gin/internal/redirect"
)

// Masters fetches plans from the masters with GetOrCreatePlan, one master
// at a time, moving on on UNAVAILABLE, a NOT_LEADER redirect (to the
// leader it names first) or no answer. Connections are opened once and
// kept: an agent asks for at most one plan per job.
type Masters struct {
	mu    sync.Mutex // one fetch at a time
	addrs []string
	conns *redirect.Pool
}

// NewMasters prepares the connections (grpc.NewClient does not dial).
func NewMasters(addrs []string, opts ...grpc.DialOption) (*Masters, error) {
	if len(addrs) == 0 {
		return nil, errors.New("no masters")
	}
	opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(planread.MaxBytes+4096)))
	return &Masters{addrs: addrs, conns: redirect.NewPool(opts...)}, nil
}

// Close closes the connections.
func (m *Masters) Close() error { return m.conns.Close() }

// FetchPlan implements Fetcher; fetches for different jobs take turns. The
// walk over the masters is the one failover walk (internal/redirect): each
// attempt a share of ctx's deadline, a refusal final (a follower forwards
// to the leader).
func (m *Masters) FetchPlan(ctx context.Context, r plansock.Request) (*ginv1.Plan, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	req := &ginv1.GetOrCreatePlanRequest{JobId: r.JobID, Nodes: r.Nodes, GpusPerNode: r.GPUsPerNode}
	var plan *ginv1.Plan
	_, err := redirect.Do(ctx, m.addrs, redirect.Options{ShareDeadline: true}, func(actx context.Context, addr string) error {
		c, err := m.conns.Conn(addr)
		if err != nil {
			return status.Error(codes.Unavailable, err.Error())
		}
		resp, err := ginv1.NewPlanServiceClient(c).GetOrCreatePlan(actx, req)
		plan = resp.GetPlan()
		return err
	})
	if err == nil {
		return plan, nil
	}
	if status.Code(err) == codes.NotFound {
		return nil, fmt.Errorf("%s: %w", err.Error(), plansock.ErrNotFound)
	}
	return nil, fmt.Errorf("masters %s: %w", describe(m.addrs), err)
}
