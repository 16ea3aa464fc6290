package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/gin-topology/gin/internal/nodeplans"
	"github.com/gin-topology/gin/internal/plansock"
)

// defaultPlanDir keeps the node's plans across agent restarts.
const defaultPlanDir = "/var/lib/gin-agent/plans"

// planSweepInterval is how often expired plans are dropped.
const planSweepInterval = time.Minute

// planFlags are the node-local plan options of the agent.
type planFlags struct {
	socket, dir               string
	socketChanged, dirChanged bool
}

// startPlans opens the node's plan store and serves it on the plan socket
// until ctx ends. Defaults that cannot be used (not root, another agent on
// the node) are logged and skipped; paths given explicitly must work.
// The store it returns (nil when plans are not served) keeps the plans the
// masters push over the agent's session too; the socket server (nil
// likewise) counts its answers for /metrics.
func startPlans(ctx context.Context, pf planFlags, masters []string, creds grpc.DialOption, log *slog.Logger) (store *nodeplans.Store, sock *plansock.Server, wait func(), err error) {
	if pf.socket == "" {
		log.Info("plan socket disabled (--plan-socket \"\"); local processes ask the masters for plans")
		return nil, nil, func() {}, nil
	}
	fetch, err := nodeplans.NewMasters(masters, creds)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("plans: %w", err)
	}
	store, err = nodeplans.Open(nodeplans.Options{Dir: pf.dir, Fetcher: fetch, Log: log})
	if err != nil && !pf.dirChanged {
		log.Warn("plan dir unusable, plans are kept in memory only", "err", err)
		store, err = nodeplans.Open(nodeplans.Options{Fetcher: fetch, Log: log})
	}
	if err != nil {
		_ = fetch.Close()
		return nil, nil, nil, err
	}
	srv, err := plansock.Listen(pf.socket, store, log)
	if err != nil {
		_ = fetch.Close()
		if pf.socketChanged {
			return nil, nil, nil, err
		}
		log.Warn("not serving plans on the default socket", "err", err)
		return nil, nil, func() {}, nil
	}
	log.Info("serving plans", "socket", srv.Addr(), "dir", pf.dir)
	done := make(chan struct{})
	go func() {
		defer close(done)
		go store.Run(ctx, planSweepInterval)
		if err := srv.Serve(ctx); err != nil {
			log.Error("plan socket stopped", "err", err)
		}
		_ = fetch.Close()
	}()
	return store, srv, func() { <-done }, nil
}

// newPlanCommand is `gin-agent plan`: ask this node's agent for a job's
// plan, as the Slurm prolog does before any task starts, so that the agent
// holds it (and the ranks read it from the agent even with every master
// down). It exits 0 only when the agent holds the plan.
func newPlanCommand(stdout io.Writer) *cobra.Command {
	var (
		req     plansock.Request
		socket  string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "plan --job ID [--nodes LIST] [--gpus-per-node N]",
		Short: "Have this node's agent fetch and hold a job's plan (Slurm prolog)",
		Long: `Asks the gin-agent of this node, over its plan socket, for the job's plan.
The agent answers from what it holds, or asks the masters once (creating the
plan from --nodes and --gpus-per-node when none is pinned) and keeps it for
every rank of the job on this node. Prints "plan <hash> for job <id>".

Exit status: 0 when the agent holds the plan, 1 when it has none or cannot
be reached, 64 for bad flags.`,
		Example:       `  gin-agent plan --job "$SLURM_JOB_ID" --nodes "$SLURM_JOB_NODELIST" --gpus-per-node 8`,
		Args:          noArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := req.Validate(); err != nil {
				return usagef("%v", err)
			}
			if timeout <= 0 {
				return usagef("--timeout %s: must be positive", timeout)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			resp, err := plansock.Fetch(ctx, socket, req)
			if err != nil {
				return err
			}
			if resp.Status != plansock.StatusOK {
				return fmt.Errorf("job %s: %s: %s", req.JobID, resp.Status, resp.Body)
			}
			_, err = fmt.Fprintf(stdout, "plan %s for job %s\n", resp.Hash, req.JobID)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.JobID, "job", "", "the job id (Slurm: $SLURM_JOB_ID)")
	f.StringVar(&req.Nodes, "nodes", "", "the job's nodes as a hostlist, to create the plan when none is pinned")
	f.Uint32Var(&req.GPUsPerNode, "gpus-per-node", 0, "GPUs per node the job uses (0: all)")
	f.StringVar(&socket, "plan-socket", plansock.DefaultPath, "the agent's plan socket")
	f.DurationVar(&timeout, "timeout", 15*time.Second, "how long to wait for the agent")
	return cmd
}
