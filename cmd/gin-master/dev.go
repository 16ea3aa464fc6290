package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gin-topology/gin/internal/devcluster"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/inventory"
)

// devConfig checks the --dev-* flags and turns them into the dev cluster's
// configuration; every error is a usage error (exit 64), found before
// anything starts.
func devConfig(cmd *cobra.Command, o options, log *slog.Logger) (devcluster.Config, error) {
	spec, err := sim.ParseFabricSpec(o.devFabric)
	if err != nil {
		return devcluster.Config{}, fmt.Errorf("--dev-fabric: %w", err)
	}
	var faults []devcluster.Fault
	for _, v := range o.devFaults {
		f, err := devcluster.ParseFault(v)
		if err != nil {
			return devcluster.Config{}, fmt.Errorf("--dev-fault: %w", err)
		}
		faults = append(faults, f)
	}
	var names []string
	if o.devNodes != "" {
		if names, err = hostlist.Expand(o.devNodes); err != nil {
			return devcluster.Config{}, fmt.Errorf("--dev-nodes: %w", err)
		}
		for _, n := range names {
			if err := inventory.ValidNodeName(n); err != nil {
				return devcluster.Config{}, fmt.Errorf("--dev-nodes: node name %v", err)
			}
		}
		if len(names) > devcluster.MaxAgents {
			return devcluster.Config{}, fmt.Errorf("--dev-nodes %s: %d nodes, want at most %d", o.devNodes, len(names), devcluster.MaxAgents)
		}
	} else if o.devAgents < 1 || o.devAgents > devcluster.MaxAgents {
		return devcluster.Config{}, fmt.Errorf("--dev-agents %d: want 1..%d", o.devAgents, devcluster.MaxAgents)
	}
	if !slices.Contains(sim.Profiles(), o.devProfile) {
		return devcluster.Config{}, fmt.Errorf("--dev-profile %q: want one of %s", o.devProfile, strings.Join(sim.Profiles(), ", "))
	}
	th, err := healthThresholds(o.healthThresholds)
	if err != nil {
		return devcluster.Config{}, err
	}
	cfg := devcluster.Config{
		Bind: "127.0.0.1:5000", Agents: o.devAgents, Names: names, Profile: o.devProfile, Fabric: spec, Faults: faults,
		HeartbeatInterval: o.cfg.HeartbeatInterval, Logger: log, HealthThresholds: th,
	}
	if cmd.Flags().Changed("bind") {
		cfg.Bind = o.cfg.Bind
	}
	if cmd.Flags().Changed("http-bind") {
		cfg.HTTPBind = o.cfg.HTTPBind
	}
	if cmd.Flags().Changed("data-dir") {
		cfg.DataDir = o.cfg.DataDir
	}
	return cfg, nil
}

func runDev(ctx context.Context, cfg devcluster.Config, o options, log *slog.Logger, stdout io.Writer) error {
	var err error
	if cfg.LeaderTasks, cfg.Collectors, err = o.kube.tasks(log); err != nil {
		return err
	}
	profile := o.devProfile
	log.Warn("dev mode: insecure gRPC on loopback, simulated hardware; not for production")
	c, done, err := devcluster.Start(ctx, cfg)
	if err != nil {
		return err
	}
	addr := c.Master.Addr()
	ctl := ginctlCommand(findGinctlPlaces())
	if addr != "127.0.0.1:5000" {
		ctl += " --master " + addr
	}
	web := ""
	if h := c.Master.HTTPAddr(); h != "" {
		web = "Web view: http://" + h + "/ui/\n"
	}
	fmt.Fprintf(stdout, `GIN dev cluster is up: master %s, %d simulated %s nodes (%s), fabric %s
Raft data: %s
%sTry:
  %s nodes
  %s topo -m
Press Ctrl-C to stop.
`, addr, len(c.Nodes), profile, strings.Join(abbrev(c.Nodes), ","), cfg.Fabric, c.DataDir(), web, ctl, ctl)
	return <-done
}

// ginctlPlaces is where a ginctl may be found, read from this process's
// surroundings.
type ginctlPlaces struct {
	exeDir   string                       // the directory of the running gin-master
	cwd      string                       // the working directory
	lookPath func(string) (string, error) // exec.LookPath
	exists   func(string) bool
}

func findGinctlPlaces() ginctlPlaces {
	p := ginctlPlaces{lookPath: exec.LookPath, exists: func(path string) bool { _, err := os.Stat(path); return err == nil }}
	if exe, err := os.Executable(); err == nil {
		p.exeDir = filepath.Dir(exe)
	}
	p.cwd, _ = os.Getwd()
	return p
}

// ginctlCommand is the ginctl the banner tells the user to run, so that the
// line works as printed: the ginctl built next to this gin-master (make
// build, make dev: ./bin/ginctl), else one on PATH, else, in a checkout,
// `go run ./cmd/ginctl` (`go run ./cmd/gin-master` builds no ginctl).
func ginctlCommand(p ginctlPlaces) string {
	if p.exeDir != "" && p.exists(filepath.Join(p.exeDir, "ginctl")) {
		path := filepath.Join(p.exeDir, "ginctl")
		if p.cwd != "" {
			if rel, err := filepath.Rel(p.cwd, path); err == nil && !strings.HasPrefix(rel, "..") {
				return "./" + rel
			}
		}
		return path
	}
	if p.lookPath != nil {
		if _, err := p.lookPath("ginctl"); err == nil {
			return "ginctl"
		}
	}
	if p.cwd != "" && p.exists(filepath.Join(p.cwd, "cmd", "ginctl")) {
		return "go run ./cmd/ginctl"
	}
	return "ginctl"
}

func abbrev(names []string) []string {
	if len(names) <= 4 {
		return names
	}
	return []string{names[0], "...", names[len(names)-1]}
}
