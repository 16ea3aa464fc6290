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
	"google.golang.org/protobuf/types/known/durationpb"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/authz"
	"github.com/gin-topology/gin/internal/buildinfo"
	"github.com/gin-topology/gin/internal/pki"
	ginraft "github.com/gin-topology/gin/internal/raft"
	"github.com/gin-topology/gin/internal/ratelog"
	"github.com/gin-topology/gin/internal/state"
)

// Server is one gin-master: Raft node, state and gRPC services.
type Server struct {
	invBounds inventoryBounds // agents' inventory changes per node (inventorybounds.go)
	dups      dupSessions     // nodes held on two masters at once (dupsessions.go)

	cfg       Config
	log       *slog.Logger
	preAuth   preAuthLimits // the gRPC and HTTP ports' bounds before authentication (preauth.go)
	store     *state.Store
	node      *ginraft.Node
	grpc      *grpc.Server
	health    *health.Server
	lis       net.Listener
	live      *liveness
	lead      leadership
	sessions  sessions    // this master's own agent sessions
	scan      scannerRole // the fabric scanner, as the leader named it
	link      *leaderLink // a follower's tie to the leader (leaderlink.go)
	planPush  planPush    // pinned plans to the agent sessions of their nodes
	admission *admission  // agent handshakes at once
	metrics   *metrics
	// The gRPC services that are parts of their own (parts.go).
	topology *topologyService
	admin    *adminService
	plans    *planService
	calib    *calibrationService
	liveJobs *liveService
	httpLis  net.Listener
	agentLog *ratelog.Bucket // attach/detach lines
	// rejectLog bounds the "rejected request" lines: any caller that
	// reaches a handler can cause one per request.
	rejectLog *ratelog.Bucket

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
	cfg = cfg.withDefaults()
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
	s := &Server{cfg: cfg, log: log, store: store, node: node, lis: lis, health: health.NewServer(), metrics: newMetrics(), httpLis: httpLis, preAuth: newPreAuthLimits(log),
		agentLog:  ratelog.New(cfg.AgentLogRate, cfg.AgentLogBurst, cfg.AgentLogClock.Now),
		rejectLog: ratelog.New(rejectLogRate, rejectLogBurst, cfg.AgentLogClock.Now), admission: newAdmission(cfg.MaxHandshakes, cfg.HandshakeQueue, cfg.HandshakeRate, cfg.MaxHandshakes, cfg.HandshakeClock)}
	s.link = newLeaderLink(s.leaderHint, s.dialCredentials(), time.Now())
	s.live = newLiveness(cfg.HeartbeatInterval, cfg.MissedHeartbeats, store, log, s.setNodeStates)
	s.live.afterCheck = func() { s.refreshScanner(); s.dups.check(s) }
	s.live.writing = s.sessions.writing
	s.live.now = cfg.LivenessClock.Now
	fwd := &forwarder{id: cfg.ID, leads: node.IsLeader, notLeader: func() error { return toStatus(s.notLeaderErr()) },
		leader: s.link.conn, leaderID: func() string { id, _ := node.Leader(); return id },
		hold: forwardHold, wait: relayRetryWait}
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
		secure = append(secure, grpc.Creds(s.preAuth.grpc.Credentials(az.Credentials(pki.ServerCredentials(cfg.TLS)))),
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
		grpc.ConnectionTimeout(grpcConnectionTimeout),                       // preauth.go
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
	s.topology = newTopologyService(store, s.read)
	s.admin = &adminService{id: cfg.ID, advertise: cfg.Advertise, tls: cfg.TLS, store: store, node: node,
		apply: s.apply, leading: s.leading, outdated: s.outdated, leaderHint: s.leaderHint, reach: s.live.reach,
		held:            func(n string) bool { return s.sessions.has(n) || s.live.reportedHeld(n) },
		waitDenyApplied: s.waitDenyApplied, log: log,
		leaderInfo: func(ctx context.Context) (*ginv1.GetClusterInfoResponse, error) {
			conn, err := s.link.conn()
			if err != nil {
				return nil, err
			}
			return ginv1.NewAdminServiceClient(conn).GetClusterInfo(ctx, &ginv1.GetClusterInfoRequest{})
		}}
	s.plans = newPlanService(store, s.apply, s.read, s.leading, cfg.MaxPlans, log)
	s.calib = newCalibrationService(store, s.apply, s.read, log)
	s.liveJobs = newLiveService(store, s.leading, cfg.Live, time.Now, log)
	ginv1.RegisterAgentServiceServer(s.grpc, &agentService{log: log, agentLog: s.agentLog, helloTimeout: cfg.HelloTimeout,
		admission: s.admission, sessions: &s.sessions, planPush: &s.planPush, live: s.live, closing: s.closing.Load,
		outdated: s.outdated, detached: s.detached, heldFor: s.heldFor, response: s.response,
		attach: s.attach, detach: s.detach, scanner: s.scanner,
		commitInventory: s.commitInventory, commitFabricScan: s.commitFabricScan})
	ginv1.RegisterTopologyServiceServer(s.grpc, s.topology)
	ginv1.RegisterAdminServiceServer(s.grpc, s.admin)
	ginv1.RegisterPlanServiceServer(s.grpc, s.plans)
	ginv1.RegisterCalibrationServiceServer(s.grpc, s.calib)
	ginv1.RegisterLiveServiceServer(s.grpc, s.liveJobs)
	ginv1.RegisterCheckServiceServer(s.grpc, s.newCheck())
	ginv1.RegisterRelayServiceServer(s.grpc, &relayService{store: store, live: s.live, maxNodes: cfg.MaxNodes,
		memberOnly: s.memberOnly, outdated: s.outdated, leading: s.leading,
		commitInventory: s.commitInventoryHere, importFabricScan: s.importFabricScanHere,
		refreshScanner: s.refreshScanner, scanner: s.scanner})
	healthpb.RegisterHealthServer(s.grpc, s.health)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	s.health.SetServingStatus(agentServiceName, healthpb.HealthCheckResponse_NOT_SERVING) // sessionhealth.go
	return s, nil
}

// newCheck is a health check over this replica: each caller (CheckService,
// the /metrics collector and web view, each leader task) gets a verdict
// cache of its own.
func (s *Server) newCheck() *checkService {
	return newCheckService(s.store, s.read, s.cfg.HealthThresholds)
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
		s.planPush.run(ctx, s.store, s.log) // pinned plans, seen through Raft, to this master's sessions
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
	if err := s.node.CorruptState(); err != nil {
		return err
	}
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
		s.link.close()
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

// read prepares a read: a CONSISTENT one is served by a verified leader only.
func (s *Server) read(ctx context.Context, c ginv1.ReadConsistency) (state.View, *ginv1.ReadInfo, error) {
	if err := s.outdated(); err != nil {
		return state.View{}, nil, err
	}
	switch c {
	case ginv1.ReadConsistency_READ_CONSISTENCY_UNSPECIFIED, ginv1.ReadConsistency_READ_CONSISTENCY_ANY:
	case ginv1.ReadConsistency_READ_CONSISTENCY_CONSISTENT:
		if !s.node.IsLeader() {
			return state.View{}, nil, s.notLeaderErr()
		}
		if err := s.node.VerifyLeader(ctx); err != nil {
			return state.View{}, nil, err
		}
	default:
		return state.View{}, nil, invalidf("consistency", "unknown read consistency %d", c)
	}
	// A master that has not caught up with a leader since it started (a
	// restart without a quorum, a join still receiving the log) would
	// answer from a state older than the cluster's: it refuses, UNAVAILABLE,
	// and clients ask the next master (redirect.MoveOn).
	if err := s.node.CaughtUp(); err != nil {
		return state.View{}, nil, err
	}
	v := s.store.View()
	applied, commit := s.node.Lag()
	return v, &ginv1.ReadInfo{Index: v.Index, ServedBy: s.cfg.ID, Leader: s.node.IsLeader(), Staleness: durationpb.New(s.node.Staleness()), Lag: commit - applied}, nil
}

// leading is nil while this server leads, else the NotLeaderError.
func (s *Server) leading() error {
	if s.node.IsLeader() {
		return nil
	}
	return s.notLeaderErr()
}

// httpAdvertise is the /metrics address other hosts reach: the host of
// the client address (what clients dial) and the bound HTTP port; "" when
// HTTP is off.
func (s *Server) httpAdvertise() string {
	if s.httpLis == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(s.cfg.Advertise)
	_, port, perr := net.SplitHostPort(s.httpLis.Addr().String())
	if err != nil || perr != nil || host == "" {
		return ""
	}
	return net.JoinHostPort(host, port)
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
