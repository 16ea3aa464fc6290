// Command gin-agent discovers a node's GPUs, NVLinks, PCIe layout and RDMA
// ports and keeps them current on the gin-masters over gRPC.
//
// It is a thin main: flags and environment → agent.Config → agent.Run.
// `gin-agent --once -o json` prints what it discovered and exits.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gin-topology/gin/internal/agent"
	"github.com/gin-topology/gin/internal/agentmetrics"
	"github.com/gin-topology/gin/internal/buildinfo"
	"github.com/gin-topology/gin/internal/discovery"
	"github.com/gin-topology/gin/internal/discovery/linkhealth"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/discovery/sources"
	"github.com/gin-topology/gin/internal/inventory"
	"github.com/gin-topology/gin/internal/jsonout"
	"github.com/gin-topology/gin/internal/masteraddr"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/plansock"
)

// envHeartbeat is the environment variable for --heartbeat-interval.
const envHeartbeat = "GIN_HEARTBEAT_INTERVAL"

// Exit codes. None is 2: the Go runtime exits 2 on a panic, and a
// panicking agent must be restarted by its unit, which does not restart
// exitUsage.
const (
	exitOK    = 0
	exitError = 1  // the agent or the discovery failed
	exitUsage = 64 // bad flags, values or environment (EX_USAGE of sysexits.h)
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// run is main without the process: it returns the exit code. SIGINT and
// SIGTERM end the agent cleanly.
func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runContext(ctx, args, stdout, stderr, getenv)
}

// usageError is a bad flag, value or environment variable (exit 64).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// options are the raw flag values.
type options struct {
	source            string
	master            string
	nodeName          string
	heartbeatInterval time.Duration
	collectInterval   time.Duration
	homeProbe         time.Duration
	once              bool
	output            string
	logLevel          string
	metricsBind       string
	linkErrors        float64
	scanCommand       string
	scanInterval      time.Duration
	computeHCAs       []string
	storageHCAs       []string
	lldpCommand       string
	plans             planFlags
	tls               pki.Files // --tls-ca, --tls-cert, --tls-key (else GIN_TLS_*)
}

// settings are the validated options with the environment applied.
type settings struct {
	options
	masters  []string // only resolved when not --once
	logLevel slog.Level
	logger   *slog.Logger
}

func runContext(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if getenv == nil {
		getenv = os.Getenv
	}
	cmd := newCommand(getenv, stdout, stderr, execute)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if _, ok := errors.AsType[usageError](err); ok {
		fmt.Fprintf(stderr, "gin-agent: %v\nRun 'gin-agent --help' for usage.\n", err)
		return exitUsage
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		err = fmt.Errorf("%w (another gin-agent, or another program, uses that port: stop it or choose another --metrics-bind)", err)
	}
	fmt.Fprintf(stderr, "gin-agent: %v\n", err)
	return exitError
}

// execute does what the validated settings ask for.
func execute(ctx context.Context, s settings, stdout, stderr io.Writer) error {
	s.logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: s.logLevel}))
	if s.once {
		return runOnce(ctx, s, stdout)
	}
	return runAgent(ctx, s, stderr)
}

