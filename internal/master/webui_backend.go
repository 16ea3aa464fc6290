package master

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/webui"
)

var (
	_ webui.Backend       = webView{}
	_ webui.VerdictSource = webView{} // the pictures colour nodes by it (a type assertion there)
)

// webView is what webui.Register is given: this replica's reads
// (webBackend) and the leader's live job state (webLive).
type webView struct {
	webBackend
	webLive
}

// webBackend is what the web view reads of this replica (webui.Backend
// but JobLive, and webui.VerdictSource): the read services' own methods,
// called in-process, answering from this replica. Every one passes the
// read gate the gRPC reads pass (Server.read at READ_CONSISTENCY_ANY: a
// master outdated or still catching up refuses, UNAVAILABLE, which the
// view shows as 503), so a page never draws a state the API would refuse
// to serve. A running job's live state is not the replica's but the
// leader's memory (webLive).
type webBackend struct {
	*topologyService    // ListNodes, GetNode, GetMatrix, Topology
	*adminService       // GetClusterInfo
	*planService        // Estimate, PinnedPlans
	*calibrationService // Measurements
	// NodeVerdicts, from a cache of assessments of its own (as
	// CheckService keeps one).
	*checkService
}

// webLiveTimeout bounds a follower's question to the leader for a job's
// live state: the page waits no longer for it (requestTimeout bounds the
// whole page).
const webLiveTimeout = 3 * time.Second

// webLive is the job page's live state (webui.Backend's JobLive). Live
// state is the leader's memory, not Raft (live_service.go): the leader
// answers from its own detector, a follower asks the leader over its
// leader connection as forward.go forwards GetJobLive.
type webLive struct {
	live   *liveService
	leader func() (*grpc.ClientConn, error) // leaderLink.conn
}

// newWebLive is the live state of s's job pages.
func newWebLive(s *Server) webLive { return webLive{live: s.liveJobs, leader: s.link.conn} }

// JobLive implements webui.Backend: the job's ranks and suspects, nil, nil
// when no rank of it reported within the live horizon.
func (w webLive) JobLive(ctx context.Context, job string) (*ginv1.GetJobLiveResponse, error) {
	if w.live.leading() == nil {
		if resp, ok := w.live.det.Job(job, w.live.now()); ok {
			return resp, nil
		}
		return nil, nil
	}
	cc, err := w.leader()
	if errors.Is(err, errNoLeader) {
		return nil, errors.New("no leader known to ask (an election, or the leader's address not known here yet)")
	}
	if err != nil {
		return nil, fmt.Errorf("the leader: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, webLiveTimeout)
	defer cancel()
	resp, err := ginv1.NewLiveServiceClient(cc).GetJobLive(ctx, &ginv1.GetJobLiveRequest{JobId: job}, grpc.MaxCallRecvMsgSize(forwardMaxResponse))
	switch status.Code(err) {
	case codes.OK:
		return resp, nil
	case codes.NotFound:
		return nil, nil
	}
	return nil, fmt.Errorf("asking the leader: %s", status.Convert(err).Message())
}

// Topology implements webui.Backend: this replica's graph and fabric scan,
// read from one view so the two agree.
func (t *topologyService) Topology(ctx context.Context) (*graph.Graph, *ginv1.FabricTopology, error) {
	v, _, err := t.read(ctx, ginv1.ReadConsistency_READ_CONSISTENCY_ANY)
	if err != nil {
		return nil, nil, toStatus(err)
	}
	return v.Graph, v.Fabric(), nil
}

// Measurements implements webui.Backend: every stored measurement.
func (c *calibrationService) Measurements(ctx context.Context) ([]*ginv1.Measurement, error) {
	if _, _, err := c.read(ctx, ginv1.ReadConsistency_READ_CONSISTENCY_ANY); err != nil {
		return nil, toStatus(err)
	}
	return c.store.Measurements(), nil
}

// PinnedPlans implements webui.Backend.
func (p *planService) PinnedPlans(ctx context.Context) ([]*ginv1.Plan, error) {
	if _, _, err := p.read(ctx, ginv1.ReadConsistency_READ_CONSISTENCY_ANY); err != nil {
		return nil, toStatus(err)
	}
	return p.store.Plans(), nil
}

// NodeVerdicts implements webui.VerdictSource: the health check's verdicts
// of every node at this replica's current state (read only: shared).
func (c *checkService) NodeVerdicts(ctx context.Context) (map[string]*ginv1.NodeVerdict, error) {
	v, _, err := c.read(ctx, ginv1.ReadConsistency_READ_CONSISTENCY_ANY)
	if err != nil {
		return nil, toStatus(err)
	}
	return c.verdictsAt(v), nil
}
