package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/jsonout"
	"github.com/gin-topology/gin/internal/planread"
	"github.com/gin-topology/gin/internal/promsd"
)

func (a *app) planCmd() *cobra.Command {
	var (
		job, nodes, stage string
		gpn               uint32
		ttl               time.Duration
	)
	cmd := &cobra.Command{
		Use:   "plan --job ID [--nodes LIST]",
		Short: "Create or show a job's pinned plan and explain each row",
		Long: `Show the job's pinned plan (the decision table the NCCL tuner plugin applies on
every rank), creating and pinning it first when the job has none and --nodes is
given. A plan never changes for its job: every later request, on any master,
gets the same bytes (same hash). Rows marked "NCCL" leave the choice to NCCL.
With --nodes, a node of the plan whose health verdict is fail (ginctl check)
is named on stderr; the plan is pinned all the same (exit 0).`,
		Example: `  ginctl plan --job 4242 --nodes 'node[001-064]'
  ginctl plan --job 4242 -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if job == "" {
				return usagef("--job is required")
			}
			if ttl < 0 {
				return usagef("--ttl %s: must not be negative", ttl)
			}
			var resp *ginv1.GetOrCreatePlanResponse
			err := a.withPlans(cmd.Context(), func(ctx context.Context, pc ginv1.PlanServiceClient) (err error) {
				if nodes == "" {
					// Only shown: a read (GetPlan), which a reader
					// certificate may make, GetOrCreatePlan not.
					var got *ginv1.GetPlanResponse
					got, err = pc.GetPlan(ctx, &ginv1.GetPlanRequest{JobId: job, Consistency: a.consistency()})
					if status.Code(err) == codes.NotFound {
						return status.Errorf(codes.NotFound, "job %q has no plan", job)
					}
					resp = &ginv1.GetOrCreatePlanResponse{Plan: got.GetPlan()}
					return err
				}
				resp, err = pc.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: job, Nodes: nodes, GpusPerNode: gpn, TtlSeconds: uint32(ttl / time.Second)})
				return err
			})
			if err != nil {
				return err
			}
			if nodes != "" {
				a.warnFailingNodes(cmd.Context(), resp.GetPlan().GetNodes())
			}
			if stage != "" {
				path, err := stagePlan(stage, resp.GetPlan())
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stderr, "plan for job %s staged at %s (hash %s)\n", job, path, resp.GetPlan().GetContentHash())
			}
			if a.output == "json" {
				return a.printJSON(resp.GetPlan())
			}
			p := resp.GetPlan()
			state := "existing"
			if resp.GetCreated() {
				state = "created"
			}
			a.summary("%s plan, pinned at index %d, expires %s, content hash %s", state, p.GetCreatedIndex(),
				p.GetExpiresAt().AsTime().UTC().Format(time.RFC3339), p.GetContentHash())
			return a.printPlanRules(p)
		},
	}
	f := cmd.Flags()
	f.StringVar(&job, "job", "", "job id (Slurm job id)")
	f.StringVar(&nodes, "nodes", "", "the job's nodes (Slurm hostlist), needed to create the plan")
	f.Uint32Var(&gpn, "gpus-per-node", 0, "GPUs per node the job uses (0: all)")
	f.DurationVar(&ttl, "ttl", 0, "expire the plan after this long without an epilog (default 7 days)")
	f.StringVar(&stage, "stage-dir", "", "also write the plan to <dir>/plan-<job>.pb, a file a job can name in NCCL_GIN_PLAN_FILE (the Slurm prolog has the node agents hold the plan instead)")
	del := &cobra.Command{
		Use:   "delete --job ID",
		Short: "Expire a job's plan (what the Slurm epilog calls)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if job == "" {
				return usagef("--job is required")
			}
			var resp *ginv1.DeletePlanResponse
			err := a.withPlans(cmd.Context(), func(ctx context.Context, pc ginv1.PlanServiceClient) (err error) {
				resp, err = pc.DeletePlan(ctx, &ginv1.DeletePlanRequest{JobId: job})
				return err
			})
			if err != nil {
				return err
			}
			if a.output == "json" {
				return a.printJSON(resp)
			}
			if resp.GetDeleted() {
				fmt.Fprintf(a.stdout, "plan for job %s deleted at index %d\n", job, resp.GetIndex())
			} else {
				fmt.Fprintf(a.stdout, "job %s had no plan\n", job)
			}
			return nil
		},
	}
	del.Flags().StringVar(&job, "job", "", "job id")
	cmd.AddCommand(del)
	return cmd
}

// planCheckTimeout bounds the health check of a plan's nodes (at most
// --timeout): the plan is what was asked.
const planCheckTimeout = 5 * time.Second

// warnFailingNodes names on stderr each of nodes (a plan's) whose health
// verdict is fail; nothing when the verdicts cannot be had.
func (a *app) warnFailingNodes(ctx context.Context, nodes []string) {
	if len(nodes) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, planCheckTimeout)
	defer cancel()
	resp, err := a.check(ctx, hostlist.Compress(nodes))
	if err != nil {
		a.logger().Debug("no health verdicts for the plan's nodes", "err", err)
		return
	}
	for _, v := range resp.GetNodes() {
		if v.GetVerdict() == ginv1.Verdict_VERDICT_FAIL {
			fmt.Fprintf(a.stderr, "warning: %s fails its health check (%s): the plan uses it; ginctl check --nodes %s\n", v.GetNode(), v.GetReason(), v.GetNode())
		}
	}
}

// parseSize reads "8", "1K", "256M", "8G", "1T" (binary multiples, as
// nccl-tests' -b/-e flags).
func parseSize(s string) (uint64, error) {
	s = strings.TrimSpace(strings.ToUpper(s))
	mult := uint64(1)
	for suffix, m := range map[string]uint64{"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40} {
		if strings.HasSuffix(s, suffix) || strings.HasSuffix(s, suffix+"B") || strings.HasSuffix(s, suffix+"IB") {
			s = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(s, "B"), "I"), suffix)
			mult = m
			break
		}
	}
	s = strings.TrimSuffix(s, "B")
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: want bytes such as 8, 64K, 256M or 8G", s)
	}
	if v > (1<<50)/mult {
		return 0, fmt.Errorf("size %q is larger than 1 PiB", s)
	}
	return v * mult, nil
}

var collectives = map[string]ginv1.Collective{
	"all_reduce": ginv1.Collective_COLLECTIVE_ALL_REDUCE, "all_gather": ginv1.Collective_COLLECTIVE_ALL_GATHER,
	"reduce_scatter": ginv1.Collective_COLLECTIVE_REDUCE_SCATTER, "broadcast": ginv1.Collective_COLLECTIVE_BROADCAST,
	"reduce": ginv1.Collective_COLLECTIVE_REDUCE,
}

func (a *app) estimateCmd() *cobra.Command {
	var (
		gpus, gpn                   uint32
		nodes, coll, size, workload string
		bytesPerStep                string
		computeSeconds              float64
	)
	cmd := &cobra.Command{
		Use:   "estimate (--gpus N | --nodes LIST --collective C --size BYTES)",
		Short: "Predict collective time and scaling before asking for resources",
		Long: `--gpus N: for each placement the cluster can offer now (same NVLink domain, one
node over PCIe, one leaf, across the spine, Ethernet only), the predicted
collective time and the speedup of N GPUs over 1 for a workload (--workload
dp|tp, or --collective with --bytes-per-step and --compute-seconds), and the
free GPUs it would pick.

--nodes LIST: the prediction for exactly that placement; -o json prints
algorithm, protocol, time_us, algbw_gbps and busbw_gbps as nccl-tests defines
them (busbw = algbw × 2(n-1)/n for all_reduce).`,
		Example: `  ginctl estimate --gpus 16 --workload dp
  ginctl estimate --nodes 'node[001-002]' --collective all_reduce --size 1G -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &ginv1.EstimateRequest{Nodes: nodes, GpusPerNode: gpn, Gpus: gpus}
			if (gpus == 0) == (nodes == "") {
				return usagef("give either --gpus N or --nodes LIST")
			}
			if coll != "" {
				c, ok := collectives[coll]
				if !ok {
					return usagef("--collective %q: want all_reduce, all_gather, reduce_scatter, broadcast or reduce", coll)
				}
				req.Collective = c
			}
			if size != "" {
				v, err := parseSize(size)
				if err != nil {
					return usagef("--size: %w", err)
				}
				req.SizeBytes = v
			}
			if nodes != "" && (req.Collective == 0 || req.SizeBytes == 0) {
				return usagef("--nodes needs --collective and --size")
			}
			if gpus > 0 {
				w := &ginv1.Workload{}
				switch workload {
				case "dp", "data-parallel":
					w.Preset = ginv1.WorkloadPreset_WORKLOAD_PRESET_DATA_PARALLEL_TRAINING
				case "tp", "tensor-parallel":
					w.Preset = ginv1.WorkloadPreset_WORKLOAD_PRESET_TENSOR_PARALLEL_INFERENCE
				case "":
					if bytesPerStep == "" {
						w.Preset = ginv1.WorkloadPreset_WORKLOAD_PRESET_DATA_PARALLEL_TRAINING
						break
					}
					b, err := parseSize(bytesPerStep)
					if err != nil {
						return usagef("--bytes-per-step: %w", err)
					}
					if computeSeconds <= 0 || req.Collective == 0 {
						return usagef("an explicit workload needs --collective, --bytes-per-step and --compute-seconds > 0")
					}
					w.Collective, w.BytesPerStep, w.ComputeSecondsPerStep = req.Collective, b, computeSeconds
				default:
					return usagef("--workload %q: want dp or tp", workload)
				}
				req.Workload = w
			}
			var resp *ginv1.EstimateResponse
			err := a.withPlans(cmd.Context(), func(ctx context.Context, pc ginv1.PlanServiceClient) (err error) {
				resp, err = pc.Estimate(ctx, req)
				return err
			})
			if err != nil {
				return err
			}
			if nodes != "" {
				p := resp.GetPrediction()
				if a.output == "json" {
					return a.printJSON(p)
				}
				cell := algoName(p.GetAlgorithm()) + "/" + protoName(p.GetProtocol())
				if p.GetAlgorithm() == ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
					cell = "NCCL's default"
				}
				fmt.Fprintf(a.stdout, "%s of %d bytes on %d ranks over %d nodes: %s, %.1f µs, algbw %.2f GB/s, busbw %.2f GB/s (%s)\n",
					jsonout.EnumWord(p.GetCollective().Descriptor(), p.GetCollective().Number()), p.GetSizeBytes(), p.GetNRanks(), p.GetNNodes(),
					cell, p.GetTimeUs(), p.GetAlgbwGbps(), p.GetBusbwGbps(), dash(p.GetBasis()))
				if p.GetEvidence() != "" {
					fmt.Fprintf(a.stdout, "evidence: %s\n", escapeText(p.GetEvidence()))
				}
				return nil
			}
			if a.output == "json" {
				return a.printJSON(resp)
			}
			// REASON (free text) is the last column; every other cell is one token.
			t := a.newTable("PLACEMENT", "AVAILABLE", "ALGO/PROTO", "TIME_US", "BUSBW_GBPS", "SPEEDUP", "EFFICIENCY", "GPUS", "REASON")
			for _, pe := range resp.GetPlacements() {
				if !pe.GetAvailable() {
					t.row(pe.GetPlacement(), "no", "-", "-", "-", "-", "-", "-", text(pe.GetReason()))
					continue
				}
				pr := pe.GetPrediction()
				gp := strings.Join(pe.GetGpus(), ",")
				if len(pe.GetGpus()) > 4 {
					gp = strings.Join(pe.GetGpus()[:4], ",") + fmt.Sprintf(",+%d", len(pe.GetGpus())-4)
				}
				t.row(pe.GetPlacement(), "yes", algoName(pr.GetAlgorithm())+"/"+protoName(pr.GetProtocol()),
					fmt.Sprintf("%.1f", pr.GetTimeUs()), fmt.Sprintf("%.1f", pr.GetBusbwGbps()), fmt.Sprintf("%.2f", pe.GetSpeedup()),
					fmt.Sprintf("%.0f%%", 100*pe.GetEfficiency()), gp, text(""))
			}
			return t.flush()
		},
	}
	f := cmd.Flags()
	f.Uint32Var(&gpus, "gpus", 0, "GPU count: estimate every placement class for it")
	f.StringVar(&nodes, "nodes", "", "a fixed placement (Slurm hostlist)")
	f.Uint32Var(&gpn, "gpus-per-node", 0, "GPUs per node of the fixed placement (0: all)")
	f.StringVar(&coll, "collective", "", "all_reduce, all_gather, reduce_scatter, broadcast or reduce")
	f.StringVar(&size, "size", "", "message size in bytes (K, M, G suffixes are binary)")
	f.StringVar(&workload, "workload", "", "preset for --gpus: dp (data-parallel training) or tp (tensor-parallel inference)")
	f.StringVar(&bytesPerStep, "bytes-per-step", "", "explicit workload: bytes of --collective per step")
	f.Float64Var(&computeSeconds, "compute-seconds", 0, "explicit workload: compute time of one step on one GPU")
	return cmd
}

