// Command ginctl is the command line of GIN for operators and ML engineers:
// it lists the cluster's nodes, prints the cluster-wide `nvidia-smi topo -m`
// matrix, the path between two GPUs, and watches changes.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/buildinfo"
	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/jsonout"
	"github.com/gin-topology/gin/internal/masteraddr"
	"github.com/gin-topology/gin/internal/pki"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// Exit codes.
const (
	exitErr   = 1
	exitUsage = 2
)

// app holds the global flags and the streams of one invocation.
type app struct {
	globals
	stdin       io.Reader
	stdout      io.Writer
	stderr      io.Writer
	getenv      func(string) string
	yaml        bool // -o yaml: output is "json", printed as YAML
	log         *slog.Logger
	usageFailed bool
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{globals: defaultGlobals(), stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if cmd, err := root.ExecuteContextC(ctx); err != nil {
		if strings.HasPrefix(err.Error(), "unknown command ") || strings.HasPrefix(err.Error(), "unknown flag") ||
			strings.HasPrefix(err.Error(), "unknown shorthand flag") {
			err = usagef("%s (%s --help lists them)", err, cmd.CommandPath())
		}
		fmt.Fprintf(stderr, "ginctl: %s\n", describe(err))
		if a.usageFailed || isUsage(err) {
			return exitUsage
		}
		return exitErr
	}
	return 0
}

// rootCmd is the ginctl command tree, bound to a.
func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "ginctl",
		Short: "Query GIN, the cluster-wide GPU topology service",
		Long: `ginctl asks the gin-masters about the cluster's GPU topology.

The master list comes from --master, else GIN_MASTER_HOST, else 127.0.0.1:5000:
comma-separated host[:port] entries, IPv6 as [addr]:port, default port 5000.
Reads are answered by any master (add --consistent to require the leader).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.String(),
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			// A node list that is not a hostlist is what the user typed
			// (exit 2), found before any master is asked.
			if f := cmd.Flags().Lookup("nodes"); f != nil && f.Changed {
				if _, err := hostlist.Expand(f.Value.String()); err != nil {
					return usagef("--nodes: %v", err)
				}
			}
			if err := a.globals.validate(); err != nil {
				return usageError{err}
			}
			l, _ := a.level()
			a.log = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: l}))
			if a.output == "yaml" {
				// The same document as -o json, written as YAML: commands
				// test for "json" and printJSON writes YAML.
				a.output, a.yaml = "json", true
			}
			return nil
		},
	}
	bindGlobals(root.PersistentFlags(), &a.globals)
	root.AddCommand(a.nodesCmd(), a.nodeCmd(), a.topoCmd(), a.pathCmd(), a.watchCmd(), a.clusterCmd(), a.fabricCmd(),
		a.planCmd(), a.estimateCmd(), a.orderCmd(), a.exportCmd(), a.membersCmd(), a.calibrateCmd(), a.tlsCmd(),
		a.checkCmd(), a.jobCmd(), a.gateCmd(), a.diagnoseCmd())
	root.SetVersionTemplate(buildinfo.VersionTemplate("ginctl"))
	root.AddCommand(a.versionCmd())
	a.registerCompletions(root)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		a.usageFailed = true
		return flagError(err)
	})
	return root
}

func (a *app) client() (*masterClient, error) {
	masters, err := masteraddr.FromEnv(a.master, a.getenv)
	if err != nil {
		return nil, usageError{err}
	}
	files := a.tlsFiles()
	if !files.Given() {
		return newMasterClient(masters)
	}
	creds, err := pki.ClientCredentials(files, a.logger())
	if err != nil {
		return nil, usageError{err}
	}
	return newMasterClient(masters, grpc.WithTransportCredentials(creds))
}

func (a *app) consistency() ginv1.ReadConsistency {
	if a.consistent {
		return ginv1.ReadConsistency_READ_CONSISTENCY_CONSISTENT
	}
	return ginv1.ReadConsistency_READ_CONSISTENCY_ANY
}

// withService runs fn against the masters (failing over between them) with
// a client of one service, under the request deadline (--timeout).
func withService[C any](ctx context.Context, a *app, newClient func(grpc.ClientConnInterface) C, fn func(context.Context, C) error) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	return c.Do(ctx, func(ctx context.Context, conn *grpc.ClientConn) error {
		start := time.Now()
		err := fn(ctx, newClient(conn))
		a.logger().Debug("request", "master", conn.Target(), "took", time.Since(start), "err", err)
		return err
	})
}

func (a *app) withTopology(ctx context.Context, fn func(context.Context, ginv1.TopologyServiceClient) error) error {
	return withService(ctx, a, ginv1.NewTopologyServiceClient, fn)
}

func (a *app) withPlans(ctx context.Context, fn func(context.Context, ginv1.PlanServiceClient) error) error {
	return withService(ctx, a, ginv1.NewPlanServiceClient, fn)
}

func (a *app) withAdmin(ctx context.Context, fn func(context.Context, ginv1.AdminServiceClient) error) error {
	return withService(ctx, a, ginv1.NewAdminServiceClient, fn)
}

// clusterInfo is the Raft cluster as the answering master sees it.
func (a *app) clusterInfo(ctx context.Context) (resp *ginv1.GetClusterInfoResponse, err error) {
	err = a.withAdmin(ctx, func(ctx context.Context, ac ginv1.AdminServiceClient) (err error) {
		resp, err = ac.GetClusterInfo(ctx, &ginv1.GetClusterInfoRequest{})
		return err
	})
	return resp, err
}

// printJSON writes v (a proto message, a slice of them, or a view struct)
// in GIN's JSON convention (internal/jsonout, docs/JSON.md).
func (a *app) printJSON(v any) error {
	if a.yaml {
		return jsonout.WriteYAML(a.stdout, v)
	}
	return jsonout.Write(a.stdout, v)
}

// printLine writes one event of a stream: a JSON line, or a YAML document.
func (a *app) printLine(v any) error {
	if a.yaml {
		if _, err := fmt.Fprintln(a.stdout, "---"); err != nil {
			return err
		}
		return jsonout.WriteYAML(a.stdout, v)
	}
	return jsonout.WriteLine(a.stdout, v)
}

// logger is the --log-level logger (discarding before the flags are parsed).
func (a *app) logger() *slog.Logger {
	if a.log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.log
}

// registerCompletions completes node names for every --nodes and --node
// flag of the tree (the positional arguments complete in their commands).
func (a *app) registerCompletions(c *cobra.Command) {
	for _, name := range []string{"nodes", "node"} {
		if c.LocalFlags().Lookup(name) != nil {
			_ = c.RegisterFlagCompletionFunc(name, a.completeNodesFlag)
		}
	}
	for _, sub := range c.Commands() {
		a.registerCompletions(sub)
	}
}
