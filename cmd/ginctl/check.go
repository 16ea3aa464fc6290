package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/health"
	"github.com/gin-topology/gin/internal/hostlist"
)

func (a *app) withCheck(ctx context.Context, fn func(context.Context, ginv1.CheckServiceClient) error) error {
	return withService(ctx, a, ginv1.NewCheckServiceClient, fn)
}

// check asks the masters for the verdicts of nodes (a hostlist; "" all).
func (a *app) check(ctx context.Context, nodes string) (resp *ginv1.CheckResponse, err error) {
	err = a.withCheck(ctx, func(ctx context.Context, cc ginv1.CheckServiceClient) (err error) {
		resp, err = cc.Check(ctx, &ginv1.CheckRequest{Nodes: nodes, Consistency: a.consistency()})
		return err
	})
	return resp, err
}

func (a *app) checkCmd() *cobra.Command {
	var nodes string
	var exitZero bool
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Show each node's health verdict (pass, warn, fail) and why",
		Long: `Show each node's health verdict as the masters judge it from what the agents
report: pass, warn or fail, and for every finding what was seen, why it matters
to a job and the fix. Node rules: NVLink or HCA port down, PCIe links trained
below their capability, ACS redirecting peer-to-peer between a GPU and its
nearest NIC, a translating IOMMU, no GPUDirect RDMA, XIDs, ECC and row
remapping, clock throttling, the MNNVL fabric. Cluster rules: a driver, VBIOS
or NIC firmware that differs from the majority of nodes of the same system
model, a NIC slower than its peers on the same leaf switch. The thresholds are
the masters' (gin-master --health-threshold; docs/HEALTH.md).
-o json prints the CheckResponse: one verdict per node, sorted by name.

Exit status, for scripts: 0 when no node fails (pass or warn); 1 when any
node's verdict is fail, after everything is printed (table or -o json), and
the failing nodes named on stderr; 0 all the same with --exit-zero. 1 also
when the masters cannot answer, 2 for a usage error.`,
		Example: `  ginctl check --nodes 'node[001-004]' || echo "a node fails"
  ginctl check -o json --exit-zero | jq '.nodes[] | select(.verdict == "fail") | .node'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			resp, err := a.check(cmd.Context(), nodes)
			if err != nil {
				return err
			}
			if a.output == "json" {
				err = a.printJSON(resp)
			} else {
				err = a.printVerdicts(resp)
			}
			if err != nil || exitZero {
				return err
			}
			return verdictsFail(resp)
		},
	}
	cmd.Flags().StringVar(&nodes, "nodes", "", "only these nodes (Slurm hostlist: node[001-004,010])")
	cmd.Flags().BoolVar(&exitZero, "exit-zero", false, "exit 0 even when a node fails (default: exit 1)")
	return cmd
}

// exitZeroHint ends the error of a command that printed a fail: the flag
// that keeps its exit status 0.
const exitZeroHint = "(--exit-zero exits 0 on failures)"

// verdictsFail is the error (exit 1) of a check answer where a node fails,
// naming them; nil when none does.
func verdictsFail(resp *ginv1.CheckResponse) error {
	var failed []string
	for _, n := range resp.GetNodes() {
		if n.GetVerdict() == ginv1.Verdict_VERDICT_FAIL {
			failed = append(failed, n.GetNode())
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d node(s) fail their health check: %s %s", len(failed), len(resp.GetNodes()), hostlist.Compress(failed), exitZeroHint)
}

// printVerdicts writes one row per finding (one per passing node), then
// each finding's impact and fix.
func (a *app) printVerdicts(resp *ginv1.CheckResponse) error {
	t := a.newTable("NODE", "VERDICT", "CHECK", "SUBJECT", "SEEN")
	count := map[ginv1.Verdict]int{}
	for _, n := range resp.GetNodes() {
		count[n.GetVerdict()]++
		if len(n.GetFindings()) == 0 {
			t.row(n.GetNode(), health.Label(n.GetVerdict()), "-", "-", text("-"))
			continue
		}
		for _, f := range n.GetFindings() {
			t.row(n.GetNode(), health.Label(f.GetSeverity()), f.GetCheck(), dash(f.GetSubject()), text(f.GetSeen()))
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	if !a.noHeaders {
		for _, n := range resp.GetNodes() {
			for _, f := range n.GetFindings() {
				fmt.Fprintf(a.stdout, "\n%s %s %s %s\n  impact: %s\n  fix:    %s\n", n.GetNode(), health.Label(f.GetSeverity()), f.GetCheck(), f.GetSubject(),
					escapeText(f.GetImpact()), escapeText(f.GetFix()))
			}
		}
		fmt.Fprintln(a.stdout)
	}
	a.summary("%d node(s): %d pass, %d warn, %d fail; served by %s at index %d%s", len(resp.GetNodes()),
		count[ginv1.Verdict_VERDICT_PASS], count[ginv1.Verdict_VERDICT_WARN], count[ginv1.Verdict_VERDICT_FAIL],
		resp.GetRead().GetServedBy(), resp.GetRead().GetIndex(), offLeader(resp.GetRead()))
	return nil
}
