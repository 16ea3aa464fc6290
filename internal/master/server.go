package master

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/authz"
	"github.com/gin-topology/gin/internal/buildinfo"
	nodehealth "github.com/gin-topology/gin/internal/health"
	"github.com/gin-topology/gin/internal/pki"
	ginraft "github.com/gin-topology/gin/internal/raft"
	"github.com/gin-topology/gin/internal/ratelog"
	"github.com/gin-topology/gin/internal/state"
)

// DefaultHelloTimeout is Config.HelloTimeout's default.
const DefaultHelloTimeout = 10 * time.Second

// DefaultMaxStreamsPerConn is Config.MaxStreamsPerConn's default. An agent
// holds one stream, ginctl a few at most; gRPC's own default (2^32-1)
// let one connection open 80,000 Hello-less streams (issue #11).
const DefaultMaxStreamsPerConn = 256

// DefaultMaxNodes and DefaultMaxPlans are Config.MaxNodes's and
// Config.MaxPlans's defaults: far above a real cluster, far below what
// would exhaust a master's memory.
const (
	DefaultMaxNodes = 50000
	DefaultMaxPlans = 100000
)

// DefaultAgentLogRate and DefaultAgentLogBurst are Config.AgentLogRate's
// and Config.AgentLogBurst's defaults.
const (
	DefaultAgentLogRate  = 10
	DefaultAgentLogBurst = 100
)

// MaxMessageBytes bounds every gRPC message the master receives.
const MaxMessageBytes = 8 << 20

// Config configures one master server.
type Config struct {
	// ID is the Raft server id.
	ID string
	// Bind is the client and agent gRPC address (":5000").
	Bind string
	// Advertise is the gRPC address given to clients as leader hint; defaults
	// to the bound address.
	Advertise string
	// RaftBind is the Raft TCP address.
	RaftBind string
	// RaftAdvertise is the Raft address peers dial (host:port, resolved at
	// start); defaults to RaftBind, which must then be a routable address.
	RaftAdvertise string
	// RaftTuning overrides Raft timeouts and the snapshot policy.
	RaftTuning ginraft.Tuning
	// DataDir holds the Raft log and snapshots.
	DataDir string
	// Bootstrap makes a fresh data directory a single-voter cluster.
	Bootstrap bool
	// BootstrapExpect > 1: a fresh server waits until this many fresh
	// servers (itself included, found through Join) see each other, and the
	// one with the smallest id bootstraps them.
	BootstrapExpect int
	// Join lists other masters' client addresses: a fresh server joins the
	// cluster they form (retried until it works).
	Join []string
	// DeadServerTimeout > 0: the leader removes a voter failing heartbeats
	// for longer (autopilot-style), keeping at least two healthy voters.
	DeadServerTimeout time.Duration
	// FastRaft uses short Raft timeouts (dev cluster and tests on loopback).
	FastRaft bool
	// HeartbeatInterval is what agents are told to use (default 5s).
	HeartbeatInterval time.Duration
	// MissedHeartbeats before a node is marked down (default 3).
	MissedHeartbeats int
	// HTTPBind serves /metrics and /healthz; empty disables it.
	HTTPBind string
	// WebConfigFile is the HTTP port's TLS and authentication
	// (prometheus/exporter-toolkit's web config; empty: plain HTTP).
	WebConfigFile string
	// HelloTimeout bounds the wait for an agent session's first message
	// (default 10s): a stream that never says hello is ended with
	// DEADLINE_EXCEEDED instead of holding its goroutine and buffers.
	HelloTimeout time.Duration
	// MaxStreamsPerConn is the HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS the
	// gRPC listener announces (default DefaultMaxStreamsPerConn): a client
	// that asks for more waits for one to end (grpc-go queues the call)
	// or, if it ignores the setting, gets its stream refused.
	MaxStreamsPerConn uint32
	// AgentLogRate and AgentLogBurst bound the agent attach/detach log
	// lines of this master (a token bucket; default
	// DefaultAgentLogRate/s, burst DefaultAgentLogBurst): a cluster-wide
	// reconnect logs the first lines, then one line now and then that says
	// how many were left out (gin_master_agent_log_lines_suppressed_total).
	AgentLogRate float64
	// MaxNodes and MaxPlans cap the registered nodes and the pinned plans
	// (defaults DefaultMaxNodes, DefaultMaxPlans): a new node's inventory
	// or a new job's plan past the cap is refused at the edge with
	// RESOURCE_EXHAUSTED naming the flag; existing ones are still updated
	// and read. gin_master_nodes_limit and gin_master_pinned_plans_limit
	// export them next to the counts.
	MaxNodes int
	MaxPlans int
	// MaxHandshakes bounds the agent handshakes (Hello until the agent is
	// in sync) served at once, HandshakeQueue the Hellos waiting for one
	// (defaults DefaultMaxHandshakes, DefaultHandshakeQueue; a negative
	// HandshakeQueue: none waits); a Hello past both is refused with
	// RESOURCE_EXHAUSTED and a retry hint (admission.go).
	MaxHandshakes  int
	HandshakeQueue int
	// HandshakeRate bounds the agent Hellos admitted per second (a token
	// bucket of burst MaxHandshakes; default DefaultHandshakeRate(), 125
	// per CPU): a Hello waits in the queue for its token, and one whose
	// wait would pass HelloTimeout is refused with a retry hint of the
	// queue's wait (admission.go). HandshakeClock is the bucket's clock
	// (nil: the wall clock; tests).
	HandshakeRate  float64
	HandshakeClock Clock
	AgentLogBurst  int
	// AgentLogClock is that bucket's clock (nil: time.Now; tests).
	AgentLogClock func() time.Time
	// LivenessClock is the clock of the leader's node liveness (when a node
	// was heard from, when it missed its heartbeats; nil: time.Now; tests).
	LivenessClock func() time.Time
	// TLS, when set, turns on mTLS for the gRPC listener (TLS 1.3, a client
	// certificate of the cluster CA required) with the authorization table
	// of internal/authz checked on every call, and for this master's own
	// calls to the other masters (Join, cluster info). nil: plaintext, as
	// before.
	TLS *pki.Source
	// Recover and RecoverPeers: rewrite the stored Raft configuration to
	// this server (plus RecoverPeers) before starting; see ginraft.Config.
	Recover      bool
	RecoverPeers []ginraft.Member
	// MinFreeBytes is the free space kept under DataDir (0:
	// ginraft.DefaultMinFreeBytes): below it writes are refused with
	// RESOURCE_EXHAUSTED naming the data dir, until space returns, and a
	// leader of several masters hands leadership over.
	MinFreeBytes uint64
	// HealthThresholds configure the node verdicts of CheckService
	// (internal/health; the zero value is the documented defaults).
	HealthThresholds nodehealth.Thresholds
	Logger           *slog.Logger
}

