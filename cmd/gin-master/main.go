// Command gin-master is GIN's replicated topology service: it receives
// inventories from gin-agents, replicates them with Raft, keeps the cluster's
// topology graph and answers ginctl, schedulers and the NCCL tuner plugin.
// `gin-master --dev` runs a whole simulated cluster on loopback.
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
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gin-topology/gin/internal/buildinfo"
	"github.com/gin-topology/gin/internal/devcluster"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/health"
	"github.com/gin-topology/gin/internal/hostaddr"
	"github.com/gin-topology/gin/internal/master"
	"github.com/gin-topology/gin/internal/masteraddr"
	"github.com/gin-topology/gin/internal/memlimit"
	"github.com/gin-topology/gin/internal/pki"
	ginraft "github.com/gin-topology/gin/internal/raft"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are gin-master's flags: cfg holds every flag that maps 1:1 onto
// a master knob (bound to its field, defaults of master.DefaultConfig,
// unit translations done by the flag values of flagvalue.go); the rest are
// parsed or derived at start (masterConfig, runServer) or configure
// something besides the master.
type options struct {
	cfg              master.Config
	bootstrap        bool
	join             string
	memoryLimit      string
	logLevel         string
	dev              bool
	devAgents        int
	devProfile       string
	devFabric        string
	devNodes         string
	devFaults        []string
	healthThresholds []string
	tls              pki.Files   // --tls-* (else GIN_TLS_*)
	insecure         bool        // plaintext without TLS, by choice
	recoverPeers     string      // parsed into cfg.RecoverPeers by checkRecoverFlags
	kube             kubeOptions // --kube-*
}

// checkRecoverFlags refuses --recover and --recover-peers where they
// cannot apply and parses the peers (usage errors: nothing is touched).
func checkRecoverFlags(o *options) error {
	if o.dev && o.cfg.Recover {
		return errors.New("--recover applies to a real master's --data-dir, not to --dev")
	}
	if o.recoverPeers != "" && !o.cfg.Recover {
		return errors.New("--recover-peers needs --recover")
	}
	if !o.cfg.Recover {
		return nil
	}
	peers, err := ginraft.ParseRecoverPeers(o.recoverPeers)
	if err != nil {
		return fmt.Errorf("--recover-peers: %w", err)
	}
	for _, p := range peers {
		if p.ID == o.cfg.ID {
			return fmt.Errorf("--recover-peers names this master (%s); list only the other survivors", p.ID)
		}
	}
	o.cfg.RecoverPeers = peers
	return nil
}

// Exit codes besides 0 and 1 (any other error, which a restart may cure).
// None is 2: the Go runtime exits 2 on a panic (hashicorp/raft panics when
// it cannot persist its term), and a panicking master must be restarted.
const (
	// exitUsage (EX_USAGE of sysexits.h) is a bad flag or value; the unit
	// does not restart it.
	exitUsage = 64
	// exitConfig (EX_CONFIG of sysexits.h) is a configuration that cannot
	// serve as it is: no TLS and no --insecure, TLS files that do not load
	// or name another master. A restart cannot cure it; the systemd unit
	// lists it in RestartPreventExitStatus so it fails instead of looping.
	exitConfig = 78
	// exitLogStore (EX_TEMPFAIL) is the Raft log store failing a write
	// (the data dir full, an I/O error), or the data dir full at start:
	// the log cannot take writes again in this process, and a restart
	// (with space back) reopens it with every acknowledged write. The unit
	// restarts it.
	exitLogStore = 75
	// exitDataDir (EX_DATAERR) is a data dir whose state cannot be rebuilt:
	// its log was compacted and no readable snapshot holds the entries
	// before it. A restart reads the same files; the unit does not
	// restart it, and the journal names the files and the way out.
	exitDataDir = 65
)

// configError is an error the operator must fix before the master can
// start (exit exitConfig).
type configError struct{ error }

func (e configError) Unwrap() error { return e.error }