// newCommand builds the command; exec runs with the validated settings.
func newCommand(getenv func(string) string, stdout, stderr io.Writer,
	exec func(context.Context, settings, io.Writer, io.Writer) error,
) *cobra.Command {
	var o options
	host, _ := os.Hostname()
	cmd := &cobra.Command{
		Use:   "gin-agent",
		Short: "Discover this node's GPU topology and keep it current on the GIN master",
		Long: `gin-agent discovers this node's GPUs, NVLinks, NVSwitches, PCIe layout and
InfiniBand/RoCE ports, and streams the inventory to one of the gin-masters over
gRPC (any master; followers relay to the leader): a full inventory when the master's copy differs, then a heartbeat every
heartbeat interval and the new inventory as soon as a collection sees a change.
It starts at the master its node name hashes to in --master (agents spread over
the masters) and, when that master fails, moves to another one chosen by the
same hash (a failed master's agents spread over the others).

Prometheus metrics (NVLink and HCA port state and error counters, GPU info,
QP counts, the agent's connection to the masters) are served at /metrics on
--metrics-bind (default :9410). A link whose error rate exceeds
--link-error-threshold is reported to the master as degraded. Under systemd
(Type=notify) the agent signals readiness after its first collection.

With --once it collects once, prints the inventory and exits; no master is
needed.

Without --tls-ca, --tls-cert and --tls-key the connection to the masters is
not encrypted; with them it is mutual TLS 1.3 with an agent certificate naming
this node (ginctl tls cert create --role agent --name NODE).

Environment:
  GIN_MASTER_HOST         master list, used when --master is not given
  GIN_TLS_CA, GIN_TLS_CERT, GIN_TLS_KEY
                          the --tls-* files, used when the flags are not given
  GIN_HEARTBEAT_INTERVAL  heartbeat interval, used when --heartbeat-interval is
                          not given: a Go duration ("10s") or plain seconds ("10")

Exit status: 0 on success or a clean shutdown (SIGINT/SIGTERM), 1 when
discovery or the agent fails, 64 for bad flags, values or environment
(2 is a Go panic, which systemd restarts).`,
		Example: `  gin-agent --once -o json --source auto | jq '.gpus | length'
  gin-agent --master gin-m1,gin-m2:5000,[fd00::3]:5000
  GIN_MASTER_HOST=gin-m1 gin-agent --source file:/var/lib/gin/inventory.json`,
		Version:       buildinfo.String(),
		Args:          noArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := resolve(cmd, o, getenv)
			if err != nil {
				return err
			}
			return exec(cmd.Context(), s, stdout, stderr)
		},
	}
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SetVersionTemplate(buildinfo.VersionTemplate("gin-agent"))
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })

	f := cmd.Flags()
	f.SortFlags = false
	simHelp := "simulated hardware"
	if p := sim.Profiles(); len(p) > 0 {
		simHelp += ": " + strings.Join(p, ", ")
	}
	f.StringVar(&o.source, "source", "auto",
		"inventory source: auto (this node's hardware: NVML, sysfs, RDMA netlink, lldpd), nvml (the same, but fail without an NVIDIA driver), sim:<profile> ("+simHelp+
			"), or file:<path> (an inventory saved with --once -o json)")
	f.StringVar(&o.master, "master", "",
		"comma-separated master list, host[:port] or [IPv6]:port, port "+strconv.Itoa(masteraddr.DefaultPort)+
			" when omitted (default: $"+masteraddr.EnvVar+", else "+masteraddr.DefaultMaster+")")
	f.StringVar(&o.nodeName, "node-name", host, "name the node is reported under")
	f.DurationVar(&o.heartbeatInterval, "heartbeat-interval", 0,
		"how often to send a heartbeat (default: $"+envHeartbeat+", else "+agent.DefaultHeartbeatInterval.String()+"); the master may override it")
	f.DurationVar(&o.homeProbe, "home-probe-interval", agent.DefaultHomeProbeInterval,
		"while attached to another master than the one this node's name hashes to in --master (its home, which failed), how often on average to ask the home whether it takes sessions again, and return then; 0 never returns")
	f.DurationVar(&o.collectInterval, "collect-interval", 0,
		"how often to re-read the source to detect hardware changes (default: the heartbeat interval)")
	f.StringVar(&o.metricsBind, "metrics-bind", defaultMetricsBind,
		"address of the Prometheus /metrics endpoint (link health, agent state); empty disables it")
	f.Float64Var(&o.linkErrors, "link-error-threshold", linkhealth.DefaultMaxErrorsPerMinute,
		"errors per minute on an NVLink or HCA port above which the link is reported degraded")
	f.StringVar(&o.scanCommand, "fabric-scan-command", "ibnetdiscover",
		"command whose output (ibnetdiscover format) this agent uploads when the master names it the fabric scanner; empty disables scanning (default for sim: and file: sources)")
	f.DurationVar(&o.scanInterval, "fabric-scan-interval", agent.DefaultFabricScanInterval,
		"how often the fabric scanner agent scans")
	f.StringSliceVar(&o.computeHCAs, "compute-hcas", nil,
		"with --source auto: HCAs (device names or node GUIDs) that carry GPU traffic (default: every InfiniBand HCA and every Ethernet HCA not listed in --storage-hcas)")
	f.StringSliceVar(&o.storageHCAs, "storage-hcas", nil,
		"with --source auto: HCAs (device names or node GUIDs) that serve storage or in-band management, not GPU traffic")
	f.StringVar(&o.lldpCommand, "lldp-command", "lldpcli -f json show neighbors details",
		"with --source auto: command that prints lldpd's neighbours as JSON (Ethernet/RoCE fabric neighbours); empty disables it, a missing lldpcli is skipped")
	f.StringVar(&o.plans.socket, "plan-socket", plansock.DefaultPath,
		"Unix socket on which local processes (the NCCL plugin, the Slurm prolog) get the node's plans; empty disables it")
	f.StringVar(&o.plans.dir, "plan-dir", defaultPlanDir, "root-owned directory that keeps the node's plans across restarts; empty: memory only")
	f.BoolVar(&o.once, "once", false, "collect once, print the inventory and exit (no master needed)")
	f.StringVarP(&o.output, "output", "o", "table", "output format of --once: table, json or yaml (docs/JSON.md: field names as in the .proto, every field, enum words)")
	f.StringVar(&o.tls.CA, "tls-ca", "", "mTLS: the cluster CA file (default $GIN_TLS_CA); with --tls-cert and --tls-key, else plaintext")
	f.StringVar(&o.tls.Cert, "tls-cert", "", "mTLS: this node's agent certificate, spiffe://gin/agent/<node-name> (default $GIN_TLS_CERT)")
	f.StringVar(&o.tls.Key, "tls-key", "", "mTLS: its key (default $GIN_TLS_KEY)")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error (logs go to stderr)")
	// Cobra's help and version flags, declared here so their help text is ours.
	f.BoolP("help", "h", false, "show this help and exit")
	f.Bool("version", false, "print the version and exit")
	cmd.AddCommand(newPlanCommand(stdout))
	return cmd
}