// Server is one gin-master: Raft node, state and gRPC services.
type Server struct {
	invBounds inventoryBounds // agents' inventory changes per node (inventorybounds.go)

	cfg      Config
	log      *slog.Logger
	store    *state.Store
	node     *ginraft.Node
	grpc     *grpc.Server
	health   *health.Server
	lis      net.Listener
	live     *liveness
	lead     leadership
	sessions sessions    // this master's own agent sessions
	scan     scannerRole // the fabric scanner, as the leader named it
	// reachedLeader (unix ns) is when this master last led or had a
	// session report accepted by the leader (reports.go).
	reachedLeader atomic.Int64
	// reportsFailed counts the session reports that failed in a row
	// since (reports.go: the grace measured on this master's progress).
	reportsFailed atomic.Int64
	// reportAccepted is set once the leader has accepted a session report
	// of this master (reports.go): it reaches the leader, so it may tell
	// agents it takes sessions (sessionhealth.go).
	reportAccepted atomic.Bool
	leaderConn     leaderConn // relays and reports to the leader (relay.go)
	planPush       planPush   // pinned plans to the agent sessions of their nodes
	admission      *admission // agent handshakes at once
	metrics        *metrics
	httpLis        net.Listener
	agentLog       *ratelog.Bucket // attach/detach lines

	cancel context.CancelFunc
	wg     sync.WaitGroup
	// closing is set once shutdown starts: agent sessions end at their next
	// message with Unavailable and the leader hint.
	closing atomic.Bool
}

// shutdownGrace bounds how long shutdown waits for in-flight RPCs before it
// closes the remaining connections (agent streams never end by themselves).
const shutdownGrace = 2 * time.Second