// checkTLSChoice is the gate of a real (non --dev) master: it serves mutual
// TLS, or plaintext only when --insecure says so.
func checkTLSChoice(o options, fromEnv bool) error {
	if o.insecure && o.tls.Given() {
		where := "--tls-*"
		if fromEnv {
			where = "GIN_TLS_CA/GIN_TLS_CERT/GIN_TLS_KEY in the environment"
		}
		return fmt.Errorf("--insecure and %s exclude each other: leave out --insecure to serve mutual TLS, or the TLS files to serve plaintext", where)
	}
	if !o.insecure && !o.tls.Given() {
		name := o.cfg.ID
		if name == "" {
			name = "ID"
		}
		return configError{fmt.Errorf("no TLS certificates: a master serves mutual TLS with --tls-ca, --tls-cert and --tls-key (or GIN_TLS_CA, GIN_TLS_CERT, GIN_TLS_KEY), made with `ginctl tls ca create --dir /etc/gin` and `ginctl tls cert create --dir /etc/gin --role master --name %s --dns HOST` (docs/SECURITY.md); or give --insecure to serve plaintext gRPC and Raft that anyone who reaches the ports can read and rewrite", name)}
	}
	return nil
}

// usageError is a bad flag or value (exit exitUsage), found before
// anything is created.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// run is main without the process: it parses args, runs the master (or the
// dev cluster) and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	var o options
	cmd := newCommand(&o, stdout, stderr)
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	return exitStatus(cmd.ExecuteContext(context.Background()), stderr)
}

// newCommand is gin-master's command with every flag bound to o.
func newCommand(o *options, stdout, stderr io.Writer) *cobra.Command {
	hostname, _ := os.Hostname()
	cmd := &cobra.Command{
		Use:   "gin-master",
		Short: "GIN master: the cluster's replicated GPU topology service",
		Long: `gin-master receives node inventories from gin-agents over gRPC, replicates them
with Raft (hashicorp/raft, log in <data-dir>/wal, snapshots in <data-dir>/snapshots),
builds the cluster's topology graph and answers ginctl and the NCCL tuner plugin.
Every master of a cluster holds agent sessions: a follower relays its agents'
inventories to the leader and reports their heartbeats to it every half
--heartbeat-interval; the leader marks nodes down after --missed-heartbeats.

A fresh --data-dir is bootstrapped as a single-voter cluster (--bootstrap).

A master serves mutual TLS (TLS 1.3, client certificates of the cluster CA,
roles checked): --tls-ca, --tls-cert, --tls-key (or GIN_TLS_CA, GIN_TLS_CERT,
GIN_TLS_KEY), made with ginctl tls ca create and ginctl tls cert create. Without
them it refuses to start (exit 78) unless --insecure is given: plaintext, open to
anyone who reaches the ports, warned at every start. Clients (gin-agent, ginctl)
dial plaintext when they are given no certificates; the master is the gate.

Exit status: 0 after SIGINT or SIGTERM; 64 for bad flags or values and 78 for
a configuration that cannot serve (no TLS and no --insecure, TLS files that do
not load), both not restarted by the systemd unit; 75 when the Raft log store
failed a write or the data dir is full at start (restarted); 1 for any other
error. 2 is a Go panic (restarted).

--dev starts a complete cluster in this process on loopback instead: a master on
127.0.0.1:5000 (or --bind) with its data in a temporary directory, and
--dev-agents simulated nodes of --dev-profile on a simulated leaf/spine fabric.
Then try: ginctl nodes; ginctl topo -m`,
		Example: `  export GIN_TLS_CA=/etc/gin/ca.pem GIN_TLS_CERT=/etc/gin/master-m1.pem GIN_TLS_KEY=/etc/gin/master-m1-key.pem
  gin-master --node-id m1 --bootstrap-expect 3 --join m1,m2,m3   # on m1, m2 and m3 alike
  gin-master --node-id m1 --data-dir /var/lib/gin-master          # a single master
  gin-master --node-id m1 --insecure                              # plaintext: a lab, never a cluster
  gin-master --dev
  gin-master --dev --dev-agents 18 --dev-profile gb200-nvl72`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, ml, err := checkFlags(cmd, o, stderr)
			if err != nil {
				return usageError{err}
			}
			applyMemoryLimit(ml, log)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if o.dev {
				return startDev(ctx, cmd, *o, log, stdout)
			}
			return startMaster(ctx, *o, log)
		},
	}
	bindFlags(cmd.Flags(), o, hostname)
	cmd.Version = buildinfo.String()
	cmd.SetVersionTemplate(buildinfo.VersionTemplate("gin-master"))
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	return cmd
}

