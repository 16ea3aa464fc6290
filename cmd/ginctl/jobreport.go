package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/calib"
	"github.com/gin-topology/gin/internal/costmodel"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/hostlist"
)

// expectedWithin is how far measured busbw may be from GIN's prediction
// and still read "as expected": the model's held-out error on published
// runs (docs/CALIBRATION.md: median 2.4%, worst 11.3%) plus nccl-tests'
// run-to-run spread.
const expectedWithin = 0.15

// jobReport is `ginctl job report`'s answer: for each communicator shape,
// collective and size the job's production measurements cover, GIN's
// prediction on a healthy fabric against what was measured, and, where
// the job was slower, what GIN's topology can name on its nodes.
type jobReport struct {
	Job      string          `json:"job"`
	Nodes    []string        `json:"nodes"`
	Rows     []jobReportRow  `json:"rows"`
	Suspects []jobReportNote `json:"suspects"`
}

type jobReportRow struct {
	NRanks      uint32  `json:"n_ranks"`
	NNodes      uint32  `json:"n_nodes"`
	Collective  string  `json:"collective"`
	SizeBytes   uint64  `json:"size_bytes"`
	Ran         string  `json:"ran"`
	PredictedGB float64 `json:"predicted_busbw_gbps"`
	MeasuredGB  float64 `json:"measured_busbw_gbps"`
	// Verdict: "as expected", "slower than GIN expected by N%", "faster
	// than GIN expected by N%", or "no prediction".
	Verdict     string `json:"verdict"`
	Measurement string `json:"measurement"`
}

type jobReportNote struct {
	Node string `json:"node"`
	What string `json:"what"`
}

// isJobSource says whether a measurement's source is a production import
// of job (calibrate import --nccl-inspector --job).
func isJobSource(src, job string) bool {
	if !strings.HasPrefix(src, "nccl-inspector:") {
		return false
	}
	i := strings.Index(src, " job "+job)
	if i < 0 {
		return false
	}
	rest := src[i+len(" job "+job):]
	return rest == "" || rest[0] == ' '
}

// buildJobReport compares each point of the job's measurements with GIN's
// model of what ran on the healthy fabric of its nodes (costmodel.Ideal:
// NICs and NVLinks at their nominal rate and count), and names the
// degraded or down NICs and NVLinks of the nodes of any slower row.
func buildJobReport(job string, g *graph.Graph, invs []*ginv1.NodeInventory, ms []*ginv1.Measurement) jobReport {
	r := jobReport{Job: job, Nodes: []string{}, Rows: []jobReportRow{}, Suspects: []jobReportNote{}}
	nodes := map[string]bool{}
	slowNodes := map[string]bool{}
	for _, m := range ms {
		for _, n := range m.GetNodes() {
			nodes[n] = true
		}
		s, err := costmodel.ShapeOf(g, m.GetNodes(), int(m.GetShape().GetGpusPerNode()))
		var curve calib.Curve
		if err == nil {
			curve = calib.CellCurve(costmodel.Ideal(s), m)
		}
		ran := "nccl"
		if m.GetAlgorithm() != ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
			ran = cellLabel(m.GetAlgorithm(), m.GetProtocol())
		}
		nRanks := m.GetShape().GetGpusPerNode() * m.GetShape().GetNodeCount()
		for _, p := range m.GetPoints() {
			row := jobReportRow{NRanks: nRanks, NNodes: m.GetShape().GetNodeCount(), Collective: collName(m.GetCollective()),
				SizeBytes: p.GetBytes(), Ran: ran, MeasuredGB: round2(p.GetBusBwGbps()), Verdict: "no prediction", Measurement: m.GetId()}
			if row.MeasuredGB == 0 && p.GetTimeUs() > 0 {
				row.MeasuredGB = round2(float64(p.GetBytes()) / p.GetTimeUs() / 1000 * costmodel.BusFactor(m.GetCollective(), int(nRanks)))
			}
			if curve != nil {
				if us := curve(p.GetBytes()); us > 0 {
					row.PredictedGB = round2(float64(p.GetBytes()) / us / 1000 * costmodel.BusFactor(m.GetCollective(), int(nRanks)))
				}
			}
			if row.PredictedGB > 0 && row.MeasuredGB > 0 {
				ratio := row.MeasuredGB/row.PredictedGB - 1
				switch {
				case math.Abs(ratio) <= expectedWithin:
					row.Verdict = "as expected"
				case ratio < 0:
					row.Verdict = fmt.Sprintf("slower than GIN expected by %.0f%%", -100*ratio)
					for _, n := range m.GetNodes() {
						slowNodes[n] = true
					}
				default:
					row.Verdict = fmt.Sprintf("faster than GIN expected by %.0f%%", 100*ratio)
				}
			}
			r.Rows = append(r.Rows, row)
		}
	}
	for n := range nodes {
		r.Nodes = append(r.Nodes, n)
	}
	sort.Strings(r.Nodes)
	r.Suspects = suspects(invs, slowNodes)
	return r
}

