package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/masteraddr"
)

// Return home. An agent's home is the master its node name hashes to
// (masteraddr.StartIndex over Config.Masters). When that master fails its
// agents spread over the others (masteraddr.MoveFrom); once it is back they
// return, so that sessions do not drift onto the survivors over several failovers. While a
// session is with another master, the agent probes its home's gRPC health
// for the service gin.v1.AgentService at a jittered interval (uniform in
// [P/2, 3P/2] for Config.HomeProbeInterval P: agents away from home reach
// it spread over a probe interval, never all at once). A master reports
// that service SERVING only while it takes sessions in sync with the
// leader. On SERVING the agent makes before it breaks: it opens a second
// session, with its home, and says Hello there with its acknowledged
// generation and hash while the first goes on (heartbeats; no inventory
// is sent meanwhile, so the acknowledged state cannot move under the
// Hello). Only when home answers with a HelloAck in sync does the agent
// close its side of the old stream (the master sees a clean end, the agent
// leaving, and reports it so: a sign of life, not a loss) and go on with
// the home session: nothing is re-sent and the node is never without a
// session. When home refuses (busy, not in sync with the leader, naming
// another leader), does not answer within the silence timeout, or holds
// another inventory than the agent's, the agent leaves that attempt
// (closing its side) and stays where it is until the next probe. Masters
// handle one node's sessions on two masters at once: the leader takes
// the newest sign of life from either, and the old master's clean end is a
// sign of life too.

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

// home is the address of this node's home master.
func (a *Agent) home() string { return masteraddr.Home(a.cfg.NodeName, a.cfg.Masters) }

// homeIndex is the candidate index of the home master.
func (a *Agent) homeIndex() int {
	return masteraddr.StartIndex(a.cfg.NodeName, len(a.cfg.Masters))
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

// homeJoin is a session with the home master opened while the agent was
// still attached elsewhere (make before break): its stream, the snapshot
// its Hello described and the HelloAck, in sync, it was answered with. A
// failed attempt has no stream, only err.
type homeJoin struct {
	o     *openStream
	hello *snapshot
	ack   *ginv1.SessionResponse
	err   error
}

// stream is the joined session's stream (nil for no join or a failed one).
func (j *homeJoin) stream() *openStream {
	if j == nil {
		return nil
	}
	return j.o
}

// leave ends a joined session that will not be used: the agent closes
// its side and waits at most wait for the master to end its own (so the
// master sees the agent leave), then closes the stream.
func (j *homeJoin) leave(wait time.Duration) {
	if j == nil || j.o == nil {
		return
	}
	leaveStream(j.o, wait)
	j.o = nil
}

// leaveStream closes the agent's side of o, reads o until the master ends
// it or wait passes, and closes it.
func leaveStream(o *openStream, wait time.Duration) {
	defer o.close()
	if o.stream.CloseSend() != nil {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case r := <-o.recvCh:
			if r.err != nil {
				return
			}
		case <-t.C:
			return
		}
	}
}

// joinHome opens a session with the home master at addr on parent (it
// outlives the session that asks for it), says hello and waits for the
// answer, at most timeout or until ctx is done. It returns the session
// when home answered with a HelloAck in sync with hello, and otherwise
// the reason, having left (or closed) the stream.
func (a *Agent) joinHome(ctx, parent context.Context, addr string, snap *snapshot, hello *ginv1.Hello, timeout time.Duration) *homeJoin {
	o, err := a.openSession(parent, addr)
	if err != nil {
		return &homeJoin{err: err}
	}
	if err := o.stream.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Hello{Hello: hello}}); err != nil {
		o.close()
		return &homeJoin{err: fmt.Errorf("agent: send hello to home master %s: %w", addr, err)}
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	var r recvResult
	select {
	case r = <-o.recvCh:
	case <-t.C:
		o.close()
		return &homeJoin{err: fmt.Errorf("agent: home master %s did not answer the hello within %s", addr, timeout)}
	case <-ctx.Done():
		o.close()
		return &homeJoin{err: fmt.Errorf("agent: hello to home master %s: %w", addr, ctx.Err())}
	}
	if r.err != nil {
		o.close()
		return &homeJoin{err: fmt.Errorf("agent: home master %s refused the hello: %w", addr, r.err)}
	}
	ack := r.resp.GetHelloAck()
	if ack == nil || !ack.GetInSync() || ack.GetHeldGeneration() != hello.GetLastAckedGeneration() {
		leaveStream(o, timeout)
		return &homeJoin{err: fmt.Errorf("agent: home master %s does not hold this agent's acknowledged inventory (hello ack %v)", addr, ack)}
	}
	return &homeJoin{o: o, hello: snap, ack: r.resp}
}

// onHomeProbed opens a session with the home master when it takes
// sessions, and otherwise schedules the next probe.
func (s *session) onHomeProbed(serving bool) error {
	if !serving || s.pending != nil {
		// Not serving, or an inventory in flight: try at the next probe
		// (a move with a write in flight could re-send it).
		s.homeC = s.a.after(s.a.nextHomeProbe())
		return nil
	}
	s.joining = true
	ctx, cancel := context.WithCancel(s.ctx)
	s.stopJoin = cancel
	home, timeout := s.a.home(), s.a.silenceTimeout(s.hb)
	snap, hello := s.a.newHello()
	s.probes.Go(func() {
		defer cancel()
		s.joinRes <- s.a.joinHome(ctx, s.parent, home, snap, hello, timeout) // capacity 1, one join at a time
	})
	return nil
}

// onHomeJoined leaves this session for the home master's once that one is
// acknowledged in sync; otherwise it stays and probes again later.
func (s *session) onHomeJoined(j *homeJoin) error {
	s.joining = false
	if j.o == nil {
		s.log.Info("home master did not take the session; staying until the next probe", slog.String("home", s.a.home()), slog.Any("err", j.err))
		s.a.mu.Lock()
		s.a.status.HomeJoinsFailed++
		s.a.mu.Unlock()
		s.homeC = s.a.after(s.a.nextHomeProbe())
		return s.maybeSendInventory() // a change held meanwhile
	}
	s.out.home, s.out.joined = true, j
	return s.leave()
}

// runJoined goes on with the home master's session that j opened: its
// HelloAck establishes this session, as if just received.
func (s *session) runJoined(ctx context.Context, j *homeJoin) error {
	s.hello = j.hello
	if err := s.onResponse(j.ack); err != nil {
		return err
	}
	return s.loop(ctx)
}
