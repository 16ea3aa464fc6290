package devcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/agent"
	"github.com/gin-topology/gin/internal/buildinfo"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/health"
	"github.com/gin-topology/gin/internal/master"
	"github.com/gin-topology/gin/internal/pki"
)

// MaxAgents bounds --dev-agents: every agent is a goroutine and a stream.
const MaxAgents = 2048

// Config describes the dev cluster.
type Config struct {
	// Bind is the master's gRPC address (default 127.0.0.1:5000).
	Bind string
	// Agents is the number of simulated nodes (default 4).
	Agents int
	// Names, when set, names the simulated nodes (and sets their number),
	// e.g. to match a Slurm cluster's node names; default node001, ...
	Names []string
	// Profile is the simulated node profile (default dgx-h100).
	Profile string
	// Fabric is the simulated scale-out network.
	Fabric sim.FabricSpec
	// Faults are injected into the simulated nodes before their agents
	// start (--dev-fault): NICs down or degraded, NVLinks down.
	Faults []Fault
	// HealthThresholds configure the master's node verdicts.
	HealthThresholds health.Thresholds
	// HeartbeatInterval of the agents (default 5s).
	HeartbeatInterval time.Duration
	// DataDir keeps the Raft data; empty means a temporary directory that is
	// removed on exit.
	DataDir string
	// HTTPBind serves the master's /metrics and /healthz; empty disables it.
	HTTPBind string
	Logger   *slog.Logger
	// TLSDir, when set, turns mutual TLS on: the CA and the certificates of
	// the master (master/dev-master), every agent (agent/<node>) and an
	// admin (admin.pem) are made there, or kept when present (tests add
	// more roles with pki or ginctl tls); the master serves mTLS and every
	// agent dials with its own certificate. gin-master --dev never sets it.
	TLSDir string
	// LeaderTasks and Collectors go to the master (master.Config): leader-only
	// loops such as gin-master --kube-labels, and their metrics.
	LeaderTasks []master.LeaderTask
	Collectors  []prometheus.Collector
}

// NodeName is the name of the i-th simulated node (0-based): node001, ...
func NodeName(i int) string { return fmt.Sprintf("node%03d", i+1) }

// Cluster is a running dev cluster.
type Cluster struct {
	Master  *master.Server
	Sources map[string]*sim.Source
	Nodes   []string
	dataDir string
	tempDir bool
}