// suspects names, on the nodes of slower rows, compute NIC ports that are
// not active or run below the fastest rate of the job's compute NICs, and
// NVLinks that are down.
func suspects(invs []*ginv1.NodeInventory, on map[string]bool) []jobReportNote {
	out := []jobReportNote{}
	var top uint32
	for _, inv := range invs {
		for _, h := range inv.GetHcas() {
			if h.GetRole() == ginv1.HcaRole_HCA_ROLE_COMPUTE {
				for _, p := range h.GetPorts() {
					top = max(top, p.GetRateGbps())
				}
			}
		}
	}
	for _, inv := range invs {
		n := inv.GetNodeName()
		if !on[n] {
			continue
		}
		for _, h := range inv.GetHcas() {
			if h.GetRole() != ginv1.HcaRole_HCA_ROLE_COMPUTE {
				continue
			}
			for _, p := range h.GetPorts() {
				switch {
				case p.GetState() != ginv1.PortState_PORT_STATE_ACTIVE:
					out = append(out, jobReportNote{n, fmt.Sprintf("NIC %s port %d is %s", h.GetName(), p.GetPort(), portWord(p.GetState()))})
				case p.GetRateGbps() < top:
					out = append(out, jobReportNote{n, fmt.Sprintf("NIC %s port %d at %d Gb/s, the job's other compute NICs at %d Gb/s", h.GetName(), p.GetPort(), p.GetRateGbps(), top)})
				}
			}
		}
		for _, gp := range inv.GetGpus() {
			for _, l := range gp.GetNvlinks() {
				if l.GetState() == ginv1.LinkState_LINK_STATE_DOWN {
					out = append(out, jobReportNote{n, fmt.Sprintf("GPU%d NVLink %d is down", gp.GetIndex(), l.GetIndex())})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Node != out[j].Node {
			return out[i].Node < out[j].Node
		}
		return out[i].What < out[j].What
	})
	return out
}

func portWord(s ginv1.PortState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "PORT_STATE_"))
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

func (a *app) jobCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "job", Short: "What GIN knows of a job"}
	cmd.AddCommand(a.jobReportCmd())
	return cmd
}

func (a *app) jobReportCmd() *cobra.Command {
	var job string
	cmd := &cobra.Command{
		Use:   "report --job ID",
		Short: "Did a job get the bandwidth it should have? Predicted vs measured busbw, and where to look",
		Long: `For each communicator shape, collective and size of the job's production
measurements (ginctl calibrate import --nccl-inspector PATH --job ID, or the Slurm
epilog), GIN's predicted busbw on a healthy fabric of its nodes against what the job
measured, what ran, and a verdict: as expected (within 15%), slower or faster than
GIN expected by N%. Where a row is slower, the suspects GIN's topology names on its
nodes: compute NIC ports down or below the job's other NICs' rate, NVLinks down.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if job == "" {
				return usageError{fmt.Errorf("--job ID is required")}
			}
			r, err := a.jobReport(cmd.Context(), job)
			if err != nil {
				return err
			}
			if a.output == "json" {
				return a.printJSON(r)
			}
			a.summary("job %s on %s: %d rows", job, hostlist.Compress(r.Nodes), len(r.Rows))
			t := a.newTable("RANKS", "NODES", "COLLECTIVE", "SIZE", "RAN", "PREDICTED_GBPS", "MEASURED_GBPS", "VERDICT")
			for _, row := range r.Rows {
				t.row(row.NRanks, row.NNodes, row.Collective, humanSize(row.SizeBytes), row.Ran,
					fmt.Sprintf("%.1f", row.PredictedGB), fmt.Sprintf("%.1f", row.MeasuredGB), text(row.Verdict))
			}
			if err := t.flush(); err != nil {
				return err
			}
			for _, s := range r.Suspects {
				fmt.Fprintln(a.stdout, escapeText(fmt.Sprintf("suspect %s: %s", s.Node, s.What)))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&job, "job", "", "the job id")
	return cmd
}

// jobReport fetches the job's production measurements and its nodes'
// graph, and builds the report.
func (a *app) jobReport(ctx context.Context, job string) (jobReport, error) {
	var ms []*ginv1.Measurement
	if err := a.withCalibration(ctx, func(ctx context.Context, cc ginv1.CalibrationServiceClient) error {
		list, err := cc.ListMeasurements(ctx, &ginv1.ListMeasurementsRequest{})
		if err != nil {
			return err
		}
		for _, m := range list.GetMeasurements() {
			if !isJobSource(m.GetSource(), job) {
				continue
			}
			full, err := cc.GetMeasurement(ctx, &ginv1.GetMeasurementRequest{Id: m.GetId()})
			if err != nil {
				return fmt.Errorf("measurement %s: %w", m.GetId(), err)
			}
			ms = append(ms, full.GetMeasurement())
		}
		return nil
	}); err != nil {
		return jobReport{}, err
	}
	if len(ms) == 0 {
		return jobReport{}, fmt.Errorf("job %s: no production measurements (import its NCCL Inspector dump: ginctl calibrate import --nccl-inspector PATH --job %s)", job, job)
	}
	var names []string
	seen := map[string]bool{}
	for _, m := range ms {
		for _, n := range m.GetNodes() {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	var gr *ginv1.GetGraphResponse
	if err := a.withTopology(ctx, func(ctx context.Context, tc ginv1.TopologyServiceClient) (err error) {
		gr, err = tc.GetGraph(ctx, &ginv1.GetGraphRequest{Nodes: hostlist.Compress(names), Consistency: a.consistency()})
		return err
	}); err != nil {
		return jobReport{}, err
	}
	g, err := graph.Build(gr.GetInventories(), gr.GetFabric())
	if err != nil {
		return jobReport{}, fmt.Errorf("the job's graph: %w", err)
	}
	return buildJobReport(job, g, gr.GetInventories(), ms), nil
}

// humanSize writes a size as one token: "16G", "512M", "8K", "100B"
// (powers of two exactly; otherwise the bytes).
func humanSize(b uint64) string {
	for _, u := range []struct {
		shift uint
		unit  string
	}{{40, "T"}, {30, "G"}, {20, "M"}, {10, "K"}} {
		if b >= 1<<u.shift && b%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", b>>u.shift, u.unit)
		}
	}
	return fmt.Sprintf("%dB", b)
}
