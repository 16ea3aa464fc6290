package main

import (
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/gin-topology/gin/internal/agent"
	"github.com/gin-topology/gin/internal/discovery/linkhealth"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/masteraddr"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/plansock"
)

// config is gin-agent's whole configuration: the agent's own knobs in
// Agent (agent.DefaultConfig, agent.Config.Validate) and the binary's
// around them. defaultConfig holds every default, bindFlags binds each flag
// to its field once, validate checks every range; resolve applies the
// environment. docs/OPERATIONS.md explains each flag.
type config struct {
	// Agent holds --node-name, --heartbeat-interval, --collect-interval,
	// --fabric-scan-interval and --home-probe-interval; resolve adds the
	// masters, runAgent the source, credentials and plan store.
	Agent agent.Config
	// Source is --source: auto, nvml, sim:<profile> or file:<path>.
	Source string
	// Master is --master as given (else $GIN_MASTER_HOST, else the default).
	Master string
	// MetricsBind is --metrics-bind; empty: no /metrics.
	MetricsBind string
	// LinkErrors is --link-error-threshold, errors per minute.
	LinkErrors float64
	// ScanCommand is --fabric-scan-command; empty: this agent never scans.
	ScanCommand string
	// ComputeHCAs, StorageHCAs and LLDPCommand configure --source auto.
	ComputeHCAs, StorageHCAs []string
	LLDPCommand              string
	// Plans are --plan-socket and --plan-dir.
	Plans planFlags
	// Once, Output: --once and its -o.
	Once   bool
	Output string
	// LogLevel is --log-level.
	LogLevel string
	// TLS are --tls-ca, --tls-cert, --tls-key (else GIN_TLS_*).
	TLS pki.Files
}

// defaultConfig is the configuration before any flag: the agent's
// defaults and the binary's, with host as the node name.
func defaultConfig(host string) config {
	a := agent.DefaultConfig()
	a.NodeName = host
	return config{
		Agent:       a,
		Source:      "auto",
		MetricsBind: defaultMetricsBind,
		LinkErrors:  linkhealth.DefaultMaxErrorsPerMinute,
		ScanCommand: "ibnetdiscover",
		LLDPCommand: "lldpcli -f json show neighbors details",
		Plans:       planFlags{socket: plansock.DefaultPath, dir: defaultPlanDir},
		Output:      "table",
		LogLevel:    "info",
	}
}

// bindFlags binds every flag of gin-agent to its field of c, whose values
// are the flags' defaults. The help is one line; docs/OPERATIONS.md has
// the details.
func bindFlags(f *pflag.FlagSet, c *config) {
	f.SortFlags = false
	f.StringVar(&c.Source, "source", c.Source, "inventory source: auto, nvml, sim:<profile> or file:<path> (saved with --once -o json)")
	f.StringVar(&c.Master, "master", c.Master, "masters, host[:port],... (default $"+masteraddr.EnvVar+", else "+masteraddr.DefaultMaster+")")
	f.StringVar(&c.Agent.NodeName, "node-name", c.Agent.NodeName, "name the node is reported under")
	f.DurationVar(&c.Agent.HeartbeatInterval, "heartbeat-interval", c.Agent.HeartbeatInterval, "heartbeat interval, else $"+envHeartbeat+"; the master may override it")
	f.Var(homeProbeFlag{&c.Agent.HomeProbeInterval}, "home-probe-interval", "how often, away from the home master, to ask whether it is back; 0 never returns")
	f.DurationVar(&c.Agent.CollectInterval, "collect-interval", c.Agent.CollectInterval, "how often to re-read the source (default: the heartbeat interval)")
	f.StringVar(&c.MetricsBind, "metrics-bind", c.MetricsBind, "address of the Prometheus /metrics endpoint; empty disables it")
	f.Float64Var(&c.LinkErrors, "link-error-threshold", c.LinkErrors, "errors per minute above which an NVLink or HCA port is reported degraded")
	f.StringVar(&c.ScanCommand, "fabric-scan-command", c.ScanCommand, "ibnetdiscover command run when the master names this agent the scanner; empty disables")
	f.DurationVar(&c.Agent.FabricScanInterval, "fabric-scan-interval", c.Agent.FabricScanInterval, "how often the fabric scanner agent scans")
	f.StringSliceVar(&c.ComputeHCAs, "compute-hcas", c.ComputeHCAs, "with --source auto: HCAs (names or node GUIDs) that carry GPU traffic")
	f.StringSliceVar(&c.StorageHCAs, "storage-hcas", c.StorageHCAs, "with --source auto: HCAs (names or node GUIDs) for storage or management")
	f.StringVar(&c.LLDPCommand, "lldp-command", c.LLDPCommand, "with --source auto: command printing lldpd's neighbours as JSON; empty disables")
	f.StringVar(&c.Plans.socket, "plan-socket", c.Plans.socket, "node socket: plans for local processes, profiler windows in; empty disables")
	f.StringVar(&c.Plans.dir, "plan-dir", c.Plans.dir, "directory keeping the node's plans across restarts; empty: memory only")
	f.BoolVar(&c.Once, "once", c.Once, "collect once, print the inventory and exit (no master needed)")
	f.StringVarP(&c.Output, "output", "o", c.Output, "output format of --once: table, json or yaml (docs/JSON.md)")
	f.StringVar(&c.TLS.CA, "tls-ca", c.TLS.CA, "mTLS: the cluster CA file (default $GIN_TLS_CA)")
	f.StringVar(&c.TLS.Cert, "tls-cert", c.TLS.Cert, "mTLS: this node's agent certificate (default $GIN_TLS_CERT)")
	f.StringVar(&c.TLS.Key, "tls-key", c.TLS.Key, "mTLS: its key (default $GIN_TLS_KEY)")
	f.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: debug, info, warn or error (logs go to stderr)")
}