// checkFlags runs the checks that need no data dir and no network: --dev-*
// need --dev, --log-level, --recover and --recover-peers, --kube-*,
// --memory-limit. Every error is a usage error; nothing was created.
func checkFlags(cmd *cobra.Command, o *options, stderr io.Writer) (*slog.Logger, memlimit.Setting, error) {
	if err := devFlagsNeedDev(cmd, o.dev); err != nil {
		return nil, memlimit.Setting{}, err
	}
	log, err := newLogger(stderr, o.logLevel)
	if err != nil {
		return nil, memlimit.Setting{}, err
	}
	if err := checkRecoverFlags(o); err != nil {
		return nil, memlimit.Setting{}, err
	}
	if err := o.kube.check(cmd.Flags()); err != nil {
		return nil, memlimit.Setting{}, err
	}
	ml, err := memlimit.Parse(o.memoryLimit)
	if err != nil {
		return nil, memlimit.Setting{}, fmt.Errorf("--memory-limit: %w", err)
	}
	return log, ml, nil
}

// applyMemoryLimit sets the Go heap's soft limit of --memory-limit and
// logs the limit in effect; a cgroup that cannot be read is a warning, not
// an error (the limit falls back to GOMEMLIMIT or none).
func applyMemoryLimit(ml memlimit.Setting, log *slog.Logger) {
	res, err := ml.Apply(memlimit.Host())
	if err != nil {
		log.Warn("memory limit not derived from the cgroup", "err", err)
	}
	log.Info("memory limit", "limit", memlimit.String(res.Bytes), "bytes", res.Bytes, "from", res.Source)
}

// startDev runs the dev cluster of --dev; its flags' errors (--tls-* given,
// a bad --dev-* value) are usage errors found before anything starts.
func startDev(ctx context.Context, cmd *cobra.Command, o options, log *slog.Logger, stdout io.Writer) error {
	if o.tls.Given() {
		return usageError{errors.New("--tls-* do not apply to --dev (a plaintext cluster on loopback); leave them out, or run a real master")}
	}
	cfg, err := devConfig(cmd, o, log)
	if err != nil {
		return usageError{err}
	}
	return runDev(ctx, cfg, o, log, stdout)
}

// startMaster runs a real master: the TLS files (flags, else GIN_TLS_*)
// or --insecure, exactly one of them (checkTLSChoice: a usage error when
// both are given, a configError when neither), then runServer.
func startMaster(ctx context.Context, o options, log *slog.Logger) error {
	flagsGiven := o.tls.Given()
	o.tls = pki.FilesFromEnv(o.tls, os.Getenv)
	if err := checkTLSChoice(o, !flagsGiven && o.tls.Given()); err != nil {
		if !errors.As(err, new(configError)) {
			return usageError{err}
		}
		return err
	}
	return runServer(ctx, o, log)
}