// noArgs rejects positional arguments as a usage error.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q (gin-agent takes flags only)", args[0])
	}
	return nil
}

// resolve validates the flags and applies the environment.
func resolve(cmd *cobra.Command, o options, getenv func(string) string) (settings, error) {
	s := settings{options: o}
	s.plans.socketChanged, s.plans.dirChanged = cmd.Flags().Changed("plan-socket"), cmd.Flags().Changed("plan-dir")
	if err := checkSource(o.source); err != nil {
		return s, err
	}
	if strings.TrimSpace(o.nodeName) == "" {
		return s, usagef("--node-name is empty (and the host name is unknown)")
	}
	if !cmd.Flags().Changed("heartbeat-interval") {
		s.heartbeatInterval = agent.DefaultHeartbeatInterval
		if v := strings.TrimSpace(getenv(envHeartbeat)); v != "" {
			d, err := parseInterval(v)
			if err != nil {
				return s, usagef("%s=%q: %v", envHeartbeat, v, err)
			}
			s.heartbeatInterval = d
		}
	} else if s.heartbeatInterval <= 0 {
		return s, usagef("--heartbeat-interval %s: must be positive", s.heartbeatInterval)
	}
	if o.scanInterval < time.Second {
		return s, usagef("--fabric-scan-interval %s: must be at least 1s", o.scanInterval)
	}
	if !cmd.Flags().Changed("fabric-scan-command") && !strings.HasPrefix(o.source, "auto") && o.source != "nvml" {
		s.scanCommand = "" // simulated and replayed nodes have no fabric to scan
	}
	if err := linkhealth.Validate(o.linkErrors); err != nil {
		return s, usagef("--link-error-threshold: %v", err)
	}
	if o.metricsBind != "" {
		if _, _, err := net.SplitHostPort(o.metricsBind); err != nil {
			return s, usagef("--metrics-bind %q: %v", o.metricsBind, err)
		}
	}
	if o.homeProbe < 0 || o.homeProbe > 0 && o.homeProbe < time.Second {
		return s, usagef("--home-probe-interval %s: must be 0 (never return) or at least 1s", o.homeProbe)
	}
	if s.collectInterval < 0 {
		return s, usagef("--collect-interval %s: must not be negative", s.collectInterval)
	}
	switch o.output {
	case "table", "json", "yaml":
	default:
		return s, usagef("--output %q: want table, json or yaml", o.output)
	}
	if cmd.Flags().Changed("output") && !o.once {
		return s, usagef("--output applies to --once only")
	}
	switch strings.ToLower(o.logLevel) {
	case "debug":
		s.logLevel = slog.LevelDebug
	case "info":
		s.logLevel = slog.LevelInfo
	case "warn", "warning":
		s.logLevel = slog.LevelWarn
	case "error":
		s.logLevel = slog.LevelError
	default:
		return s, usagef("--log-level %q: want debug, info, warn or error", o.logLevel)
	}
	if !o.once {
		masters, err := masteraddr.FromEnv(o.master, getenv)
		if err != nil {
			return s, usageError{err}
		}
		s.masters = masters
		s.tls = pki.FilesFromEnv(o.tls, getenv)
		if s.tls.Given() {
			if err := s.tls.Validate(); err != nil {
				return s, usageError{err}
			}
		}
	}
	return s, nil
}

