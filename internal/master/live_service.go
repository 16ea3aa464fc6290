package master

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/authz"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/livejob"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/state"
)

// MaxRankWindows bounds one ReportRanks call: a node's ranks (8 GPUs, a
// few communicators each) over a few windows fit many times over.
const MaxRankWindows = 1024

// liveEvaluateEvery is how often the leader recomputes suspects.
const liveEvaluateEvery = time.Second

// liveService is LiveService over the leader's detector (livejob). Both
// calls are leader-only (forward.go): a follower forwards them, so every
// window of a job meets the others on one master.
type liveService struct {
	ginv1.UnimplementedLiveServiceServer
	det     *livejob.Detector
	leading leadingFunc
	now     func() time.Time
	log     *slog.Logger

	windows, refused atomic.Uint64
}

func newLiveService(store *state.Store, leading leadingFunc, cfg livejob.Config, now func() time.Time, log *slog.Logger) *liveService {
	return &liveService{det: livejob.New(cfg, graphFabric{store}), leading: leading, now: now, log: log}
}

// graphFabric names a NIC's switch from the current graph.
type graphFabric struct{ store *state.Store }

func (g graphFabric) SwitchOf(node, nic string) string {
	gr := g.store.View().Graph
	v, ok := gr.NodeView(node)
	if !ok {
		return ""
	}
	for _, h := range v.HCAs {
		if h.Name != nic {
			continue
		}
		for _, p := range h.Ports {
			if p.Switch == "" {
				continue
			}
			return switchName(gr, p.Switch, p.Port)
		}
	}
	return ""
}

func switchName(gr *graph.Graph, guid string, port uint32) string {
	name := guid
	for _, sw := range gr.Switches() {
		if sw.GUID == guid && sw.Description != "" {
			name = fmt.Sprintf("%s (%s)", sw.Description, guid)
			break
		}
	}
	return fmt.Sprintf("%s, from port %d of the NIC", name, port)
}

func (l *liveService) ReportRanks(ctx context.Context, req *ginv1.ReportRanksRequest) (*ginv1.ReportRanksResponse, error) {
	if err := l.leading(); err != nil {
		return nil, toStatus(err)
	}
	node := req.GetNodeName()
	if node == "" {
		return nil, toStatus(invalidf("node_name", "is empty"))
	}
	if id, ok := authz.Identity(ctx); ok && id.Role == pki.RoleAgent && id.Name != node {
		return nil, toStatus(&forbidden{msg: fmt.Sprintf("%s may only report the ranks of its own node, not %s", id, node)})
	}
	if n := len(req.GetWindows()); n > MaxRankWindows {
		return nil, toStatus(invalidf("windows", "%d windows, at most %d in one call", n, MaxRankWindows))
	}
	now := l.now()
	var accepted uint32
	var firstErr error
	for _, w := range req.GetWindows() {
		if err := l.det.Add(node, w, now); err != nil {
			l.refused.Add(1)
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		accepted++
	}
	l.windows.Add(uint64(accepted))
	if accepted == 0 && firstErr != nil {
		if errors.Is(firstErr, livejob.ErrTooMany) {
			return nil, toStatus(exhaustedf(apierr.ReasonLiveLimit, "%v", firstErr))
		}
		return nil, toStatus(invalidf("windows", "%v", firstErr))
	}
	return &ginv1.ReportRanksResponse{Accepted: accepted}, nil
}

func (l *liveService) GetJobLive(ctx context.Context, req *ginv1.GetJobLiveRequest) (*ginv1.GetJobLiveResponse, error) {
	if err := l.leading(); err != nil {
		return nil, toStatus(err)
	}
	if req.GetJobId() == "" {
		return nil, toStatus(invalidf("job_id", "is empty"))
	}
	resp, ok := l.det.Job(req.GetJobId(), l.now())
	if !ok {
		return nil, toStatus(&notFound{msg: fmt.Sprintf("no rank of job %q reported in the last %s (is the job running with NCCL_GIN_ENABLED=1, and gin-agent on its nodes?)", req.GetJobId(), livejob.Default().Horizon)})
	}
	return resp, nil
}

// run recomputes suspects once a second while this master leads (a
// leader task, leadertask.go).
func (l *liveService) run(ctx context.Context) {
	t := time.NewTicker(liveEvaluateEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.det.Evaluate(l.now())
		}
	}
}

// SetEnabled: a master that stops leading drops its windows (the next
// leader has newer ones; a stale suspect must not outlive the leadership).
func (l *liveService) SetEnabled(on bool) {
	if !on {
		l.det.Reset()
	}
}