// New opens the data directory, starts Raft and binds the gRPC listener.
// Serve must be called to answer requests.
func New(cfg Config) (*Server, error) {
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 5 * time.Second
	}
	if cfg.MissedHeartbeats <= 0 {
		cfg.MissedHeartbeats = 3
	}
	if cfg.HelloTimeout <= 0 {
		cfg.HelloTimeout = DefaultHelloTimeout
	}
	if cfg.MaxNodes <= 0 {
		cfg.MaxNodes = DefaultMaxNodes
	}
	if cfg.MaxPlans <= 0 {
		cfg.MaxPlans = DefaultMaxPlans
	}
	if cfg.MaxHandshakes <= 0 {
		cfg.MaxHandshakes = DefaultMaxHandshakes
	}
	if cfg.HandshakeQueue < 0 {
		cfg.HandshakeQueue = 0
	} else if cfg.HandshakeQueue == 0 {
		cfg.HandshakeQueue = DefaultHandshakeQueue
	}
	if cfg.HandshakeRate <= 0 {
		cfg.HandshakeRate = DefaultHandshakeRate()
	}
	if cfg.AgentLogRate <= 0 {
		cfg.AgentLogRate = DefaultAgentLogRate
	}
	if cfg.AgentLogBurst <= 0 {
		cfg.AgentLogBurst = DefaultAgentLogBurst
	}
	if cfg.MaxStreamsPerConn == 0 {
		cfg.MaxStreamsPerConn = DefaultMaxStreamsPerConn
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	log := cfg.Logger.With("server", cfg.ID)
	lis, err := net.Listen("tcp", cfg.Bind)
	if err != nil {
		return nil, fmt.Errorf("master: listen on %s: %w", cfg.Bind, err)
	}
	if cfg.Advertise == "" {
		cfg.Advertise = lis.Addr().String()
	}
	store := state.New(log)
	node, err := ginraft.Open(ginraft.Config{
		ID: cfg.ID, Bind: cfg.RaftBind, Advertise: cfg.RaftAdvertise, DataDir: cfg.DataDir, Bootstrap: cfg.Bootstrap,
		Fast: cfg.FastRaft, Tuning: cfg.RaftTuning, TLS: cfg.TLS, Logger: log,
		Recover: cfg.Recover, RecoverPeers: cfg.RecoverPeers, MinFreeBytes: cfg.MinFreeBytes,
	}, store)
	if err != nil {
		_ = lis.Close()
		return nil, fmt.Errorf("master: %w", err)
	}
	httpLis, err := listenHTTP(cfg.HTTPBind, cfg.WebConfigFile)
	if err != nil {
		_ = lis.Close()
		_ = node.Shutdown()
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, store: store, node: node, lis: lis, health: health.NewServer(), metrics: newMetrics(), httpLis: httpLis,
		agentLog: ratelog.New(cfg.AgentLogRate, cfg.AgentLogBurst, cfg.AgentLogClock), admission: newAdmission(cfg.MaxHandshakes, cfg.HandshakeQueue, cfg.HandshakeRate, cfg.MaxHandshakes, cfg.HandshakeClock)}
	s.reachedLeader.Store(time.Now().UnixNano())
	s.live = newLiveness(cfg.HeartbeatInterval, cfg.MissedHeartbeats, store, log, s.setNodeState)
	s.live.afterCheck = s.refreshScanner
	s.live.writing = s.sessions.writing
	if cfg.LivenessClock != nil {
		s.live.now = cfg.LivenessClock
	}
	fwd := &forwarder{id: cfg.ID, leads: node.IsLeader, notLeader: func() error { return toStatus(s.notLeaderErr()) },
		leader: s.leaderClientConn, hold: forwardHold, wait: relayRetryWait}
	var secure []grpc.ServerOption
	if cfg.TLS != nil {
		// The replicated deny list: refused in the interceptor, and the
		// open connections of a newly denied certificate closed.
		az := authz.New(authz.Table()).WithDenyList(store)
		store.OnDeny(func() {
			go func() {
				if n := az.EndDenied(); n > 0 {
					log.Warn("closed the connections of denied certificates", "connections", n)
				}
			}()
		})
		secure = append(secure, grpc.Creds(az.Credentials(pki.ServerCredentials(cfg.TLS))),
			grpc.ChainUnaryInterceptor(az.Unary), grpc.ChainStreamInterceptor(az.Stream),
			// grpc-go pools a plaintext connection's read buffer between
			// reads, but gives a TLS connection a 32 KiB bufio.Reader of its
			// own for its whole life; crypto/tls already buffers a decrypted
			// record, so the framer reads from it directly (issue #16: the
			// live heap of 3,000 mTLS agent sessions fell by 44 KiB each,
			// docs/BENCHMARKS.md).
			grpc.ReadBufferSize(0))
	}
	s.grpc = grpc.NewServer(append(secure,
		grpc.StatsHandler(rejections{s: s}),
		grpc.ChainUnaryInterceptor(s.leaderHintUnary, textUnary, fwd.unary), // forward.go
		grpc.ChainStreamInterceptor(s.leaderHintStream, textStream),
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxConcurrentStreams(cfg.MaxStreamsPerConn),
		// HPACK: the client indexes nothing in this master's decoder
		// table. An agent opens one stream per connection, whose
		// headers are sent once, so indexing them saved nothing and the
		// table held them (~0.5 KiB) for the connection's life (issue
		// #16). A client of many calls per connection sends its few
		// request headers in full each time.
		grpc.HeaderTableSize(0),
		// Large requests decoded off the stream's goroutine (freshstack.go).
		grpc.ForceServerCodecV2(newFreshStackCodec()),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	)...)
	ginv1.RegisterAgentServiceServer(s.grpc, &agentService{s: s})
	ginv1.RegisterTopologyServiceServer(s.grpc, &topologyService{s: s})
	ginv1.RegisterAdminServiceServer(s.grpc, &adminService{s: s})
	ginv1.RegisterPlanServiceServer(s.grpc, &planService{s: s})
	ginv1.RegisterCalibrationServiceServer(s.grpc, newCalibrationService(store, s.apply, s.read, log))
	ginv1.RegisterRelayServiceServer(s.grpc, &relayService{s: s})
	ginv1.RegisterCheckServiceServer(s.grpc, newCheckService(s))
	healthpb.RegisterHealthServer(s.grpc, s.health)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	s.health.SetServingStatus(agentServiceName, healthpb.HealthCheckResponse_NOT_SERVING) // sessionhealth.go
	return s, nil
}