// exitStatus prints err (nil: nothing) and returns gin-master's exit status
// for it: exitConfig for a configError, else exitDataDir for a data dir
// holding an incomplete state, else exitLogStore for a failed log store,
// else exitUsage for a usage error or a positional argument, else 1.
func exitStatus(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	code := 1
	if errors.As(err, new(usageError)) || strings.HasPrefix(err.Error(), "unknown command ") {
		code = exitUsage // a positional argument: gin-master takes none
	}
	if logStoreFailed(err) {
		code = exitLogStore
	}
	if errors.Is(err, ginraft.ErrIncompleteState) {
		code = exitDataDir
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		err = fmt.Errorf("%w (another gin-master, or another program, uses that port: stop it or choose another --bind, --raft-bind or --http-bind)", err)
	}
	fmt.Fprintf(stderr, "gin-master: %v\n", err)
	if errors.As(err, new(configError)) {
		code = exitConfig
	}
	return code
}

// bindFlags binds every flag of gin-master to its field of o, a master
// knob's to its field of o.cfg; the defaults of the master's knobs are
// master.DefaultConfig's.
func bindFlags(f *pflag.FlagSet, o *options, hostname string) {
	d := master.DefaultConfig() // every default of a master knob, in one place
	o.cfg = d                   // the knobs gin-master has no flag for keep their defaults
	f.StringVar(&o.cfg.ID, "node-id", hostname, "Raft server id of this master (stable across restarts)")
	f.StringVar(&o.cfg.Bind, "bind", ":5000", "gRPC address for agents and clients (127.0.0.1:5000 with --dev)")
	f.StringVar(&o.cfg.Advertise, "advertise", "", "gRPC address given to clients as leader hint (default: the bound address; on every interface, this host's default-route address)")
	f.StringVar(&o.cfg.HTTPBind, "http-bind", "127.0.0.1:5002", "HTTP address of /metrics (Prometheus), /healthz and the web view /ui/ (loopback by default: give :5002 for a Prometheus on another host); empty disables it (off with --dev unless given)")
	f.StringVar(&o.cfg.WebConfigFile, "web-config-file", "", "TLS and authentication of --http-bind: a Prometheus exporter-toolkit web config (tls_server_config, basic_auth_users); empty: plain HTTP. On a cluster with TLS the web view answers only over TLS to a client certificate of the cluster (reader or above)")
	f.StringVar(&o.cfg.RaftBind, "raft-bind", ":5001", "Raft TCP address (127.0.0.1 with a free port with --dev)")
	f.StringVar(&o.cfg.RaftAdvertise, "raft-advertise", "", "Raft address the other masters dial (host:port, resolved at start; default: --raft-bind, and when that listens on every interface (:5001, 0.0.0.0, ::) this host's default-route address, else its only global address)")
	f.DurationVar(&o.cfg.RaftTuning.HeartbeatTimeout, "raft-heartbeat-timeout", 0, "a follower that hears nothing from the leader this long starts an election (0: Raft's default, 1s)")
	f.DurationVar(&o.cfg.RaftTuning.ElectionTimeout, "raft-election-timeout", 0, "a candidate without a quorum this long starts a new election (0: Raft's default, 1s)")
	f.DurationVar(&o.cfg.RaftTuning.LeaderLeaseTimeout, "raft-leader-lease-timeout", 0, "a leader without contact to a quorum this long steps down; at most the heartbeat timeout (0: Raft's default, 500ms)")
	f.Uint64Var(&o.cfg.RaftTuning.SnapshotThreshold, "snapshot-threshold", 0, "Raft log entries since the last snapshot that trigger a new one (0: 8192)")
	f.Uint64Var(&o.cfg.RaftTuning.SnapshotBytes, "snapshot-bytes", 0, "Raft log bytes appended since the last snapshot that trigger a new one, besides --snapshot-threshold entries (0: 256 MiB; at least 65536)")
	f.DurationVar(&o.cfg.RaftTuning.SnapshotInterval, "snapshot-interval", 0, "how often the snapshot threshold is checked (0: Raft's default, 2m)")
	f.Uint64Var(&o.cfg.RaftTuning.TrailingLogs, "trailing-logs", 0, "log entries kept after a snapshot, so a lagging master catches up without a snapshot transfer (0: Raft's default, 10240)")
	f.StringVar(&o.cfg.DataDir, "data-dir", "/var/lib/gin-master", "directory for the Raft log and snapshots (a temporary one with --dev)")
	f.BoolVar(&o.bootstrap, "bootstrap", true, "bootstrap a single-voter cluster when --data-dir holds no Raft state (off when --join or --bootstrap-expect is given)")
	f.IntVar(&o.cfg.BootstrapExpect, "bootstrap-expect", 0, "form a new cluster once this many fresh masters (found through --join) see each other; 1 = --bootstrap")
	f.StringVar(&o.join, "join", "", "other masters' client addresses (host[:port],...): join their cluster, retried until it works; the same command line serves first boot, restart and scale-up (a master that is not a member yet joins once an admin ran ginctl members add ID)")
	f.DurationVar(&o.cfg.DeadServerTimeout, "dead-server-timeout", 0, "the leader removes a master that failed heartbeats this long, keeping at least two healthy voters; 0 disables (a removed master rejoins through --join when it comes back)")
	f.DurationVar(&o.cfg.HeartbeatInterval, "heartbeat-interval", d.HeartbeatInterval, "heartbeat interval agents are told to use")
	f.IntVar(&o.cfg.MissedHeartbeats, "missed-heartbeats", d.MissedHeartbeats, "missed heartbeats after which a node is marked down")
	f.Var(uint32Value{&o.cfg.MaxStreamsPerConn}, "max-streams-per-conn", "concurrent gRPC streams one client connection may hold (HTTP/2 MAX_CONCURRENT_STREAMS); more wait")
	f.IntVar(&o.cfg.MaxNodes, "max-nodes", d.MaxNodes, "the most nodes registered; a new node's inventory past it is refused (RESOURCE_EXHAUSTED)")
	f.IntVar(&o.cfg.MaxHandshakes, "max-handshakes", d.MaxHandshakes, "agent handshakes (Hello until the agent is in sync) served at once; more wait in --handshake-queue (a whole-cluster restart reattaches at the rate the master commits while reads are answered)")
	f.Float64Var(&o.cfg.HandshakeRate, "handshake-rate", 0, fmt.Sprintf("agent Hellos admitted per second (a token bucket of burst --max-handshakes; the Hellos past it wait in --handshake-queue, and one whose wait would pass --hello-timeout is refused with a retry hint of the queue's wait); 0: %d per CPU (GOMAXPROCS), %g here", master.HandshakeRatePerCPU, master.DefaultHandshakeRate()))
	f.Var(handshakeQueueValue{&o.cfg.HandshakeQueue}, "handshake-queue", "agent Hellos that wait (at most --hello-timeout) for a --max-handshakes slot; past it a Hello is refused with RESOURCE_EXHAUSTED and a retry hint; 0: none waits")
	f.IntVar(&o.cfg.MaxPlans, "max-plans", d.MaxPlans, "the most job plans pinned; a new job's plan past it is refused (RESOURCE_EXHAUSTED)")
	f.Var(mibValue{&o.cfg.MinFreeBytes}, "data-dir-min-free-mib", "MiB kept free under --data-dir: below it the leader refuses writes (RESOURCE_EXHAUSTED naming the dir) and a follower stops appending, until space returns; should the Raft log fail a write anyway, gin-master exits with status 75 for systemd to restart it")
	f.Float64Var(&o.cfg.AgentLogRate, "agent-log-rate", d.AgentLogRate, "agent attach/detach log lines per second after the burst; the rest are counted (gin_master_agent_log_lines_suppressed_total)")
	f.IntVar(&o.cfg.AgentLogBurst, "agent-log-burst", d.AgentLogBurst, "agent attach/detach log lines logged at once before --agent-log-rate applies")
	f.StringVar(&o.memoryLimit, "memory-limit", memlimit.Auto, "soft memory limit of the Go heap (900MiB, 2GiB, off): the garbage collector runs more often near it; auto: 90% of the cgroup's memory limit (container, systemd MemoryMax=) if any, else GOMEMLIMIT or none")
	f.DurationVar(&o.cfg.HelloTimeout, "hello-timeout", d.HelloTimeout, "an agent session that sends no hello this long after opening is ended (DEADLINE_EXCEEDED)")
	f.StringVar(&o.tls.CA, "tls-ca", "", "mTLS: the cluster CA file (default $GIN_TLS_CA); with --tls-cert and --tls-key every gRPC call needs a client certificate of this CA and a role allowed by the table (docs/SECURITY.md)")
	f.StringVar(&o.tls.Cert, "tls-cert", "", "mTLS: this master's certificate, spiffe://gin/master/<node-id> (default $GIN_TLS_CERT)")
	f.StringVar(&o.tls.Key, "tls-key", "", "mTLS: its key (default $GIN_TLS_KEY)")
	f.BoolVar(&o.insecure, "insecure", false, "serve plaintext gRPC and Raft without authentication (anyone who reaches the ports can read and rewrite the cluster; warned at every start); without it a master needs --tls-ca, --tls-cert and --tls-key")
	f.BoolVar(&o.cfg.Recover, "recover", false, "after a loss of quorum: rewrite the Raft configuration in --data-dir to this master alone (plus --recover-peers), commit its whole log, then serve; every other master must be stopped and rejoin with a wiped data dir (docs/OPERATIONS.md, Recovering from lost quorum)")
	f.StringVar(&o.recoverPeers, "recover-peers", "", "with --recover: other survivors in the recovered configuration, id=raft-host:port,... (each recovered with the same list)")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	o.kube.flags(f)
	f.BoolVar(&o.dev, "dev", false, "run a complete simulated cluster on loopback (master + agents)")
	f.IntVar(&o.devAgents, "dev-agents", 4, fmt.Sprintf("with --dev: number of simulated nodes (1..%d)", devcluster.MaxAgents))
	f.StringVar(&o.devNodes, "dev-nodes", "", "with --dev: names of the simulated nodes as a Slurm hostlist (e.g. 'n[1-4]' to match a Slurm cluster); sets their number")
	f.StringVar(&o.devProfile, "dev-profile", "dgx-h100", "with --dev: simulated node profile: "+strings.Join(sim.Profiles(), ", "))
	f.StringVar(&o.devFabric, "dev-fabric", sim.DefaultFabricSpec().String(), "with --dev: simulated rail-optimised fat tree: leaf-groups=N,spines=N,oversub=X")
	f.StringArrayVar(&o.healthThresholds, "health-threshold", nil, "a node-verdict setting, repeatable (docs/HEALTH.md): CHECK=pass|warn|fail (a check's severity; pass turns it off), xid-fatal=LIST, xid-ignore=LIST, min-peers=N")
	f.StringArrayVar(&o.devFaults, "dev-fault", nil, "with --dev: a simulated fault, repeatable: NODE/HCA[:PORT]=down|RATE (NIC down or retrained at RATE Gb/s), NODE/GPU<i>/nvlink<l>=down, NODE/GPU<i>/xid=N (the GPU reported XID N)")
}