// dialCredentials are the agent's credentials towards the masters: mTLS
// with an agent certificate naming this node when --tls-* are given,
// plaintext (with a warning) otherwise.
func dialCredentials(s settings, log *slog.Logger) (grpc.DialOption, error) {
	if !s.tls.Given() {
		log.Warn("connection to the master is NOT encrypted (no --tls-ca/--tls-cert/--tls-key)", slog.Any("masters", s.masters))
		return grpc.WithTransportCredentials(insecure.NewCredentials()), nil
	}
	src, err := pki.NewSource(s.tls, log)
	if err != nil {
		return nil, err
	}
	if id := src.Identity(); id.Role != pki.RoleAgent || id.Name != s.nodeName {
		return nil, fmt.Errorf("--tls-cert %s is for %s; this agent needs an agent certificate for node %q (ginctl tls cert create --role agent --name %s)", s.tls.Cert, id, s.nodeName, s.nodeName)
	}
	log.Info("mTLS to the masters", "identity", src.Identity().String())
	return grpc.WithTransportCredentials(pki.ClientCredentialsFrom(src)), nil
}

// checkSource validates the --source syntax; whether the source works is
// found out when it is opened.
func checkSource(spec string) error {
	kind, arg, hasArg := strings.Cut(spec, ":")
	switch kind {
	case "auto", "nvml":
		if hasArg {
			return usagef("--source %q: %s takes no argument", spec, kind)
		}
	case "sim":
		if arg == "" {
			return usagef("--source %q: want sim:<profile>", spec)
		}
		if p := sim.Profiles(); len(p) > 0 && !slices.Contains(p, arg) {
			return usagef("--source %q: unknown profile %q (one of %s)", spec, arg, strings.Join(p, ", "))
		}
	case "file":
		if arg == "" {
			return usagef("--source %q: want file:<path>", spec)
		}
	default:
		return usagef("--source %q: want auto, nvml, sim:<profile> or file:<path>", spec)
	}
	return nil
}

