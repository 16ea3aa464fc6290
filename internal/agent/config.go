package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"google.golang.org/grpc"
)

// One configuration per binary: the agent's knobs live in Config, their
// defaults in DefaultConfig, their operator ranges in Config.Validate;
// gin-agent binds its flags to them once (cmd/gin-agent) and
// docs/OPERATIONS.md explains them. New fills a zero field with its
// default, so that tests name only what they change.

// NoHomeProbe is Config.HomeProbeInterval when the agent never returns to
// its home master (gin-agent --home-probe-interval 0; a zero Config field
// is the default interval). It is the most negative duration, so that no
// value an operator types means it by accident.
const NoHomeProbe time.Duration = math.MinInt64

// MinFabricScanInterval and MinHomeProbeInterval are the shortest
// intervals Validate accepts: a scan or a probe more often than once a
// second would load the fabric or the home master for nothing.
const (
	MinFabricScanInterval = time.Second
	MinHomeProbeInterval  = time.Second
)

// Config configures an Agent. Zero durations take the documented defaults.
type Config struct {
	// NodeName is the name the node is reported under (required). It
	// overrides the node_name of collected inventories.
	NodeName string
	// Masters are the master client addresses (host:port; see
	// internal/masteraddr), tried in turn. At least one is required.
	Masters []string
	// HeartbeatInterval is how often a Heartbeat is sent (default 5s). A
	// heartbeat_interval in a SessionResponse overrides it.
	HeartbeatInterval time.Duration
	// CollectInterval is how often the source is re-read to detect changes
	// (default: the configured HeartbeatInterval).
	CollectInterval time.Duration
	// Source collects the inventory (required).
	Source Source
	// Logger receives the agent's logs (default slog.Default()).
	Logger *slog.Logger
	// DialOptions are passed to grpc.NewClient; they must include transport
	// credentials. The agent adds keepalive parameters before them, so an
	// explicit grpc.WithKeepaliveParams here wins.
	DialOptions []grpc.DialOption
	// InitialBackoff is the first reconnect backoff ceiling (default 200ms);
	// it doubles per failure up to MaxBackoff, with full jitter.
	InitialBackoff time.Duration
	// MaxBackoff caps reconnect backoff (default 30s). A rejected inventory
	// (INVALID_ARGUMENT) waits between MaxBackoff/2 and MaxBackoff.
	MaxBackoff time.Duration
	// Version is sent as Hello.agent_version.
	Version string
	// FabricScanner scans the fabric when the master names this agent the
	// scanner (nil: this agent never scans). FabricScanInterval defaults to
	// DefaultFabricScanInterval.
	FabricScanner      FabricScanner
	FabricScanInterval time.Duration
	// Plans keeps the plans the master pushes for jobs on this node (the
	// node's plan store, served on the plan socket); nil: pushes are ignored.
	Plans PlanSink
	// HomeProbeInterval is how often, on average, the agent probes its home
	// master (the one its node name hashes to) while its session is with
	// another one, to return once the home master takes sessions again
	// (home.go); default DefaultHomeProbeInterval, negative (NoHomeProbe):
	// never.
	HomeProbeInterval time.Duration
	// Rand is the randomness for backoff jitter (default: a PCG seeded from
	// the runtime's random source). Tests pass a fixed seed. It is used from
	// one goroutine only.
	Rand rand.Source
}

// DefaultConfig is a Config with every default set: what gin-agent's flags
// start from. NodeName, Masters, Source and the rest that has no default
// are left for the caller.
func DefaultConfig() Config {
	return Config{
		HeartbeatInterval:  DefaultHeartbeatInterval,
		InitialBackoff:     DefaultInitialBackoff,
		MaxBackoff:         DefaultMaxBackoff,
		FabricScanInterval: DefaultFabricScanInterval,
		HomeProbeInterval:  DefaultHomeProbeInterval,
	}
}

// Validate checks the operator's knobs against their ranges, as gin-agent
// does before it opens anything (New does not: tests run agents with
// millisecond intervals). The errors name gin-agent's flags, which are the
// knobs' names. CollectInterval 0 is the heartbeat interval.
func (cfg Config) Validate() error {
	switch {
	case strings.TrimSpace(cfg.NodeName) == "":
		return errors.New("--node-name is empty (and the host name is unknown)")
	case cfg.HeartbeatInterval <= 0:
		return fmt.Errorf("--heartbeat-interval %s: must be positive", cfg.HeartbeatInterval)
	case cfg.CollectInterval < 0:
		return fmt.Errorf("--collect-interval %s: must not be negative", cfg.CollectInterval)
	case cfg.FabricScanInterval < MinFabricScanInterval:
		return fmt.Errorf("--fabric-scan-interval %s: must be at least %s", cfg.FabricScanInterval, MinFabricScanInterval)
	case cfg.HomeProbeInterval != NoHomeProbe && cfg.HomeProbeInterval < MinHomeProbeInterval:
		return fmt.Errorf("--home-probe-interval %s: must be 0 (never return) or at least %s", cfg.HomeProbeInterval, MinHomeProbeInterval)
	}
	return nil
}