// Addr is the bound gRPC address.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// RaftAddr is the Raft address.
func (s *Server) RaftAddr() string { return s.node.Addr() }

// Serve answers requests until ctx ends or Close is called.
func (s *Server) Serve(ctx context.Context) error {
	ctx, s.cancel = context.WithCancel(ctx)
	if s.httpLis != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.serveHTTP(ctx); err != nil {
				s.log.Error("metrics endpoint stopped", "err", err)
			}
		}()
		s.log.Info("serving /metrics and /healthz", "addr", s.httpLis.Addr().String())
	}
	s.wg.Add(4)
	go func() {
		defer s.wg.Done()
		s.formCluster(ctx)
	}()
	go func() {
		defer s.wg.Done()
		s.reportLoop(ctx) // a follower's sessions, to the leader
	}()
	go func() {
		defer s.wg.Done()
		s.planPushLoop(ctx) // pinned plans, seen through Raft, to this master's sessions
	}()
	go func() {
		defer s.wg.Done()
		s.monitorLeadership(ctx) // starts and stops every leader-only loop
	}()
	go func() {
		select {
		case <-ctx.Done():
		case <-s.node.Failed():
			// The log store cannot take writes again in this process.
			s.log.Error("stopping: the Raft log store failed; restart this master (systemd does)",
				"data_dir", s.cfg.DataDir, "err", s.node.Err())
		}
		s.shutdown()
	}()
	s.log.Info("gin-master serving", "grpc", s.Addr(), "raft", s.RaftAddr(), "data_dir", s.cfg.DataDir)
	if err := s.grpc.Serve(s.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("master: serve: %w", err)
	}
	if err := s.node.Err(); err != nil {
		return fmt.Errorf("master: %w", err) // wraps ginraft.ErrLogStoreFailed
	}
	return nil
}

// outdated refuses to serve from a state that lacks committed entries this
// binary could not interpret (a rolling upgrade in progress: the newer
// masters wrote a command this one does not know). It keeps replicating and
// voting, so the cluster keeps its quorum; restarted on the new version it
// applies the log again and serves.
func (s *Server) outdated() error {
	if n := s.node.SkippedEntries(); n > 0 {
		return fmt.Errorf("%w (%d skipped, version %s)", errOutdated, n, buildinfo.Version)
	}
	return nil
}

