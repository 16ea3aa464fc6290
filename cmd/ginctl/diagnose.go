package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/nccllog"
)

// maxDiagnoseNodes bounds the nodes a diagnosis reads from the masters.
const maxDiagnoseNodes = 1024

func (a *app) diagnoseCmd() *cobra.Command {
	var file, job, nodes string
	var exitZero bool
	cmd := &cobra.Command{
		Use:   "diagnose --nccl-log FILE [--job ID | --nodes LIST]",
		Short: "Explain an NCCL log (NCCL_DEBUG=INFO) against GIN's topology",
		Long: `Read NCCL's own log (NCCL_DEBUG=INFO, any NCCL_DEBUG_SUBSYS; ranks interleaved,
srun -l, mpirun --tag-output and torchrun prefixes are fine; "-" reads stdin)
and join it with what GIN sees of the job's nodes: the nodes named by --nodes,
or the nodes of the job's GIN plan (--job), else the hosts the log names. Each
finding names a published failure mode with its severity, the log lines it
rests on and the fix: NET/Socket while InfiniBand is up, the variable that
forced it (NCCL_IB_DISABLE, NCCL_IB_HCA, NCCL_SOCKET_IFNAME), "NET/IB : No
device found" on a node whose ports are active, P2P via SHM where NVLink
exists, NCCL_P2P_LEVEL/NCCL_P2P_DISABLE and NCCL_NVLS_ENABLE on NVLink nodes,
NCCL_IB_GID_INDEX on RoCE, channels through a NIC farther than the GPU's
nearest, ranks on different NCCL versions. -o json prints the report
(docs/JSON.md).

Exit status, for scripts: 0 when no finding is fail (warn and info are 0);
1 when any finding is fail, after the whole report is printed (text or
-o json), the failing checks named on stderr; 0 all the same with
--exit-zero. 1 also when the masters cannot answer, 2 for a usage error (a
missing log file).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usagef("--nccl-log FILE is required (- reads stdin)")
			}
			if job != "" && nodes != "" {
				return usagef("--job and --nodes: give one")
			}
			in, closeIn, err := a.openInput("--nccl-log", file)
			if err != nil {
				return err
			}
			defer closeIn()
			log, err := nccllog.Parse(in)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			topo, err := a.diagnoseTopology(cmd.Context(), log, job, nodes)
			if err != nil {
				return err
			}
			r := nccllog.Diagnose(log, topo)
			if a.output == "json" {
				err = a.printJSON(r)
			} else {
				err = a.printDiagnosis(r)
			}
			if err != nil || exitZero {
				return err
			}
			return findingsFail(r)
		},
	}
	cmd.Flags().StringVar(&file, "nccl-log", "", "the NCCL log (- for stdin)")
	cmd.Flags().StringVar(&job, "job", "", "compare with the nodes of this job's GIN plan")
	cmd.Flags().StringVar(&nodes, "nodes", "", "compare with these nodes (Slurm hostlist)")
	cmd.Flags().BoolVar(&exitZero, "exit-zero", false, "exit 0 even when a finding is fail (default: exit 1)")
	return cmd
}

// findingsFail is the error (exit 1) of a diagnosis with a fail finding,
// naming its checks; nil when there is none.
func findingsFail(r *nccllog.Report) error {
	n, seen := 0, map[string]bool{}
	var checks []string
	for _, f := range r.Findings {
		if f.Severity != nccllog.SeverityFail {
			continue
		}
		n++
		if !seen[f.Check] {
			seen[f.Check] = true
			checks = append(checks, f.Check)
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%d finding(s) fail: %s %s", n, strings.Join(checks, ", "), exitZeroHint)
}

// diagnoseTopology reads the inventories to compare with: the nodes given,
// the plan's, else the log's hosts that GIN knows (an unknown one is left
// out: the report lists it as unmatched).
func (a *app) diagnoseTopology(ctx context.Context, log *nccllog.Log, job, nodes string) (nccllog.Topology, error) {
	var names []string
	strict := true
	switch {
	case nodes != "":
		n, err := hostlist.Expand(nodes)
		if err != nil {
			return nil, usagef("--nodes: %v", err)
		}
		names = n
	case job != "":
		var plan *ginv1.GetPlanResponse
		if err := a.withPlans(ctx, func(ctx context.Context, pc ginv1.PlanServiceClient) (err error) {
			plan, err = pc.GetPlan(ctx, &ginv1.GetPlanRequest{JobId: job, Consistency: a.consistency()})
			return err
		}); err != nil {
			return nil, err
		}
		names = plan.GetPlan().GetNodes()
	default:
		strict = false
		seen := map[string]bool{}
		for _, p := range log.Procs {
			if !seen[p.Host] {
				seen[p.Host] = true
				names = append(names, p.Host)
			}
		}
	}
	if len(names) > maxDiagnoseNodes {
		return nil, usagef("%d nodes: at most %d are compared", len(names), maxDiagnoseNodes)
	}
	topo := nccllog.Topology{}
	for _, n := range names {
		var resp *ginv1.GetNodeResponse
		err := a.withTopology(ctx, func(ctx context.Context, tc ginv1.TopologyServiceClient) (err error) {
			resp, err = tc.GetNode(ctx, &ginv1.GetNodeRequest{Name: n, Consistency: a.consistency()})
			return err
		})
		if err != nil {
			if !strict && status.Code(err) == codes.NotFound {
				continue
			}
			if !strict && len(topo) == 0 && status.Code(err) == codes.Unavailable {
				fmt.Fprintf(a.stderr, "ginctl: no master answered (%s); diagnosing the log alone\n", describe(err))
				return nil, nil
			}
			return nil, err
		}
		topo[n] = resp.GetInventory()
	}
	return topo, nil
}

func (a *app) printDiagnosis(r *nccllog.Report) error {
	a.summary("NCCL log: %d lines (%d from NCCL), %d process(es) on %d host(s); NCCL %s; network %s",
		r.Lines, r.NCCLLines, r.Processes, len(r.Hosts), dash(strings.Join(r.Versions, ", ")), dash(strings.Join(r.Networks, ", ")))
	if len(r.Unmatched) > 0 {
		a.summary("not in GIN (compared with the log alone): %s", hostlist.Compress(r.Unmatched))
	}
	if len(r.Findings) == 0 {
		fmt.Fprintln(a.stdout, "no known failure mode found")
		return nil
	}
	for _, f := range r.Findings {
		where := ""
		if f.Host != "" {
			where = " (" + f.Host + ")"
		}
		fmt.Fprintf(a.stdout, "\n%s %s%s: %s\n  %s\n", strings.ToUpper(f.Severity), f.Check, where, escapeText(f.Title), escapeText(f.Detail))
		for _, l := range f.Lines {
			fmt.Fprintf(a.stdout, "  line %d: %s\n", l.N, escapeText(l.Text))
		}
		fmt.Fprintf(a.stdout, "  fix: %s\n", escapeText(f.Fix))
	}
	return nil
}
