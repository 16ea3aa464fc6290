package master

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	nodehealth "github.com/gin-topology/gin/internal/health"
	"github.com/gin-topology/gin/internal/livejob"
	"github.com/gin-topology/gin/internal/pki"
	ginraft "github.com/gin-topology/gin/internal/raft"
)

// One configuration per binary: a master's knobs live in Config, their
// defaults in DefaultConfig, their ranges in Config.Validate; gin-master
// binds its flags to them once (cmd/gin-master) and docs/ explain them.
// New fills a zero field with its default (withDefaults), so that tests
// and the dev cluster name only what they change.

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
	// (defaults DefaultMaxHandshakes, DefaultHandshakeQueue;
	// NoHandshakeQueue: none waits); a Hello past both is refused with
	// RESOURCE_EXHAUSTED and a retry hint (admission.go).
	MaxHandshakes  int
	HandshakeQueue int
	// HandshakeRate bounds the agent Hellos admitted per second (a token
	// bucket of burst MaxHandshakes; default DefaultHandshakeRate(), 125
	// per CPU): a Hello waits in the queue for its token, and one whose
	// wait would pass HelloTimeout is refused with a retry hint of the
	// queue's wait (admission.go).
	HandshakeRate float64
	AgentLogBurst int
	// The clocks (nil: the wall clock) of handshake pacing (the token
	// bucket and the queue's waits), of the attach/detach lines' bucket,
	// and of the leader's node liveness (when a node was heard from, when
	// it missed its heartbeats). One type, three fields: tests move each
	// on its own (the pacing tests refill the handshake bucket by moving
	// its clock an hour, which liveness must not see).
	HandshakeClock, AgentLogClock, LivenessClock Clock
	// Live holds the thresholds of the leader's live job verdicts
	// (internal/livejob; zero fields: its defaults).
	Live livejob.Config
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
	// LeaderTasks are leader-only loops given from outside the master
	// (gin-master --kube-labels), run as the others are (leadertask.go).
	LeaderTasks []LeaderTask
	// Collectors are more Prometheus metrics for /metrics (the tasks').
	Collectors []prometheus.Collector
	Logger     *slog.Logger
}

// NoHandshakeQueue is Config.HandshakeQueue when no Hello waits for a
// handshake slot (gin-master --handshake-queue 0; a zero Config field is
// the default queue).
const NoHandshakeQueue = -1

// DefaultConfig is a Config with every default set: what gin-master's
// flags start from.
func DefaultConfig() Config {
	return Config{
		HeartbeatInterval: 5 * time.Second,
		MissedHeartbeats:  3,
		HelloTimeout:      DefaultHelloTimeout,
		MaxNodes:          DefaultMaxNodes,
		MaxPlans:          DefaultMaxPlans,
		MaxHandshakes:     DefaultMaxHandshakes,
		HandshakeQueue:    DefaultHandshakeQueue,
		HandshakeRate:     DefaultHandshakeRate(),
		AgentLogRate:      DefaultAgentLogRate,
		AgentLogBurst:     DefaultAgentLogBurst,
		MaxStreamsPerConn: DefaultMaxStreamsPerConn,
		MinFreeBytes:      ginraft.DefaultMinFreeBytes,
	}
}

// withDefaults is cfg with every zero knob set to its default.
func (cfg Config) withDefaults() Config {
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
	for _, c := range []*Clock{&cfg.HandshakeClock, &cfg.AgentLogClock, &cfg.LivenessClock} {
		if *c == nil {
			*c = realClock{}
		}
	}
	return cfg
}

// Clock is a master's time: time.Now and time.After by default (realClock),
// a fake one in tests that move it.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Validate checks every knob against its range, as gin-master does before
// it touches the data dir (New does not: tests run masters with knobs
// outside the operator's ranges, e.g. millisecond timeouts). The errors
// name gin-master's flags, which are the knobs' names.
func (cfg Config) Validate() error {
	switch {
	case cfg.MaxNodes < 1 || cfg.MaxNodes > 10_000_000:
		return fmt.Errorf("--max-nodes %d: want 1..10000000", cfg.MaxNodes)
	case cfg.MaxPlans < 1 || cfg.MaxPlans > 10_000_000:
		return fmt.Errorf("--max-plans %d: want 1..10000000", cfg.MaxPlans)
	case cfg.MinFreeBytes < ginraft.MinMinFreeBytes || cfg.MinFreeBytes > ginraft.MaxMinFreeBytes:
		return fmt.Errorf("--data-dir-min-free-mib %d: want %d..%d (at least one Raft log segment, which a rotation preallocates)", cfg.MinFreeBytes>>20, ginraft.MinMinFreeBytes>>20, ginraft.MaxMinFreeBytes>>20)
	case cfg.AgentLogRate < 1.0/60 || cfg.AgentLogRate > 1e6:
		return fmt.Errorf("--agent-log-rate %g: want 0.0167..1000000 lines per second", cfg.AgentLogRate)
	case cfg.AgentLogBurst < 1 || cfg.AgentLogBurst > 1e6:
		return fmt.Errorf("--agent-log-burst %d: want 1..1000000", cfg.AgentLogBurst)
	case cfg.MaxHandshakes < 1 || cfg.MaxHandshakes > 1_000_000:
		return fmt.Errorf("--max-handshakes %d: want 1..1000000", cfg.MaxHandshakes)
	case !(cfg.HandshakeRate >= 0 && cfg.HandshakeRate <= 1e6):
		return fmt.Errorf("--handshake-rate %g: want 0 (%d per CPU) or up to 1000000 per second", cfg.HandshakeRate, HandshakeRatePerCPU)
	case cfg.HandshakeQueue < NoHandshakeQueue || cfg.HandshakeQueue > 10_000_000:
		return fmt.Errorf("--handshake-queue %d: want 0..10000000", cfg.HandshakeQueue)
	case cfg.MaxStreamsPerConn < 1 || cfg.MaxStreamsPerConn > 1<<16:
		return fmt.Errorf("--max-streams-per-conn %d: want 1..65536", cfg.MaxStreamsPerConn)
	case cfg.HelloTimeout < 100*time.Millisecond || cfg.HelloTimeout > 10*time.Minute:
		return fmt.Errorf("--hello-timeout %s: want 100ms..10m", cfg.HelloTimeout)
	case cfg.BootstrapExpect < 0 || cfg.BootstrapExpect > 9:
		return fmt.Errorf("--bootstrap-expect %d: want 1..9 (3 or 5 for a replicated cluster)", cfg.BootstrapExpect)
	}
	if err := cfg.RaftTuning.Validate(); err != nil {
		return fmt.Errorf("--raft-*/--snapshot-*/--trailing-logs: %w", err)
	}
	return nil
}