// WaitReady blocks until the cluster has a leader and this server can serve.
func (s *Server) WaitReady(ctx context.Context) error { return s.node.WaitLeader(ctx) }

// Close stops serving and shuts Raft down. A leader first hands leadership
// to another voter (planned shutdown), so the cluster does not wait for an
// election timeout.
func (s *Server) Close() error {
	s.handOff()
	if s.cancel != nil {
		s.cancel()
	}
	s.grpc.Stop()
	if s.httpLis != nil {
		_ = s.httpLis.Close() // when Serve never ran; harmless otherwise
	}
	done := make(chan error, 1)
	go func() {
		s.wg.Wait()
		s.leaderConn.close()
		done <- s.node.Shutdown()
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(closeTimeout):
		// Seen once in the fault campaign: a SIGTERM'd leader whose
		// hand-off raced a step-down never finished closing (hashicorp/raft
		// can leave a leadership-transfer goroutine waiting, issue #696).
		// Every acknowledged entry is already synced to the log store, so
		// returning is a crash Raft recovers from; the stacks say where it
		// hung.
		var buf bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
		s.log.Error("shutdown did not finish; exiting without it", "after", closeTimeout, "goroutines", buf.String())
		return fmt.Errorf("master: shutdown did not finish within %s", closeTimeout)
	}
}

// closeTimeout bounds Close after the connections are closed: the
// background loops and Raft's shutdown.
const closeTimeout = 10 * time.Second

// shutdown stops serving: leadership first goes to another master (so
// clients and agents redirected from here find a leader), then in-flight
// RPCs get shutdownGrace to finish before the connections are closed.
func (s *Server) shutdown() {
	s.closing.Store(true)
	s.health.Shutdown() // NOT_SERVING from now on
	s.handOff()
	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(shutdownGrace):
		s.log.Info("closing remaining connections", "sessions", s.sessions.count())
		s.grpc.Stop()
		<-stopped
	}
}

// handOff transfers leadership when this server leads a multi-server
// cluster (planned shutdown); bounded, and a no-op the second time.
func (s *Server) handOff() {
	if !s.node.IsLeader() || len(s.node.Stats().Members) < 2 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.node.TransferLeadership(ctx); err != nil {
		s.log.Warn("leadership transfer before shutdown failed", "err", err)
		return
	}
	id, _ := s.node.Leader()
	s.log.Info("leadership transferred before shutdown", "to", id, "took", time.Since(start).Round(time.Millisecond))
}

// apply proposes a command on the leader.
func (s *Server) apply(ctx context.Context, cmd *statev1.Command) (state.Result, error) {
	if err := s.outdated(); err != nil {
		return state.Result{}, err
	}
	if !s.node.IsLeader() {
		return state.Result{}, s.notLeaderErr()
	}
	start := time.Now()
	res, err := s.node.Apply(ctx, cmd)
	if err == nil {
		s.metrics.applyLatency.Observe(time.Since(start).Seconds())
	}
	return res, err
}

// HTTPAddr is the bound /metrics address ("" when disabled).
func (s *Server) HTTPAddr() string {
	if s.httpLis == nil {
		return ""
	}
	return s.httpLis.Addr().String()
}

// leaderHint is the client address of the leader, when this server knows
// it (servers register their client addresses through Raft).
func (s *Server) leaderHint() string {
	if s.node.IsLeader() {
		return s.cfg.Advertise
	}
	id, _ := s.node.Leader()
	if id == "" {
		return ""
	}
	if r, ok := s.store.Server(id); ok {
		return r.GetClientAddress()
	}
	return ""
}

func (s *Server) notLeaderErr() error {
	id, addr := s.node.Leader()
	return &ginraft.NotLeaderError{LeaderID: id, LeaderAddr: addr}
}

// ConnectedAgents is how many agent sessions this server holds.
func (s *Server) ConnectedAgents() int { return s.sessions.count() }

// dialCredentials are the credentials of this master's calls to the other
// masters: mTLS with its own certificate when TLS is on.
func (s *Server) dialCredentials() grpc.DialOption {
	if s.cfg.TLS != nil {
		return grpc.WithTransportCredentials(pki.ClientCredentialsDenying(s.cfg.TLS, s.store))
	}
	return grpc.WithTransportCredentials(insecure.NewCredentials())
}