// homeProbeFlag is --home-probe-interval bound to
// agent.Config.HomeProbeInterval: the flag's 0 (never return) is the
// agent's NoHomeProbe, and every other value is the agent's as typed.
type homeProbeFlag struct{ d *time.Duration }

func (h homeProbeFlag) String() string {
	if h.d == nil || *h.d == agent.NoHomeProbe {
		return "0s"
	}
	return h.d.String()
}

func (h homeProbeFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return err
	}
	if d == 0 {
		d = agent.NoHomeProbe
	}
	*h.d = d
	return nil
}

func (homeProbeFlag) Type() string { return "duration" }

// validate checks every value of c against its range; it changes nothing.
// Its errors name the flag.
func (c config) validate() error {
	if err := checkSource(c.Source); err != nil {
		return err
	}
	if err := c.Agent.Validate(); err != nil {
		return err
	}
	if err := linkhealth.Validate(c.LinkErrors); err != nil {
		return fmt.Errorf("--link-error-threshold: %w", err)
	}
	if c.MetricsBind != "" {
		if _, _, err := net.SplitHostPort(c.MetricsBind); err != nil {
			return fmt.Errorf("--metrics-bind %q: %w", c.MetricsBind, err)
		}
	}
	switch c.Output {
	case "table", "json", "yaml":
	default:
		return fmt.Errorf("--output %q: want table, json or yaml", c.Output)
	}
	if _, err := parseLogLevel(c.LogLevel); err != nil {
		return err
	}
	return nil
}

// resolve applies the environment to the flags' config c and validates
// it; every error is a usage error. f tells which flags were given.
func resolve(f *pflag.FlagSet, c config, getenv func(string) string) (settings, error) {
	s := settings{config: c}
	s.Plans.socketChanged, s.Plans.dirChanged = f.Changed("plan-socket"), f.Changed("plan-dir")
	if !f.Changed("heartbeat-interval") {
		if v := strings.TrimSpace(getenv(envHeartbeat)); v != "" {
			d, err := parseInterval(v)
			if err != nil {
				return s, usagef("%s=%q: %v", envHeartbeat, v, err)
			}
			s.Agent.HeartbeatInterval = d
		}
	}
	if err := s.validate(); err != nil {
		return s, usageError{err}
	}
	if f.Changed("output") && !s.Once {
		return s, usagef("--output applies to --once only")
	}
	if !f.Changed("fabric-scan-command") && !strings.HasPrefix(s.Source, "auto") && s.Source != "nvml" {
		s.ScanCommand = "" // simulated and replayed nodes have no fabric to scan
	}
	s.logLevel, _ = parseLogLevel(s.LogLevel)
	if !s.Once {
		masters, err := masteraddr.FromEnv(s.Master, getenv)
		if err != nil {
			return s, usageError{err}
		}
		s.Agent.Masters = masters
		s.TLS = pki.FilesFromEnv(s.TLS, getenv)
		if s.TLS.Given() {
			if err := s.TLS.Validate(); err != nil {
				return s, usageError{err}
			}
		}
	}
	return s, nil
}

// parseLogLevel reads --log-level.
func parseLogLevel(v string) (slog.Level, error) {
	switch strings.ToLower(v) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", v)
}

// checkSource validates the --source syntax; whether the source works is
// found out when it is opened.
func checkSource(spec string) error {
	kind, arg, hasArg := strings.Cut(spec, ":")
	switch kind {
	case "auto", "nvml":
		if hasArg {
			return fmt.Errorf("--source %q: %s takes no argument", spec, kind)
		}
	case "sim":
		if arg == "" {
			return fmt.Errorf("--source %q: want sim:<profile>", spec)
		}
		if p := sim.Profiles(); len(p) > 0 && !slices.Contains(p, arg) {
			return fmt.Errorf("--source %q: unknown profile %q (one of %s)", spec, arg, strings.Join(p, ", "))
		}
	case "file":
		if arg == "" {
			return fmt.Errorf("--source %q: want file:<path>", spec)
		}
	default:
		return fmt.Errorf("--source %q: want auto, nvml, sim:<profile> or file:<path>", spec)
	}
	return nil
}