// logStoreFailed reports whether err is the Raft log store failing a
// write, or the data dir full at start: a restart (with space back) is the
// cure, so gin-master exits with exitLogStore for systemd.
func logStoreFailed(err error) bool {
	return errors.Is(err, ginraft.ErrLogStoreFailed) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// runServer runs a real master until ctx ends. Every flag is checked
// before the data dir is created: the knobs (masterConfig), the advertised
// addresses (deriveAdvertise), the TLS files (serverTLS), --recover and the
// --kube-* tasks; then the data dir is created, the master built and
// served.
func runServer(ctx context.Context, o options, log *slog.Logger) error {
	cfg, err := masterConfig(o)
	if err != nil {
		return usageError{err}
	}
	if err := deriveAdvertise(&o, hostaddr.System{}, log); err != nil {
		return err
	}
	if o.insecure {
		log.Warn("INSECURE: --insecure: gRPC and Raft are plaintext and unauthenticated; anyone who reaches these ports can read, rewrite or stop the cluster (docs/SECURITY.md: turn mutual TLS on with --tls-ca, --tls-cert, --tls-key)",
			"grpc", firstNonEmpty(o.cfg.Advertise, o.cfg.Bind), "raft", firstNonEmpty(o.cfg.RaftAdvertise, o.cfg.RaftBind))
	}
	tlsSrc, err := serverTLS(o, log)
	if err != nil {
		return err
	}
	if o.cfg.Recover {
		if err := ginraft.CheckRecoverable(o.cfg.DataDir); err != nil {
			return fmt.Errorf("--recover: %w (nothing was changed)", err)
		}
		log.Warn("--recover: the Raft configuration in the data dir will be rewritten to this master (plus --recover-peers) and its whole log committed", "data_dir", o.cfg.DataDir, "node_id", o.cfg.ID, "recover_peers", o.recoverPeers)
	}
	tasks, collectors, err := o.kube.tasks(log)
	if err != nil {
		return configError{err}
	}
	if err := os.MkdirAll(o.cfg.DataDir, 0o750); err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	cfg.Advertise, cfg.RaftAdvertise = o.cfg.Advertise, o.cfg.RaftAdvertise // derived after masterConfig
	cfg.Bootstrap, cfg.TLS = bootstrapWanted(o, cfg.Join), tlsSrc
	cfg.LeaderTasks, cfg.Collectors, cfg.Logger = tasks, collectors, log
	s, err := master.New(cfg)
	if err != nil {
		return err
	}
	if tlsSrc != nil {
		log.Info("gRPC with mTLS (TLS 1.3, client certificates required, roles checked)", "identity", tlsSrc.Identity().String())
		log.Info("Raft over TLS: only master certificates of the cluster CA may connect to --raft-bind")
	}
	err = s.Serve(ctx)
	if cerr := s.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// masterConfig is the master's configuration of the flags, validated
// (master.Config.Validate, --node-id, --join, --health-threshold); the
// addresses derived at start, the TLS source, the bootstrap choice and
// the tasks are added by runServer. It touches nothing, and its errors
// are usage errors (exit 64).
func masterConfig(o options) (master.Config, error) {
	if o.cfg.ID == "" {
		return master.Config{}, errors.New("--node-id is empty and the host name is unknown")
	}
	if err := ginraft.ValidateServerID(o.cfg.ID); err != nil {
		return master.Config{}, fmt.Errorf("--node-id: %w", err)
	}
	var join []string
	if o.join != "" {
		var err error
		if join, err = masteraddr.Parse(o.join); err != nil {
			return master.Config{}, fmt.Errorf("--join: %w", err)
		}
	}
	cfg := o.cfg
	cfg.Join = join
	if err := cfg.Validate(); err != nil {
		return master.Config{}, err
	}
	th, err := healthThresholds(o.healthThresholds)
	if err != nil {
		return master.Config{}, err
	}
	cfg.HealthThresholds = th
	return cfg, nil
}

// serverTLS loads the master's TLS source of --tls-* (nil without them)
// and checks that it is a master certificate for --node-id naming the
// advertised host; every error is a configError (exit 78).
func serverTLS(o options, log *slog.Logger) (*pki.Source, error) {
	if !o.tls.Given() {
		return nil, nil
	}
	src, err := pki.NewSource(o.tls, log)
	if err != nil {
		return nil, configError{err}
	}
	if id := src.Identity(); id.Role != pki.RoleMaster || id.Name != o.cfg.ID {
		return nil, configError{fmt.Errorf("--tls-cert %s is for %s; this master needs a master certificate for --node-id %q (ginctl tls cert create --role master --name %s)", o.tls.Cert, id, o.cfg.ID, o.cfg.ID)}
	}
	if err := certCoversAdvertised(src, o); err != nil {
		return nil, configError{err}
	}
	return src, nil
}

// bootstrapWanted is whether a fresh data dir bootstraps a single-voter
// cluster: --bootstrap, unless --bootstrap-expect > 1 or --join (without
// --bootstrap-expect 1) forms or joins a cluster instead; --bootstrap-expect
// 1 always does.
func bootstrapWanted(o options, join []string) bool {
	if o.cfg.BootstrapExpect == 1 {
		return true
	}
	if o.cfg.BootstrapExpect > 1 || len(join) > 0 {
		return false
	}
	return o.bootstrap
}

// devFlagsNeedDev refuses --dev-* flags without --dev: they configure the
// simulated cluster, and without --dev they would silently start a real
// master instead.
func devFlagsNeedDev(cmd *cobra.Command, dev bool) error {
	if dev {
		return nil
	}
	var given []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if strings.HasPrefix(f.Name, "dev-") {
			given = append(given, "--"+f.Name)
		}
	})
	if len(given) > 0 {
		return fmt.Errorf("%s configures the simulated cluster of --dev: add --dev, or leave it out to run a real master", strings.Join(given, ", "))
	}
	return nil
}