// parseInterval reads a Go duration ("10s", "1m30s") or plain seconds ("10", "2.5").
func parseInterval(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		secs, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil {
			return 0, errors.New("want a duration such as 10s or plain seconds such as 10")
		}
		if secs > (24 * time.Hour).Seconds() {
			return 0, errors.New("more than 24h")
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d <= 0 {
		return 0, errors.New("must be positive")
	}
	return d, nil
}

// scanner is the fabric scan to run when the master names this agent the
// scanner; nil when scanning is disabled.
func scanner(command string) agent.FabricScanner {
	if strings.TrimSpace(command) == "" {
		return nil
	}
	return sources.IBNetDiscover(command)
}

// openSource opens the discovery source; its error is printed as it is.
func openSource(s settings) (discovery.Source, error) {
	src, err := sources.Open(s.source, sources.Options{NodeName: s.nodeName, Auto: sources.AutoOptions{
		ComputeHCAs: s.computeHCAs, StorageHCAs: s.storageHCAs, LLDPCommand: s.lldpCommand, Logger: s.logger,
	}})
	if err != nil {
		return nil, err
	}
	return src, nil
}

// runOnce collects once and prints the inventory.
func runOnce(ctx context.Context, s settings, stdout io.Writer) error {
	src, err := openSource(s)
	if err != nil {
		return err
	}
	inv, err := src.Collect(ctx)
	if err != nil {
		return fmt.Errorf("collect from %s: %w", src.Name(), err)
	}
	// What --once prints is what the agent would send: device identities
	// in their canonical form (internal/agent's collection does the same).
	inv, _ = inventory.Canonical(inv)
	if s.output == "yaml" {
		if err := jsonout.WriteYAML(stdout, inv); err != nil {
			return fmt.Errorf("write inventory: %w", err)
		}
		return nil
	}
	if s.output == "json" {
		return writeJSON(stdout, inv)
	}
	return writeTable(stdout, inv)
}

// runAgent runs the agent until ctx is done: the metrics endpoint, the
// agent, and systemd readiness once the first collection is in.
func runAgent(ctx context.Context, s settings, stderr io.Writer) error {
	log := s.logger
	src, err := openSource(s)
	if err != nil {
		return err
	}
	src = sources.WithHealth(src, s.linkErrors)
	creds, err := dialCredentials(s, log)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	store, sock, waitPlans, err := startPlans(ctx, s.plans, s.masters, creds, log)
	if err != nil {
		return err
	}
	defer func() { cancel(); waitPlans() }()
	var plans agent.PlanSink
	if store != nil {
		plans = store
	}
	a, err := agent.New(agent.Config{
		Plans:              plans,
		NodeName:           s.nodeName,
		Masters:            s.masters,
		HeartbeatInterval:  s.heartbeatInterval,
		CollectInterval:    s.collectInterval,
		Source:             src,
		Logger:             log,
		DialOptions:        []grpc.DialOption{creds},
		Version:            buildinfo.String(),
		FabricScanner:      scanner(s.scanCommand),
		FabricScanInterval: s.scanInterval,
		HomeProbeInterval:  homeProbe(s.homeProbe),
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	errc := make(chan error, 2)
	if s.metricsBind != "" {
		cs, _ := src.(discovery.CounterSource)
		var extra []prometheus.Collector
		if store != nil && sock != nil {
			extra = append(extra, agentmetrics.NewPlans(s.nodeName, sock, store))
		}
		srv, addr, err := serveMetrics(s.metricsBind, s.nodeName, a, cs, extra...)
		if err != nil {
			return err
		}
		log.Info("serving Prometheus metrics", "addr", addr, "path", "/metrics")
		go func() { errc <- srv.serve() }()
		defer srv.close()
	}
	go func() { errc <- a.Run(ctx) }()
	go func() {
		select {
		case <-a.Ready():
			if ok, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
				log.Warn("sd_notify failed", "err", err)
			} else if ok {
				log.Debug("told systemd we are ready")
			}
		case <-ctx.Done():
		}
	}()
	select {
	case err = <-errc:
	case <-ctx.Done():
		err = <-errc
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("agent: %w", err)
	}
	return nil
}

// homeProbe is the agent's HomeProbeInterval for --home-probe-interval d
// (0: never return home, which the agent spells negative).
func homeProbe(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