func (a *app) orderCmd() *cobra.Command {
	var nodes string
	cmd := &cobra.Command{
		Use:   "order --nodes LIST",
		Short: "Print the nodes in the order whose ring crosses the spine least (a hostfile)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if nodes == "" {
				return usagef("--nodes is required")
			}
			var resp *ginv1.OrderNodesResponse
			err := a.withPlans(cmd.Context(), func(ctx context.Context, pc ginv1.PlanServiceClient) (err error) {
				resp, err = pc.OrderNodes(ctx, &ginv1.OrderNodesRequest{Nodes: nodes})
				return err
			})
			if err != nil {
				return err
			}
			if a.output == "json" {
				return a.printJSON(resp)
			}
			for _, n := range resp.GetNodes() {
				fmt.Fprintln(a.stdout, escapeText(n))
			}
			fmt.Fprintf(a.stderr, "ring crosses the spine %d times (given order: %d)\n", resp.GetSpineCrossings(), resp.GetGivenSpineCrossings())
			return nil
		},
	}
	cmd.Flags().StringVar(&nodes, "nodes", "", "nodes to order (Slurm hostlist)")
	return cmd
}

func (a *app) exportCmd() *cobra.Command {
	var node, out string
	var agentPort, masterPort int
	var kueueName, job string
	formats := map[string]ginv1.ExportFormat{
		"slurm": ginv1.ExportFormat_EXPORT_FORMAT_SLURM_TREE, "slurm-block": ginv1.ExportFormat_EXPORT_FORMAT_SLURM_BLOCK,
		"json": ginv1.ExportFormat_EXPORT_FORMAT_JSON, "dot": ginv1.ExportFormat_EXPORT_FORMAT_DOT, "nccl-topo": ginv1.ExportFormat_EXPORT_FORMAT_NCCL_TOPO,
	}
	cmd := &cobra.Command{
		Use:   "export slurm|slurm-block|json|dot|nccl-topo|prometheus-sd|kueue|nccl-tuner-csv [--node NAME] [--job ID] [--out FILE]",
		Short: "Export the topology (Slurm topology.conf, JSON, Graphviz, NCCL_TOPO_FILE) or a plan (the NCCL example tuner's CSV)",
		Long: `Export the cluster topology:
  slurm        Slurm topology.conf for TopologyPlugin=topology/tree
  slurm-block  Slurm topology.conf for topology/block (NVLink domains as blocks)
  json         the graph as JSON
  dot          Graphviz
  nccl-topo    an NCCL_TOPO_FILE for one node (--node)
  prometheus-sd  Prometheus file_sd targets: every node's gin-agent (node:--agent-port,
               job gin-agent) and every master (the /metrics address it registered, or its host:--master-port, job gin-master);
               with --out the file is replaced atomically (run it from cron)
  kueue        a Kueue Topology (kueue.x-k8s.io/v1beta2) whose levels are the Node
               labels gin-master --kube-labels keeps, outermost first (--kueue-name)
  nccl-tuner-csv  a job's pinned plan (--job) as the NCCL_TUNER_CONFIG_FILE of NVIDIA's
               example tuner (plugins/tuner/example): each rule's forcing choices as
               rows in preference order; rules that leave it to NCCL have no rows;
               with --out the file is replaced atomically`,
		Args:              args("FORMAT"),
		ValidArgsFunction: completeFormats(formats),
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.output == "json" {
				return usagef("-o json/yaml does not apply to export, which writes the format it is given (ginctl export json is the graph as JSON)")
			}
			if args[0] == "prometheus-sd" {
				return a.exportPrometheusSD(cmd.Context(), out, agentPort, masterPort)
			}
			if args[0] == "kueue" {
				return a.exportKueue(cmd.Context(), out, kueueName)
			}
			if args[0] == "nccl-tuner-csv" {
				return a.exportTunerCSV(cmd.Context(), job, out)
			}
			f, ok := formats[args[0]]
			if !ok {
				return usagef("unknown format %q: want slurm, slurm-block, json, dot, nccl-topo, prometheus-sd, kueue or nccl-tuner-csv", args[0])
			}
			if f == ginv1.ExportFormat_EXPORT_FORMAT_NCCL_TOPO && node == "" {
				return usagef("nccl-topo needs --node")
			}
			var resp *ginv1.ExportResponse
			err := a.withPlans(cmd.Context(), func(ctx context.Context, pc ginv1.PlanServiceClient) (err error) {
				resp, err = pc.Export(ctx, &ginv1.ExportRequest{Format: f, Node: node})
				return err
			})
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = a.stdout.Write(resp.GetContent())
				return err
			}
			return os.WriteFile(out, resp.GetContent(), 0o644)
		},
	}
	cmd.Flags().StringVar(&node, "node", "", "node (for nccl-topo)")
	cmd.Flags().StringVar(&job, "job", "", "nccl-tuner-csv: the job whose pinned plan to write")
	cmd.Flags().StringVar(&kueueName, "kueue-name", "gin", "kueue: the Topology's name (a ResourceFlavor's topologyName)")
	cmd.Flags().StringVar(&out, "out", "", "write to this file instead of standard output")
	cmd.Flags().IntVar(&agentPort, "agent-port", promsd.DefaultAgentPort, "prometheus-sd: the agents' --metrics-bind port")
	cmd.Flags().IntVar(&masterPort, "master-port", promsd.DefaultMasterPort, "prometheus-sd: the /metrics port of masters that did not register their --http-bind (older masters)")
	return cmd
}

