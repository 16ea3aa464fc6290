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
	"os"
	"os/signal"
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
	"github.com/gin-topology/gin/internal/discovery/sources"
	"github.com/gin-topology/gin/internal/inventory"
	"github.com/gin-topology/gin/internal/jsonout"
	"github.com/gin-topology/gin/internal/pki"
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
	// exitConfig (EX_CONFIG) is TLS files that do not load, are expired or
	// name another node: a restart reads the same files, so the unit does
	// not restart it (it fails, and the journal says which file).
	exitConfig = 78
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

// configError is a configuration the operator must fix before the agent
// can start (exit 78).
type configError struct{ error }

func (e configError) Unwrap() error { return e.error }

// usageError is a bad flag, value or environment variable (exit 64).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// settings are the validated config with the environment applied.
type settings struct {
	config
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
	if _, ok := errors.AsType[configError](err); ok {
		return exitConfig
	}
	return exitError
}

// execute does what the validated settings ask for.
func execute(ctx context.Context, s settings, stdout, stderr io.Writer) error {
	s.logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: s.logLevel}))
	if s.Once {
		return runOnce(ctx, s, stdout)
	}
	return runAgent(ctx, s, stderr)
}

// newCommand builds the command; exec runs with the validated settings.
func newCommand(getenv func(string) string, stdout, stderr io.Writer,
	exec func(context.Context, settings, io.Writer, io.Writer) error,
) *cobra.Command {
	host, _ := os.Hostname()
	c := defaultConfig(host)
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
discovery or the agent fails, 64 for bad flags, values or environment,
78 for TLS files that do not load, have expired or name another node
(neither is restarted by the unit; 2 is a Go panic, which systemd restarts).`,
		Example: `  gin-agent --once -o json --source auto | jq '.gpus | length'
  gin-agent --master gin-m1,gin-m2:5000,[fd00::3]:5000
  GIN_MASTER_HOST=gin-m1 gin-agent --source file:/var/lib/gin/inventory.json`,
		Version:       buildinfo.String(),
		Args:          noArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := resolve(cmd.Flags(), c, getenv)
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

	bindFlags(cmd.Flags(), &c)
	// Cobra's help and version flags, declared here so their help text is ours.
	f := cmd.Flags()
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

// dialCredentials are the agent's credentials towards the masters: mTLS
// with an agent certificate naming this node when --tls-* are given,
// plaintext (with a warning) otherwise.
func dialCredentials(s settings, log *slog.Logger) (grpc.DialOption, error) {
	if !s.TLS.Given() {
		log.Warn("connection to the master is NOT encrypted (no --tls-ca/--tls-cert/--tls-key)", slog.Any("masters", s.Agent.Masters))
		return grpc.WithTransportCredentials(insecure.NewCredentials()), nil
	}
	src, err := pki.NewSource(s.TLS, log)
	if err != nil {
		return nil, configError{err}
	}
	if id := src.Identity(); id.Role != pki.RoleAgent || id.Name != s.Agent.NodeName {
		return nil, configError{fmt.Errorf("--tls-cert %s is for %s; this agent needs an agent certificate for node %q (ginctl tls cert create --role agent --name %s)", s.TLS.Cert, id, s.Agent.NodeName, s.Agent.NodeName)}
	}
	log.Info("mTLS to the masters", "identity", src.Identity().String())
	return grpc.WithTransportCredentials(pki.ClientCredentialsFrom(src)), nil
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
	src, err := sources.Open(s.Source, sources.Options{NodeName: s.Agent.NodeName, Auto: sources.AutoOptions{
		ComputeHCAs: s.ComputeHCAs, StorageHCAs: s.StorageHCAs, LLDPCommand: s.LLDPCommand, Logger: s.logger,
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
	if s.Output == "yaml" {
		if err := jsonout.WriteYAML(stdout, inv); err != nil {
			return fmt.Errorf("write inventory: %w", err)
		}
		return nil
	}
	if s.Output == "json" {
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
	src = sources.WithHealth(src, s.LinkErrors)
	creds, err := dialCredentials(s, log)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	store, sock, waitPlans, err := startPlans(ctx, s.Plans, s.Agent.Masters, creds, log)
	if err != nil {
		return err
	}
	defer func() { cancel(); waitPlans() }()
	var plans agent.PlanSink
	if store != nil {
		plans = store
	}
	cfg := s.Agent
	cfg.Plans, cfg.Source, cfg.Logger = plans, src, log
	cfg.DialOptions, cfg.Version, cfg.FabricScanner = []grpc.DialOption{creds}, buildinfo.String(), scanner(s.ScanCommand)
	a, err := agent.New(cfg)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	live, stopLive, err := startLive(ctx, sock, s.Agent.NodeName, s.Agent.Masters, creds, a.Inventory, log)
	if err != nil {
		return err
	}
	defer stopLive()
	errc := make(chan error, 2)
	if s.MetricsBind != "" {
		cs, _ := src.(discovery.CounterSource)
		var extra []prometheus.Collector
		if store != nil && sock != nil {
			extra = append(extra, agentmetrics.NewPlans(s.Agent.NodeName, sock, store))
		}
		if live != nil {
			extra = append(extra, agentmetrics.NewLive(s.Agent.NodeName, live))
		}
		srv, addr, err := serveMetrics(s.MetricsBind, s.Agent.NodeName, a, cs, extra...)
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