// Start brings the cluster up and returns once every agent's inventory is
// committed. Stop it by cancelling ctx and calling Wait.
func Start(ctx context.Context, cfg Config) (*Cluster, <-chan error, error) {
	if cfg.Bind == "" {
		cfg.Bind = "127.0.0.1:5000"
	}
	if len(cfg.Names) > 0 {
		cfg.Agents = len(cfg.Names)
	}
	if cfg.Agents == 0 {
		cfg.Agents = 4
	}
	if cfg.Agents < 0 || cfg.Agents > MaxAgents {
		return nil, nil, fmt.Errorf("dev cluster: --dev-agents %d: want 1..%d", cfg.Agents, MaxAgents)
	}
	if cfg.Profile == "" {
		cfg.Profile = "dgx-h100"
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = agent.DefaultHeartbeatInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if (cfg.Fabric == sim.FabricSpec{}) {
		cfg.Fabric = sim.DefaultFabricSpec()
	}
	c := &Cluster{Sources: map[string]*sim.Source{}, dataDir: cfg.DataDir}
	if c.dataDir == "" {
		d, err := os.MkdirTemp("", "gin-dev-")
		if err != nil {
			return nil, nil, fmt.Errorf("dev cluster: temp dir: %w", err)
		}
		c.dataDir, c.tempDir = d, true
	}

	// The simulated nodes and their fabric.
	fnodes := make([]sim.FabricNode, cfg.Agents)
	for i := range fnodes {
		name := NodeName(i)
		if len(cfg.Names) > 0 {
			name = cfg.Names[i]
		}
		fnodes[i] = sim.FabricNode{Name: name, Profile: cfg.Profile, Index: i}
		c.Nodes = append(c.Nodes, name)
	}
	simc, err := sim.NewCluster("dev", &cfg.Fabric, fnodes)
	if err != nil {
		c.cleanup()
		return nil, nil, fmt.Errorf("dev cluster (--dev-profile, --dev-fabric): %w", err)
	}
	fabric := simc.Fabric
	for i, name := range c.Nodes {
		c.Sources[name] = simc.Sources[i]
	}
	for _, f := range cfg.Faults {
		src, ok := c.Sources[f.Node]
		if !ok {
			c.cleanup()
			return nil, nil, fmt.Errorf("dev cluster: --dev-fault %s: no node %q (nodes %s)", f, f.Node, strings.Join(c.Nodes, ","))
		}
		if err := f.apply(src); err != nil {
			c.cleanup()
			return nil, nil, fmt.Errorf("dev cluster: --dev-fault %s: %w", f, err)
		}
	}

	tlsc, err := newClusterTLS(cfg.TLSDir, cfg.Logger)
	if err != nil {
		c.cleanup()
		return nil, nil, err
	}
	adminDial, err := tlsc.dial(pki.Identity{Role: pki.RoleAdmin})
	if err != nil {
		c.cleanup()
		return nil, nil, err
	}
	m, err := master.New(master.Config{
		ID: MasterID, Bind: cfg.Bind, RaftBind: "127.0.0.1:0", DataDir: c.dataDir, Bootstrap: true,
		FastRaft: true, HeartbeatInterval: cfg.HeartbeatInterval, HTTPBind: cfg.HTTPBind, Logger: cfg.Logger.With("component", "master"),
		TLS:              tlsc.masterSource(),
		HealthThresholds: cfg.HealthThresholds,
		LeaderTasks:      cfg.LeaderTasks, Collectors: cfg.Collectors,
	})
	if err != nil {
		c.cleanup()
		return nil, nil, fmt.Errorf("dev cluster: %w", err)
	}
	c.Master = m
	done := make(chan error, 1)
	var wg sync.WaitGroup
	serveErr := make(chan error, 1)
	go func() { serveErr <- m.Serve(ctx) }()

	readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := m.WaitReady(readyCtx); err != nil {
		_ = m.Close()
		c.cleanup()
		return nil, nil, fmt.Errorf("dev cluster: %w", err)
	}
	conn, err := grpc.NewClient(m.Addr(), adminDial)
	if err != nil {
		_ = m.Close()
		c.cleanup()
		return nil, nil, fmt.Errorf("dev cluster: dial master: %w", err)
	}
	defer conn.Close()
	if _, err := ginv1.NewAdminServiceClient(conn).ImportFabric(readyCtx, &ginv1.ImportFabricRequest{Fabric: fabric}); err != nil {
		_ = m.Close()
		c.cleanup()
		return nil, nil, fmt.Errorf("dev cluster: import fabric: %w", err)
	}

	for _, name := range c.Nodes {
		agentDial, err := tlsc.dial(pki.Identity{Role: pki.RoleAgent, Name: name})
		if err != nil {
			_ = m.Close()
			c.cleanup()
			return nil, nil, err
		}
		a, err := agent.New(agent.Config{
			NodeName: name, Masters: []string{m.Addr()}, HeartbeatInterval: cfg.HeartbeatInterval,
			Source: c.Sources[name], Logger: cfg.Logger.With("component", "agent"),
			DialOptions: []grpc.DialOption{agentDial},
			Version:     buildinfo.String(),
		})
		if err != nil {
			_ = m.Close()
			c.cleanup()
			return nil, nil, fmt.Errorf("dev cluster: agent %s: %w", name, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				cfg.Logger.Warn("agent stopped", "node", name, "err", err)
			}
		}()
	}
	if err := waitRegistered(readyCtx, ginv1.NewTopologyServiceClient(conn), len(c.Nodes)); err != nil {
		_ = m.Close()
		wg.Wait()
		c.cleanup()
		return nil, nil, fmt.Errorf("dev cluster: %w", err)
	}
	go func() {
		err := <-serveErr
		wg.Wait()
		if cerr := m.Close(); cerr != nil && err == nil {
			err = cerr
		}
		c.cleanup()
		done <- err
	}()
	return c, done, nil
}

// waitRegistered polls until n nodes are registered.
func waitRegistered(ctx context.Context, cl ginv1.TopologyServiceClient, n int) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		resp, err := cl.ListNodes(ctx, &ginv1.ListNodesRequest{})
		if err == nil && len(resp.GetNodes()) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			got := 0
			if resp != nil {
				got = len(resp.GetNodes())
			}
			return fmt.Errorf("waiting for %d agents to register (%d did): %w", n, got, ctx.Err())
		case <-t.C:
		}
	}
}

// DataDir is where the Raft data lives.
func (c *Cluster) DataDir() string { return c.dataDir }

func (c *Cluster) cleanup() {
	if c.tempDir {
		_ = os.RemoveAll(c.dataDir)
	}
}