// deriveAdvertise fills in --raft-advertise (and --advertise, the client
// address given as leader hint) when the master listens on every interface
// and none was given: Raft peers cannot dial 0.0.0.0. It runs before the
// data dir is touched, so a host where no address can be chosen fails with
// a message naming the flag and changes nothing.
func deriveAdvertise(o *options, src hostaddr.Source, log *slog.Logger) error {
	if o.cfg.RaftAdvertise == "" {
		unspec, err := hostaddr.Unspecified(o.cfg.RaftBind)
		if err != nil {
			return fmt.Errorf("--raft-bind: %w", err)
		}
		if unspec {
			adv, err := hostaddr.Derive(o.cfg.RaftBind, src)
			if err != nil {
				return fmt.Errorf("--raft-bind %s listens on every interface and the address other masters should dial cannot be derived (%w); set --raft-advertise HOST:PORT", o.cfg.RaftBind, err)
			}
			o.cfg.RaftAdvertise = adv
			log.Info("raft advertise address derived from the default route (set --raft-advertise to choose another)", "raft_advertise", adv)
		}
	}
	if o.cfg.Advertise == "" {
		if unspec, err := hostaddr.Unspecified(o.cfg.Bind); err == nil && unspec {
			// The client address is only a hint; a port 0 or a host without
			// a usable address keeps the bound address, as before.
			if adv, err := hostaddr.Derive(o.cfg.Bind, src); err == nil {
				o.cfg.Advertise = adv
			}
		}
	}
	return nil
}

// certCoversAdvertised checks that the master's certificate names the host
// clients are sent to as leader hint (--advertise, or the bound address):
// they verify it, and a missing SAN would fail only later, at every
// connection. (Raft peers check the certificate's role, not its names.)
func certCoversAdvertised(src *pki.Source, o options) error {
	for _, a := range []struct{ flag, addr string }{
		{"--advertise", firstNonEmpty(o.cfg.Advertise, o.cfg.Bind)},
	} {
		host, _, err := net.SplitHostPort(a.addr)
		if err != nil || host == "" {
			continue
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			continue
		}
		if err := src.CoversHost(host); err != nil {
			return fmt.Errorf("%s %s: the TLS certificate does not name %s, and the clients and masters that dial it check that (%v); reissue it with ginctl tls cert create --role master --name %s --ip/--dns %s", a.flag, a.addr, host, err, o.cfg.ID, host)
		}
	}
	return nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// healthThresholds parses the --health-threshold values.
func healthThresholds(kvs []string) (health.Thresholds, error) {
	var th health.Thresholds
	for _, kv := range kvs {
		if err := th.Set(kv); err != nil {
			return health.Thresholds{}, fmt.Errorf("--health-threshold: %w", err)
		}
	}
	return th, nil
}
