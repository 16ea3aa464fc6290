package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/natsort"
)

// ginReasonPrefix starts every Slurm reason the gate writes: a node drained
// with another reason (an operator's) is never resumed by the gate.
const ginReasonPrefix = "GIN: "

// errGateFailed is the gate's refusal: the node fails its check (strict), or
// there is no verdict for it (strict, or --fail-closed).
var errGateFailed = errors.New("health gate")

func (a *app) gateCmd() *cobra.Command {
	var node, mode, scontrol, liveJob string
	var autoResume, failClosed bool
	cmd := &cobra.Command{
		Use:   "gate",
		Short: "Slurm health gate: run this node's verdict; strict mode drains a failing node",
		Long: `Run one node's health verdict (ginctl check) as a Slurm Prolog or
HealthCheckProgram does (deploy/slurm/gin-prolog.sh, docs/HEALTH.md):

  --mode strict    a failing node is drained with GIN's reason as Slurm's reason
                   (scontrol update NodeName=N State=DRAIN Reason="GIN: ...") and
                   the gate exits 1: a prolog that fails makes Slurm requeue the job
  --mode advisory  the failure is printed on stderr; exit 0

A node that passes (or only warns) exits 0. With --auto-resume a node that now
passes and is drained with a reason the gate wrote ("GIN: ...") is resumed;
without it only an operator resumes it (scontrol update NodeName=N State=RESUME).

No verdict (no master answers, the masters refuse, or GIN knows no node of that
name) is never drained: it is not the node's fault. Strict mode fails all the
same (exit 1, the reason on stderr: strict is always --fail-closed); advisory
says so on stderr and exits 0, or exits 1 with --fail-closed. A name GIN does
not know (node001 where the agent registered node001.cluster.local) is named
with the nodes GIN knows that it nearly matches.

With --live-job ID (the Slurm epilog, GIN_LIVE_DRAIN=1) the gate asks instead
whether the job's live report (docs/LIVE.md) has a confirmed suspect on this
node: strict mode drains it with the suspect as the reason ("GIN: slow-link
mlx5_3 1.52x in job 4242") and exits 1; advisory prints it. No suspect, or no
live report, exits 0.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if node == "" {
				node = a.getenv("SLURMD_NODENAME")
			}
			if node == "" {
				return usagef("--node is required (or SLURMD_NODENAME in the environment)")
			}
			if mode != "strict" && mode != "advisory" {
				return usagef("--mode %q: want strict or advisory", mode)
			}
			if scontrol == "" {
				scontrol = "scontrol"
			}
			if liveJob != "" {
				return a.liveGate(cmd.Context(), node, liveJob, mode, scontrol)
			}
			return a.gate(cmd.Context(), node, mode, scontrol, autoResume, failClosed)
		},
	}
	cmd.Flags().StringVar(&node, "node", "", "the node to check, as GIN and Slurm name it (default $SLURMD_NODENAME)")
	cmd.Flags().StringVar(&mode, "mode", "strict", "strict (drain a failing node, exit 1) or advisory (log only)")
	cmd.Flags().BoolVar(&autoResume, "auto-resume", false, "resume the node when it passes again and GIN drained it")
	cmd.Flags().BoolVar(&failClosed, "fail-closed", false, "advisory: fail (exit 1, no drain) when there is no verdict (no master answers, unknown node) instead of letting the job start; strict always does")
	cmd.Flags().StringVar(&scontrol, "scontrol", "", "the scontrol binary (default: scontrol on PATH)")
	cmd.Flags().StringVar(&liveJob, "live-job", "", "gate on this job's confirmed live suspects on the node instead of its health verdict")
	return cmd
}

// liveGate drains node when job's live report names a confirmed suspect
// on it: the one with the largest slowdown is the reason.
func (a *app) liveGate(ctx context.Context, node, job, mode, scontrol string) error {
	resp, old, err := a.jobLive(ctx, job)
	switch {
	case err != nil:
		fmt.Fprintf(a.stderr, "gin gate: %s: no live report of job %s (%s)\n", node, job, describe(err))
		return nil
	case old || resp == nil:
		return nil
	}
	var top *ginv1.Suspect
	for _, s := range resp.GetSuspects() {
		if s.GetConfirmed() && s.GetNode() == node && (top == nil || s.GetSlowdown() > top.GetSlowdown()) {
			top = s
		}
	}
	if top == nil {
		return nil
	}
	reason := fmt.Sprintf("%s%s %s %sx in job %s", ginReasonPrefix, top.GetKind(), top.GetComponent(), slowdownWord(top.GetSlowdown()), job)
	if top.GetKind() == "hang" {
		reason = fmt.Sprintf("%shang %s in job %s", ginReasonPrefix, top.GetComponent(), job)
	}
	if mode == "advisory" {
		fmt.Fprintf(a.stderr, "gin gate: %s: confirmed suspect (advisory, not drained): %s\n", node, reason)
		return nil
	}
	if out, err := runScontrol(ctx, scontrol, "update", "NodeName="+node, "State=DRAIN", "Reason="+reason); err != nil {
		return fmt.Errorf("%w: %s is a confirmed suspect (%s), and draining it failed: %w: %s", errGateFailed, node, reason, err, out)
	}
	return fmt.Errorf("%w: %s is a confirmed suspect of job %s; drained: %s", errGateFailed, node, job, reason)
}

func (a *app) gate(ctx context.Context, node, mode, scontrol string, autoResume, failClosed bool) error {
	resp, err := a.check(ctx, node)
	var v *ginv1.NodeVerdict
	for _, n := range resp.GetNodes() {
		if err == nil && n.GetNode() == node {
			v = n
		}
	}
	if v == nil {
		return a.noVerdict(ctx, node, mode, failClosed, err)
	}
	switch v.GetVerdict() {
	case ginv1.Verdict_VERDICT_FAIL:
	case ginv1.Verdict_VERDICT_WARN:
		fmt.Fprintf(a.stderr, "gin gate: %s: warn: %s\n", node, v.GetReason())
		fallthrough
	default:
		if autoResume {
			return a.autoResume(ctx, node, scontrol)
		}
		return nil
	}
	reason := ginReasonPrefix + v.GetReason()
	if mode == "advisory" {
		fmt.Fprintf(a.stderr, "gin gate: %s: fail (advisory, not drained): %s\n", node, reason)
		return nil
	}
	if out, err := runScontrol(ctx, scontrol, "update", "NodeName="+node, "State=DRAIN", "Reason="+reason); err != nil {
		return fmt.Errorf("%w: %s fails (%s), and draining it failed: %w: %s", errGateFailed, node, reason, err, out)
	}
	return fmt.Errorf("%w: %s fails its health check; drained: %s", errGateFailed, node, reason)
}

// noVerdict is the gate without a verdict for node: err says why (nil: the
// masters' answer left it out). It never drains: a master outage, or a name
// GIN does not know, is not the node's fault. Strict mode, or --fail-closed,
// fails; advisory lets the job start, said on stderr.
func (a *app) noVerdict(ctx context.Context, node, mode string, failClosed bool, err error) error {
	unknown := status.Code(err) == codes.NotFound
	var cause string
	switch {
	case err == nil:
		cause = "the masters' answer has none"
	case unknown:
		cause = a.unknownNode(ctx, node)
	default:
		cause = describe(err)
	}
	switch {
	case mode == "strict":
		return fmt.Errorf("%w: no verdict for %s: %s; strict gate: the job does not start here (GIN_HEALTH_GATE=advisory lets it)", errGateFailed, node, cause)
	case failClosed:
		return fmt.Errorf("%w: no verdict for %s: %s; --fail-closed: the job does not start here", errGateFailed, node, cause)
	case unknown:
		fmt.Fprintf(a.stderr, "gin gate: warning: no verdict for %s: %s; letting the job start\n", node, cause)
	default:
		fmt.Fprintf(a.stderr, "gin gate: %s: no verdict (%s); letting the job start\n", node, cause)
	}
	return nil
}

// unknownNode says that GIN knows no node named node, with the names it
// knows that nearly match (nearNodeNames; none when the list cannot be had).
func (a *app) unknownNode(ctx context.Context, node string) string {
	var names []string
	if err := a.withTopology(ctx, func(ctx context.Context, tc ginv1.TopologyServiceClient) error {
		resp, err := tc.ListNodes(ctx, &ginv1.ListNodesRequest{Consistency: a.consistency()})
		names = names[:0]
		for _, n := range resp.GetNodes() {
			names = append(names, n.GetName())
		}
		return err
	}); err != nil {
		names = nil
	}
	if near := nearNodeNames(node, names); len(near) > 0 {
		return fmt.Sprintf("GIN knows no node %s; did you mean %s? (gin-agent --node-name must match Slurm's NodeName)", node, strings.Join(near, ", "))
	}
	return fmt.Sprintf("GIN knows no node %s (no agent registered it: gin-agent --node-name must match Slurm's NodeName; ginctl nodes lists the nodes)", node)
}

// maxNearNames bounds the names nearNodeNames returns.
const maxNearNames = 3

// nearNodeNames are the names (GIN's nodes) that given nearly matches: those
// that start with given or with given's first dot-component (node001 and
// node001.cluster.local either way round; those whose own first component is
// the same come first), else the closest by edit distance (those at the
// least distance, at most 3 edits). At most maxNearNames, in natural order
// within a rank.
func nearNodeNames(given string, names []string) []string {
	if given == "" {
		return nil
	}
	short, _, _ := strings.Cut(given, ".")
	lower, lowerShort := strings.ToLower(given), strings.ToLower(short)
	type cand struct {
		name string
		rank int
	}
	var cands []cand
	for _, n := range names {
		ln := strings.ToLower(n)
		if strings.HasPrefix(ln, lower) || (lowerShort != "" && strings.HasPrefix(ln, lowerShort)) {
			first, _, _ := strings.Cut(ln, ".")
			rank := 1
			if first == lowerShort {
				rank = 0
			}
			cands = append(cands, cand{n, rank})
		}
	}
	if len(cands) == 0 {
		best := 4 // at most 3 edits away
		for _, n := range names {
			switch d := editDistance(strings.ToLower(n), lower); {
			case d < best:
				best, cands = d, append(cands[:0], cand{n, d})
			case d == best:
				cands = append(cands, cand{n, d})
			}
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].rank != cands[j].rank {
			return cands[i].rank < cands[j].rank
		}
		return natsort.Less(cands[i].name, cands[j].name)
	})
	out := make([]string, 0, min(len(cands), maxNearNames))
	for _, c := range cands[:min(len(cands), maxNearNames)] {
		out = append(out, c.name)
	}
	return out
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// autoResume resumes node when Slurm has it drained with a reason the gate
// wrote.
func (a *app) autoResume(ctx context.Context, node, scontrol string) error {
	out, err := runScontrol(ctx, scontrol, "show", "node", node, "-o")
	if err != nil {
		return fmt.Errorf("scontrol show node %s: %w: %s", node, err, out)
	}
	state, reason := nodeStateReason(out)
	if !strings.Contains(state, "DRAIN") || !strings.HasPrefix(reason, ginReasonPrefix) {
		return nil
	}
	if out, err := runScontrol(ctx, scontrol, "update", "NodeName="+node, "State=RESUME"); err != nil {
		return fmt.Errorf("resuming %s: %w: %s", node, err, out)
	}
	fmt.Fprintf(a.stderr, "gin gate: %s passes again; resumed (was drained: %s)\n", node, reason)
	return nil
}

// nodeStateReason reads State= and Reason= of `scontrol show node -o`
// (one line; Reason runs to its " [user@time]" suffix).
func nodeStateReason(line string) (state, reason string) {
	for _, f := range strings.Fields(line) {
		if s, ok := strings.CutPrefix(f, "State="); ok {
			state = s
		}
	}
	if i := strings.Index(line, " Reason="); i >= 0 {
		reason = line[i+len(" Reason="):]
		if j := strings.Index(reason, " ["); j >= 0 {
			reason = reason[:j]
		}
		reason = strings.TrimSpace(reason)
	}
	return state, reason
}

// runScontrol runs scontrol with args (no shell), bounded in time.
func runScontrol(ctx context.Context, scontrol string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, scontrol, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}
