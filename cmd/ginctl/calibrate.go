package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/calib"
	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/nccltests"
)

// maxLogBytes bounds an imported nccl-tests log.
const maxLogBytes = 64 << 20

func (a *app) withCalibration(ctx context.Context, fn func(context.Context, ginv1.CalibrationServiceClient) error) error {
	return withService(ctx, a, ginv1.NewCalibrationServiceClient, fn)
}

func (a *app) calibrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "calibrate",
		Short: "Import and manage measured collective times (nccl-tests runs)",
		Long: `GIN's estimates and plans use what your cluster measured where it has a
measurement for the placement's shape (GPU model, NVLink domain, GPUs and NICs per
node, NIC rate, node count, fabric tiers): see docs/CALIBRATION.md.`,
	}
	cmd.AddCommand(a.calibrateImportCmd(), a.calibrateListCmd(), a.calibrateShowCmd(), a.calibrateDeleteCmd(), a.calibrateCompareCmd())
	return cmd
}

func (a *app) calibrateImportCmd() *cobra.Command {
	var file, inspectorPath, tunerCSV, nodes, algo, proto, job, ncclVersion string
	var gpn int
	var force bool
	cmd := &cobra.Command{
		Use:   "import (--nccl-tests FILE --nodes LIST | --tuner-csv FILE --nodes LIST | --nccl-inspector PATH [--nodes LIST] [--job ID])",
		Short: "Store the runs of an nccl-tests log, a tuner measurement CSV or a job's NCCL Inspector dump, keyed by the nodes' shape",
		Long: `Parse nccl-tests output (a file, or - for standard input: a terminal capture, a
Slurm or mpirun log, several tests in one file) and store each run of a collective
NCCL's tuner sees (all_reduce, all_gather, reduce_scatter, broadcast, reduce) through
Raft. --nodes names the GIN nodes it ran on, in rank order. The forced algorithm and
protocol come from --algo/--proto, else from the log's "NCCL_ALGO/NCCL_PROTO set by
environment" lines, else the run measured NCCL's default choice. A log that does
not parse changes nothing and the error names the line.

--tuner-csv FILE reads the measurement CSV of NCCL's example tuner's
optimize_config.py (plugins/tuner/example/scripts: collective, size_bytes,
algorithm, protocol, channels, nodes, ranks, pipeOps, regBuff, cost_metric,
bandwidth_gbps, latency_us): one measurement per collective, algorithm, protocol,
nodes and ranks, its times from latency_us, on --nodes (rows whose nodes or ranks
differ from --nodes and --gpus-per-node are refused, or with --force stored
flagged); --nccl-version says which NCCL measured it (the file does not).

--nccl-inspector PATH reads what NCCL's Inspector profiler plugin wrote for a job (a
file or a directory of them, JSON or verbose JSON): each communicator's collectives by
size, stored as production measurements of its nodes (the dump's host names, or
--nodes). With --job, what ran in each size range is the job's pinned plan's choice
where it forced one, else NCCL's choice.

The log's ranks must have run where --nodes says: the same host names, GPUs of the
nodes' model, no more ranks per host than the node's GPUs. A log that differs is
refused with the line and the difference; --force stores it anyway, flagged in its
source.

An import that is 10% or more slower, at some size, than a stored measurement of
the same shape, collective and cell at an older NCCL version says so on standard
error (ginctl calibrate compare names every size).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if inspectorPath != "" {
				if file != "" || algo != "" || proto != "" {
					return usageError{fmt.Errorf("--nccl-inspector takes neither --nccl-tests, --algo nor --proto")}
				}
				if tunerCSV != "" {
					return usageError{fmt.Errorf("--nccl-inspector and --tuner-csv are two imports: give one")}
				}
				return a.importInspector(cmd.Context(), inspectorPath, nodes, job, ncclVersion, force)
			}
			if tunerCSV != "" {
				if file != "" || algo != "" || proto != "" || job != "" {
					return usageError{fmt.Errorf("--tuner-csv takes neither --nccl-tests, --algo, --proto nor --job (the file names each row's algorithm and protocol)")}
				}
				return a.importTunerCSV(cmd.Context(), tunerCSV, nodes, gpn, ncclVersion, force)
			}
			if file == "" || nodes == "" {
				return usageError{fmt.Errorf("--nccl-tests FILE and --nodes LIST (or --tuner-csv FILE and --nodes LIST, or --nccl-inspector PATH) are required")}
			}
			names, err := hostlist.Expand(nodes)
			if err != nil {
				return usageError{fmt.Errorf("--nodes: %w", err)}
			}
			if gpn < 0 {
				return usageError{fmt.Errorf("--gpus-per-node %d", gpn)}
			}
			if algo != "" {
				if _, err := calib.ParseAlgorithm(algo); err != nil {
					return usageError{fmt.Errorf("--algo: %w", err)}
				}
			}
			if proto != "" {
				if _, err := calib.ParseProtocol(proto); err != nil {
					return usageError{fmt.Errorf("--proto: %w", err)}
				}
			}
			in, closeIn, err := a.openInput("--nccl-tests", file)
			if err != nil {
				return err
			}
			defer closeIn()
			log, err := nccltests.Parse(io.LimitReader(in, maxLogBytes))
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			reqs, runOf, skipped, err := importRequestsOf(log, names, nodes, gpn, algo, proto, file)
			if err != nil {
				return err
			}
			gpus, err := a.clusterGPUs(cmd.Context(), names)
			if err != nil {
				return err
			}
			for i, req := range reqs {
				var ranks []calib.RankPlace
				for _, rk := range log.Runs[runOf[i]].Ranks {
					ranks = append(ranks, calib.RankPlace{Where: fmt.Sprintf("line %d", rk.Line), Rank: rk.Rank, Host: rk.Host, GPUModel: rk.Name})
				}
				if err := a.flagDifferences(req, calib.CheckPlacement(ranks, names, int(req.GetGpusPerNode()), gpus), force); err != nil {
					return err
				}
			}
			var out []*ginv1.ImportMeasurementResponse
			for _, req := range reqs {
				var resp *ginv1.ImportMeasurementResponse
				if err := a.withCalibration(cmd.Context(), func(ctx context.Context, cc ginv1.CalibrationServiceClient) (err error) {
					resp, err = cc.ImportMeasurement(ctx, req)
					return err
				}); err != nil {
					return err
				}
				out = append(out, resp)
			}
			for _, note := range skipped {
				fmt.Fprintf(a.stderr, "ginctl: skipped %s\n", note)
			}
			return a.finishImport(cmd.Context(), out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "nccl-tests", "", "nccl-tests output to import (- for standard input)")
	f.StringVar(&nodes, "nodes", "", "the nodes it ran on, in rank order (Slurm hostlist)")
	f.IntVar(&gpn, "gpus-per-node", 0, "GPUs per node (default: from the log's rank lines, or the CSV's ranks / nodes)")
	f.StringVar(&algo, "algo", "", "the algorithm NCCL_ALGO forced (ring, tree, nvls, nvlstree, ...)")
	f.StringVar(&proto, "proto", "", "the protocol NCCL_PROTO forced (LL, LL128, Simple)")
	f.StringVar(&tunerCSV, "tuner-csv", "", "a measurement CSV of NCCL's example tuner (optimize_config.py's input) to import (- for standard input)")
	f.StringVar(&inspectorPath, "nccl-inspector", "", "an NCCL Inspector dump to import: a file or a directory (NCCL_INSPECTOR_DUMP_DIR)")
	f.StringVar(&job, "job", "", "with --nccl-inspector: the job whose pinned plan says what ran")
	f.StringVar(&ncclVersion, "nccl-version", "", "with --nccl-inspector or --tuner-csv: the NCCL version that ran (the file does not say)")
	f.BoolVar(&force, "force", false, "store a log whose hosts, GPU models or GPU counts differ from --nodes, flagged")
	return cmd
}

// importRequests turns a parsed log into one request per storable run.
func importRequests(log *nccltests.Log, names []string, nodes string, gpn int, algo, proto, source string) ([]*ginv1.ImportMeasurementRequest, []string, error) {
	reqs, _, skipped, err := importRequestsOf(log, names, nodes, gpn, algo, proto, source)
	return reqs, skipped, err
}

// importRequestsOf is importRequests with, for each request, the index of
// its run in log.Runs.
func importRequestsOf(log *nccltests.Log, names []string, nodes string, gpn int, algo, proto, source string) ([]*ginv1.ImportMeasurementRequest, []int, []string, error) {
	var reqs []*ginv1.ImportMeasurementRequest
	var runOf []int
	var skipped []string
	for i := range log.Runs {
		r := &log.Runs[i]
		where := fmt.Sprintf("run at line %d", r.Line)
		if len(r.Rows) == 0 {
			continue
		}
		coll, ok := calib.Collective(r.Collective)
		if !ok {
			name := r.Collective
			if name == "" {
				name = "an unnamed test"
			}
			skipped = append(skipped, fmt.Sprintf("%s: %s is not a collective NCCL's tuner sees", where, name))
			continue
		}
		if r.NNodes > 0 && r.NNodes != len(names) {
			return nil, nil, nil, fmt.Errorf("%s: the log ran on %d node(s) (%s), --nodes names %d", where, r.NNodes, hostlist.Compress(r.Hosts()), len(names))
		}
		g := gpn
		if g == 0 {
			g = r.GPUsPerNode()
		}
		if g == 0 {
			return nil, nil, nil, fmt.Errorf("%s: the log does not say how many GPUs per node; give --gpus-per-node", where)
		}
		if r.NRanks > 0 && r.NRanks != g*len(names) {
			return nil, nil, nil, fmt.Errorf("%s: %d ranks, but %d nodes × %d GPUs is %d", where, r.NRanks, len(names), g, g*len(names))
		}
		forced, note, err := calib.ForcedOf(r, algo, proto)
		if err != nil {
			return nil, nil, nil, usageError{err}
		}
		if note != "" {
			skipped = append(skipped, fmt.Sprintf("%s: %s", where, note))
		}
		pts, err := calib.Points(r)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", where, err)
		}
		runOf = append(runOf, i)
		reqs = append(reqs, &ginv1.ImportMeasurementRequest{
			Nodes: nodes, GpusPerNode: uint32(g), Collective: coll,
			Algorithm: forced.Algorithm, Protocol: forced.Protocol, ForcedBy: forced.By,
			NcclVersion: r.NCCLVersion, Source: fmt.Sprintf("%s:%d", baseName(source), r.Line), Points: pts,
		})
	}
	if len(reqs) == 0 {
		return nil, nil, skipped, fmt.Errorf("no run of all_reduce, all_gather, reduce_scatter, broadcast or reduce in the log")
	}
	return reqs, runOf, skipped, nil
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	if len(p) > 200 {
		p = p[:200]
	}
	return p
}

// cellLabel is "ring/simple", "tree/*" or "NCCL's default".
func cellLabel(a ginv1.Algorithm, p ginv1.Protocol) string {
	if a == 0 && p == 0 {
		return "default"
	}
	an, pn := "*", "*"
	if a != 0 {
		an = strings.ToLower(strings.TrimPrefix(a.String(), "ALGORITHM_"))
	}
	if p != 0 {
		pn = strings.ToLower(strings.TrimPrefix(p.String(), "PROTOCOL_"))
	}
	return an + "/" + pn
}

func summary(m *ginv1.Measurement) string {
	pts := m.GetPoints()
	sizes := ""
	if len(pts) > 0 {
		sizes = fmt.Sprintf(", %d size%s %s–%s", len(pts), plural(len(pts)), humanBytes(pts[0].GetBytes()), humanBytes(pts[len(pts)-1].GetBytes()))
	}
	what := cellLabel(m.GetAlgorithm(), m.GetProtocol()) + " (forced by " + m.GetForcedBy() + ")"
	if m.GetForcedBy() == "default" {
		what = "NCCL's default choice"
	}
	return fmt.Sprintf("%s %s on %s%s", collName(m.GetCollective()), what, hostlist.Compress(m.GetNodes()), sizes)
}

func shapeLine(s *ginv1.PlacementShape) string {
	nic := ""
	if s.GetNicsPerNode() > 0 {
		nic = fmt.Sprintf(", %d NIC%s × %g Gb/s", s.GetNicsPerNode(), plural(s.GetNicsPerNode()), s.GetNicGbps())
	}
	v := s.GetNcclVersion()
	if v == "" {
		v = "?"
	}
	model := s.GetGpuModel()
	if model == "" {
		model = "GPU"
	}
	return fmt.Sprintf("shape %d × %d %s, NVLink domain %d%s, %d switch hop%s, NCCL %s",
		s.GetNodeCount(), s.GetGpusPerNode(), model, s.GetNvlinkDomainSize(), nic, s.GetFabricTiers(), plural(s.GetFabricTiers()), v)
}

// plural is the "s" of a count's noun: "1 NIC", "2 NICs".
func plural[N ~int32 | ~uint32 | ~int](n N) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func collName(c ginv1.Collective) string {
	return strings.ToLower(strings.TrimPrefix(c.String(), "COLLECTIVE_"))
}

// humanBytes writes a size in the largest binary unit it is a whole
// number of, below 10,000 of them ("32 MiB", "1536 KiB"); any other size
// (nccl-tests' sizes are multiples of the element count, e.g. 33,553,920
// B) in the largest unit it reaches, to three significant digits, marked
// "≈" ("≈32.0 MiB", "≈16.0 GiB").
func humanBytes(b uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for i < len(units)-1 && b >= 1<<(10*(i+1)) && b%(1<<(10*(i+1))) == 0 {
		i++
	}
	if b < 1024 || (i > 0 && b>>(10*i) < 10000) {
		return fmt.Sprintf("%d %s", b>>(10*i), units[i])
	}
	j := 0
	for j < len(units)-1 && b >= 1<<(10*(j+1)) {
		j++
	}
	v := float64(b) / float64(uint64(1)<<(10*j))
	return "≈" + strconv.FormatFloat(v, 'f', max(0, 2-int(math.Floor(math.Log10(v)))), 64) + " " + units[j]
}

func (a *app) calibrateListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the stored measurements",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp *ginv1.ListMeasurementsResponse
			if err := a.withCalibration(cmd.Context(), func(ctx context.Context, cc ginv1.CalibrationServiceClient) (err error) {
				resp, err = cc.ListMeasurements(ctx, &ginv1.ListMeasurementsRequest{})
				return err
			}); err != nil {
				return err
			}
			if a.output == "json" {
				return a.printJSON(resp)
			}
			t := a.newTable("ID", "COLLECTIVE", "ALGO/PROTO", "BY", "NODES", "GPUS/NODE", "GPU", "NCCL", "SOURCE")
			for _, m := range resp.GetMeasurements() {
				s := m.GetShape()
				t.row(m.GetId(), collName(m.GetCollective()), cellLabel(m.GetAlgorithm(), m.GetProtocol()), m.GetForcedBy(),
					hostlist.Compress(m.GetNodes()), s.GetGpusPerNode(), s.GetGpuModel(), s.GetNcclVersion(), m.GetSource())
			}
			return t.flush()
		},
	}
}

func (a *app) calibrateShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show one measurement and its points",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp *ginv1.GetMeasurementResponse
			if err := a.withCalibration(cmd.Context(), func(ctx context.Context, cc ginv1.CalibrationServiceClient) (err error) {
				resp, err = cc.GetMeasurement(ctx, &ginv1.GetMeasurementRequest{Id: args[0]})
				return err
			}); err != nil {
				return err
			}
			if a.output == "json" {
				return a.printJSON(resp)
			}
			m := resp.GetMeasurement()
			if !a.noHeaders {
				fmt.Fprintf(a.stdout, "measurement %s: %s\n%s\nsource %s, stored at index %d\n", m.GetId(), summary(m), shapeLine(m.GetShape()), escapeText(dash(m.GetSource())), m.GetCreatedIndex())
			}
			t := a.newTable("SIZE", "BYTES", "TIME_US", "BUSBW_GBPS", "NCCL_USED")
			for _, p := range m.GetPoints() {
				used := "-"
				if p.GetNcclAlgorithm() != 0 || p.GetNcclProtocol() != 0 {
					used = cellLabel(p.GetNcclAlgorithm(), p.GetNcclProtocol())
				}
				t.row(humanBytes(p.GetBytes()), p.GetBytes(), fmt.Sprintf("%.2f", p.GetTimeUs()), fmt.Sprintf("%.2f", p.GetBusBwGbps()), used)
			}
			return t.flush()
		},
	}
}

func (a *app) calibrateDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a measurement (a missing one is not an error)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp *ginv1.DeleteMeasurementResponse
			if err := a.withCalibration(cmd.Context(), func(ctx context.Context, cc ginv1.CalibrationServiceClient) (err error) {
				resp, err = cc.DeleteMeasurement(ctx, &ginv1.DeleteMeasurementRequest{Id: args[0]})
				return err
			}); err != nil {
				return err
			}
			if a.output == "json" {
				return a.printJSON(resp)
			}
			if resp.GetChanged() {
				fmt.Fprintf(a.stdout, "deleted %s at index %d\n", args[0], resp.GetIndex())
			} else {
				fmt.Fprintf(a.stdout, "no measurement %s\n", args[0])
			}
			return nil
		},
	}
}
