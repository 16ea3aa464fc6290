package nodeplans

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/masteraddr"
	"github.com/gin-topology/gin/internal/planread"
	"github.com/gin-topology/gin/internal/plansock"
)

// leaderHintKey is the trailer naming the leader (internal/master).
const leaderHintKey = "gin-leader-hint"

// Masters fetches plans from the masters with GetOrCreatePlan, one master
// at a time, moving on on UNAVAILABLE, a NOT_LEADER redirect (to the
// leader it names first) or no answer. Connections are opened once and
// kept: an agent asks for at most one plan per job.
type Masters struct {
	mu    sync.Mutex // one fetch at a time; guards conns
	addrs []string
	conns map[string]*grpc.ClientConn
	opts  []grpc.DialOption
}

// NewMasters prepares the connections (grpc.NewClient does not dial).
func NewMasters(addrs []string, opts ...grpc.DialOption) (*Masters, error) {
	if len(addrs) == 0 {
		return nil, errors.New("no masters")
	}
	opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(planread.MaxBytes+4096)))
	return &Masters{addrs: addrs, conns: map[string]*grpc.ClientConn{}, opts: opts}, nil
}

// Close closes the connections.
func (m *Masters) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, c := range m.conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

func (m *Masters) conn(addr string) (*grpc.ClientConn, error) {
	if c, ok := m.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr, m.opts...)
	if err != nil {
		return nil, err
	}
	m.conns[addr] = c
	return c, nil
}

// FetchPlan implements Fetcher; fetches for different jobs take turns.
func (m *Masters) FetchPlan(ctx context.Context, r plansock.Request) (*ginv1.Plan, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	queue := append([]string(nil), m.addrs...)
	tried := map[string]bool{}
	var errs []string
	req := &ginv1.GetOrCreatePlanRequest{JobId: r.JobID, Nodes: r.Nodes, GpusPerNode: r.GPUsPerNode}
	for len(queue) > 0 {
		addr := queue[0]
		queue = queue[1:]
		if tried[addr] {
			continue
		}
		tried[addr] = true
		dl, _ := ctx.Deadline()
		left := time.Until(dl)
		if left <= 0 {
			break
		}
		c, err := m.conn(addr)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", addr, err))
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, left/time.Duration(len(queue)+1))
		var trl metadata.MD
		resp, err := ginv1.NewPlanServiceClient(c).GetOrCreatePlan(cctx, req, grpc.Trailer(&trl))
		cancel()
		if err == nil {
			return resp.GetPlan(), nil
		}
		code := status.Code(err)
		if code == codes.NotFound {
			return nil, fmt.Errorf("%s: %s: %w", addr, status.Convert(err).Message(), plansock.ErrNotFound)
		}
		errs = append(errs, fmt.Sprintf("%s: %s: %s", addr, code, status.Convert(err).Message()))
		if code != codes.Unavailable && code != codes.DeadlineExceeded && !apierr.IsNotLeader(err) {
			break // the same answer elsewhere
		}
		if v := trl.Get(leaderHintKey); len(v) > 0 && v[0] != "" {
			if h, perr := masteraddr.Parse(v[0]); perr == nil && !tried[h[0]] {
				queue = append([]string{h[0]}, queue...)
			}
		}
	}
	return nil, fmt.Errorf("masters %s: %s", describe(m.addrs), strings.Join(errs, "; "))
}
