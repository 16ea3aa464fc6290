package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// Return home. An agent's home is the master its node name hashes to
// (startIndex over Config.Masters). When that master fails its agents
// spread over the others (moveFrom); once it is back they return, so that
// sessions do not drift onto the survivors over several failovers. While a
// session is with another master, the agent probes its home's gRPC health
// for the service gin.v1.AgentService at a jittered interval (uniform in
// [P/2, 3P/2] for Config.HomeProbeInterval P: agents away from home reach
// it spread over a probe interval, never all at once). A master reports
// that service SERVING only while it takes sessions in sync with the
// leader. On SERVING the agent closes its side of the stream (the master
// sees a clean end, the agent leaving, and reports it so: a sign of life,
// not a loss) and says Hello to its home at once, with its acknowledged
// generation and hash: nothing is re-sent and the node is not marked down.

// DefaultHomeProbeInterval is how often, on average, an agent away from its
// home master probes it.
const DefaultHomeProbeInterval = time.Minute

// homeProbeTimeout bounds one probe (a dial and a health check).
const homeProbeTimeout = 5 * time.Second

// agentHealthService is the health service a master reports SERVING while
// it takes agent sessions in sync with the leader.
var agentHealthService = ginv1.AgentService_ServiceDesc.ServiceName

// errGoingHome ends a session whose agent returns to its home master.
var errGoingHome = errors.New("home master is serving again; returning to it")

// HomeOf is the home master of node among masters (as normalised by
// internal/masteraddr, in the agent's --master order): the one its agent
// starts at and returns to; "" without masters.
func HomeOf(node string, masters []string) string {
	if len(masters) == 0 {
		return ""
	}
	return masters[startIndex(node, len(masters))]
}

// home is the address of this node's home master.
func (a *Agent) home() string { return HomeOf(a.cfg.NodeName, a.cfg.Masters) }

// homeIndex is the candidate index of the home master.
func (a *Agent) homeIndex() int {
	return startIndex(a.cfg.NodeName, len(a.cfg.Masters))
}

// awayFromHome reports whether a session with addr is away from home (there
// is more than one master to choose from, and addr is not home).
func (a *Agent) awayFromHome(addr string) bool {
	return len(a.cfg.Masters) > 1 && a.cfg.HomeProbeInterval > 0 && addr != a.home()
}

// nextHomeProbe is the wait before the next probe: uniform in [P/2, 3P/2].
// It draws from the connect loop's randomness (the session runs on that
// goroutine).
func (a *Agent) nextHomeProbe() time.Duration {
	p := a.cfg.HomeProbeInterval
	return p/2 + time.Duration(a.rnd.Int64N(int64(p)+1))
}

// probeHome reports whether the master at addr reports gin.v1.AgentService
// SERVING (any failure to tell is "no").
func (a *Agent) probeHome(ctx context.Context, addr string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, homeProbeTimeout)
	defer cancel()
	conn, err := grpc.NewClient(addr, a.dialOpts...)
	if err != nil {
		return false, fmt.Errorf("agent: dial home master %s: %w", addr, err)
	}
	defer func() { _ = conn.Close() }()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: agentHealthService})
	if err != nil {
		return false, fmt.Errorf("agent: probe home master %s: %w", addr, err)
	}
	return resp.GetStatus() == healthpb.HealthCheckResponse_SERVING, nil
}