// stagePlan writes the plan's protobuf bytes to <dir>/plan-<job>.pb
// atomically (temp file and rename), readable by the job's processes.
func stagePlan(dir string, p *ginv1.Plan) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("--stage-dir: %w", err)
	}
	b, err := proto.Marshal(p)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, ".plan-*")
	if err != nil {
		return "", fmt.Errorf("--stage-dir: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return "", fmt.Errorf("--stage-dir: %w", err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "plan-"+p.GetJobId()+".pb")
	if err := os.Rename(f.Name(), path); err != nil {
		return "", fmt.Errorf("--stage-dir: %w", err)
	}
	return path, nil
}

// printPlanRules prints a plan's summary line and one row per rule, every
// cell a single token (CHOICE "nccl" where the plan leaves the choice to
// NCCL, CHANNELS "-" where it does not set them) and the reason last.
func (a *app) printPlanRules(p *ginv1.Plan) error {
	overrides := 0
	for _, r := range p.GetRules() {
		if planread.Overrides(r) {
			overrides++
		}
	}
	a.summary("plan for job %s: %d nodes × %d GPUs, model %s, hash %.12s, %d rules, %d override NCCL",
		p.GetJobId(), len(p.GetNodes()), p.GetGpusPerNode(), p.GetModelVersion(), p.GetContentHash(), len(p.GetRules()), overrides)
	t := a.newTable("COLLECTIVE", "RANKS", "NODES", "SIZES", "CHOICE", "CHANNELS", "TIME_US", "WHY")
	for _, r := range p.GetRules() {
		// CHOICE is the rule's ordered choices where it has them
		// ("nccl(nvls_tree),tree/simple": the plugin takes the first NCCL's
		// cost table offers), else its one cell.
		choice, channels := "nccl", "-"
		if len(r.GetChoices()) > 0 {
			choice = planread.Choices(r)
		} else if r.GetAlgorithm() != ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
			choice = planread.CellName(r.GetAlgorithm(), r.GetProtocol())
			if r.GetChannels() > 0 {
				channels = fmt.Sprint(r.GetChannels())
			}
		}
		t.row(r.GetCollective(), r.GetNRanks(), r.GetNNodes(), planread.SizeRange(r.GetMinLog2Bytes(), r.GetMaxLog2Bytes()),
			choice, channels, fmt.Sprintf("%.1f", r.GetPredictedUs()), text(r.GetReason()))
	}
	return t.flush()
}
