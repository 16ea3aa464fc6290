package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/calib"
	"github.com/gin-topology/gin/internal/costmodel"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/livejob"
)

// expectedWithin is how far measured busbw may be from GIN's prediction
// and still read "as expected": the model's held-out error on published
// runs (docs/CALIBRATION.md: median 2.4%, worst 11.3%) plus nccl-tests'
// run-to-run spread.
const expectedWithin = 0.15

// jobReport is `ginctl job report`'s answer. While the job runs, what the
// masters see of it live (its ranks as the profiler plugin reports them,
// and the suspects the leader holds responsible for a slowdown or a hang,
// docs/LIVE.md); and for each communicator shape, collective and size the
// job's production measurements cover, GIN's prediction on a healthy
// fabric against what was measured, and, where the job was slower, what
// GIN's topology can name on its nodes.
type jobReport struct {
	Job      string         `json:"job"`
	Nodes    []string       `json:"nodes"`
	Rows     []jobReportRow `json:"rows"`
	Suspects []jobSuspect   `json:"suspects"`
	Live     jobLive        `json:"live"`
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

// kindTopology is the kind of a suspect GIN's topology names (a compute
// NIC port down or slow, an NVLink down) on the nodes of a slower row; the
// live kinds are livejob's ("slow-link", "straggler", "hang").
const kindTopology = "topology"

// jobSuspect is a component held responsible for a slowdown or a hang:
// one of the masters' live suspects, or a topology note.
type jobSuspect struct {
	Node string `json:"node"`
	// Component: "mlx5_2" (slow-link), "gpu3" (straggler, hang),
	// "mlx5_2 port 1" or "gpu3 nvlink 4" (topology).
	Component string `json:"component"`
	Kind      string `json:"kind"`
	// Slowdown: how many times as long as the job's healthy ranks (for a
	// hang, how long progress has stopped over their collective time); 0
	// for a topology note.
	Slowdown float64 `json:"slowdown"`
	// Since: RFC 3339, "" when unknown (a topology note).
	Since     string   `json:"since"`
	Confirmed bool     `json:"confirmed"`
	Evidence  []string `json:"evidence"`
	Rank      int64    `json:"rank"` // -1: not a rank (a topology note)
	GPU       int32    `json:"gpu"`  // NVML index; -1 unknown
	NIC       string   `json:"nic"`
	Switch    string   `json:"switch"`
	What      string   `json:"what"` // one line
	Comm      string   `json:"comm"` // the communicator, "0x…"; "" for a topology note
}

// jobLive is what the masters see of the running job; Running is false
// (and the lists empty) when no rank of it reported within the live
// horizon.
type jobLive struct {
	Running        bool          `json:"running"`
	LastReport     string        `json:"last_report"` // RFC 3339, "" when not running
	RanksReporting int           `json:"ranks_reporting"`
	MissingRanks   uint32        `json:"missing_ranks"`
	Ranks          []jobLiveRank `json:"ranks"`
}

type jobLiveRank struct {
	Comm             string  `json:"comm"`
	Rank             uint32  `json:"rank"`
	Node             string  `json:"node"`
	GPU              int32   `json:"gpu"`
	NIC              string  `json:"nic"`
	LastReport       string  `json:"last_report"`
	CollectivesDone  uint64  `json:"collectives_done"`
	MeanCollectiveUs float64 `json:"mean_collective_us"`
	SendUsPerMiB     float64 `json:"send_us_per_mib"`
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
	r := emptyJobReport(job)
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
func suspects(invs []*ginv1.NodeInventory, on map[string]bool) []jobSuspect {
	out := []jobSuspect{}
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
				component := fmt.Sprintf("%s port %d", h.GetName(), p.GetPort())
				switch {
				case p.GetState() != ginv1.PortState_PORT_STATE_ACTIVE:
					out = append(out, topologySuspect(n, component, -1, h.GetName(),
						fmt.Sprintf("NIC %s port %d is %s", h.GetName(), p.GetPort(), portWord(p.GetState()))))
				case p.GetRateGbps() < top:
					out = append(out, topologySuspect(n, component, -1, h.GetName(),
						fmt.Sprintf("NIC %s port %d at %d Gb/s, the job's other compute NICs at %d Gb/s", h.GetName(), p.GetPort(), p.GetRateGbps(), top)))
				}
			}
		}
		for _, gp := range inv.GetGpus() {
			for _, l := range gp.GetNvlinks() {
				if l.GetState() == ginv1.LinkState_LINK_STATE_DOWN {
					out = append(out, topologySuspect(n, fmt.Sprintf("gpu%d nvlink %d", gp.GetIndex(), l.GetIndex()), int32(gp.GetIndex()), "",
						fmt.Sprintf("GPU%d NVLink %d is down", gp.GetIndex(), l.GetIndex())))
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

// topologySuspect is a topology note as a suspect: no rank, no time, its
// one line as its evidence.
func topologySuspect(node, component string, gpu int32, nic, what string) jobSuspect {
	return jobSuspect{Node: node, Component: component, Kind: kindTopology, Evidence: []string{what},
		Rank: -1, GPU: gpu, NIC: nic, What: what}
}

// emptyJobReport is a report of nothing: every list empty, not running.
func emptyJobReport(job string) jobReport {
	return jobReport{Job: job, Nodes: []string{}, Rows: []jobReportRow{}, Suspects: []jobSuspect{},
		Live: jobLive{Ranks: []jobLiveRank{}}}
}

// addLive adds what the masters see of the running job: its ranks, its
// nodes, and its suspects before the topology notes (confirmed first, then
// the largest slowdown).
func (r *jobReport) addLive(resp *ginv1.GetJobLiveResponse) {
	if resp == nil {
		return
	}
	r.Live = liveOf(resp)
	nodes := map[string]bool{}
	for _, n := range r.Nodes {
		nodes[n] = true
	}
	for _, rk := range resp.GetRanks() {
		if n := rk.GetNode(); n != "" && !nodes[n] {
			nodes[n] = true
			r.Nodes = append(r.Nodes, n)
		}
	}
	sort.Strings(r.Nodes)
	r.Suspects = append(liveSuspects(resp.GetSuspects()), r.Suspects...)
}

func liveOf(resp *ginv1.GetJobLiveResponse) jobLive {
	l := jobLive{Running: true, LastReport: jsonTime(resp.GetLastReport()), RanksReporting: len(resp.GetRanks()),
		MissingRanks: resp.GetMissingRanks(), Ranks: []jobLiveRank{}}
	for _, rk := range resp.GetRanks() {
		l.Ranks = append(l.Ranks, jobLiveRank{Comm: commID(rk.GetCommId()), Rank: rk.GetRank(), Node: rk.GetNode(),
			GPU: rk.GetGpuIndex(), NIC: rk.GetNic(), LastReport: jsonTime(rk.GetLastReport()),
			CollectivesDone: rk.GetCollectivesDone(), MeanCollectiveUs: finite2(rk.GetMeanCollectiveUs()),
			SendUsPerMiB: finite2(rk.GetSendUsPerMib())})
	}
	sort.SliceStable(l.Ranks, func(i, j int) bool {
		if l.Ranks[i].Comm != l.Ranks[j].Comm {
			return l.Ranks[i].Comm < l.Ranks[j].Comm
		}
		return l.Ranks[i].Rank < l.Ranks[j].Rank
	})
	return l
}

// liveSuspects are the masters' suspects, confirmed first, then by
// slowdown (largest first).
func liveSuspects(ss []*ginv1.Suspect) []jobSuspect {
	out := make([]jobSuspect, 0, len(ss))
	for _, s := range ss {
		out = append(out, liveSuspect(s))
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.Confirmed != b.Confirmed:
			return a.Confirmed
		case a.Slowdown != b.Slowdown:
			return a.Slowdown > b.Slowdown
		}
		return suspectBefore(a, b)
	})
	return out
}

// suspectBefore orders suspects by what they name: node, component, kind,
// communicator, rank (a stable order for equal ones).
func suspectBefore(a, b jobSuspect) bool {
	switch {
	case a.Node != b.Node:
		return a.Node < b.Node
	case a.Component != b.Component:
		return a.Component < b.Component
	case a.Kind != b.Kind:
		return a.Kind < b.Kind
	case a.Comm != b.Comm:
		return a.Comm < b.Comm
	}
	return a.Rank < b.Rank
}

func liveSuspect(s *ginv1.Suspect) jobSuspect {
	j := jobSuspect{Node: s.GetNode(), Component: s.GetComponent(), Kind: s.GetKind(), Slowdown: finite2(s.GetSlowdown()),
		Since: jsonTime(s.GetSince()), Confirmed: s.GetConfirmed(), Evidence: append([]string{}, s.GetEvidence()...),
		Rank: int64(s.GetRank()), GPU: s.GetGpuIndex(), NIC: s.GetNic(), Switch: s.GetSwitchPort(), Comm: commID(s.GetCommId())}
	j.What = suspectWhat(j)
	return j
}

// suspectWhat is a live suspect in one line: "slow-link mlx5_2 on node003
// (rank 5): 1.8x the time of the job's healthy ranks, confirmed".
func suspectWhat(s jobSuspect) string {
	how := fmt.Sprintf("%sx the time of the job's healthy ranks", slowdownWord(s.Slowdown))
	if s.Kind == livejob.KindHang {
		how = fmt.Sprintf("no progress for %sx the job's collective time", slowdownWord(s.Slowdown))
	}
	w := fmt.Sprintf("%s %s on %s (rank %d): %s", s.Kind, s.Component, s.Node, s.Rank, how)
	if s.Confirmed {
		w += ", confirmed"
	}
	return w
}

// slowdownWord writes a slowdown with at most two decimals: "1.5", "2",
// "1.83".
func slowdownWord(v float64) string { return strconv.FormatFloat(round2(v), 'f', -1, 64) }

// finite2 is v to two decimals, 0 when not finite (JSON has no NaN).
func finite2(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return round2(v)
}

// commID writes a communicator id as NCCL's logs do: "0x5eed".
func commID(id uint64) string { return fmt.Sprintf("%#x", id) }

// jsonTime is a timestamp as the JSON convention writes one (UTC), "" when
// unset.
func jsonTime(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return ""
	}
	return ts.AsTime().UTC().Format(time.RFC3339Nano)
}

// clock is a timestamp as the tables print it: "03:45:12Z" (UTC), "-"
// when unset.
func clock(ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return "-"
	}
	return t.UTC().Format("15:04:05Z")
}

func portWord(s ginv1.PortState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "PORT_STATE_"))
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

func (a *app) jobCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "job", Short: "What GIN knows of a job, while it runs and after"}
	cmd.AddCommand(a.jobReportCmd(), a.jobWatchCmd())
	return cmd
}

func (a *app) withLive(ctx context.Context, fn func(context.Context, ginv1.LiveServiceClient) error) error {
	return withService(ctx, a, ginv1.NewLiveServiceClient, fn)
}

func (a *app) jobReportCmd() *cobra.Command {
	var job string
	cmd := &cobra.Command{
		Use:   "report --job ID",
		Short: "Is a job slow, and why? Live suspects while it runs; predicted vs measured busbw after",
		Long: `What GIN knows of a job, while it runs and after.

While it runs (with NCCL_GIN_ENABLED=1 and gin-agent on its nodes), the masters
see its ranks through the profiler plugin (docs/LIVE.md): how many report, and
the live suspects, the components they hold responsible for a slowdown or a
hang (a slow link: a NIC; a straggler or a hang: a GPU), how much slower, since
when, whether confirmed (seen in enough consecutive windows to act on), and the
numbers that show it. A job none of whose ranks reported in the last 2 minutes
has no live part. ginctl job watch follows the suspects as they change.

After it ran, for each communicator shape, collective and size of the job's
production measurements (ginctl calibrate import --nccl-inspector PATH --job ID,
or the Slurm epilog), GIN's predicted busbw on a healthy fabric of its nodes
against what the job measured, what ran, and a verdict: as expected (within
15%), slower or faster than GIN expected by N%. Where a row is slower, the
suspects GIN's topology names on its nodes: compute NIC ports down or below the
job's other NICs' rate, NVLinks down.

  $ ginctl job report --job 4242
  job 4242 on node[001-004]: 0 rows
  live: 32 ranks reporting (0 missing), last report 03:45:12Z
  suspect slow-link node003 mlx5_2: 1.8x since 03:44:50Z, confirmed
    rank 21 (node003 gpu5 mlx5_2) sends at 1.80x the network time per byte of the job's median rank (...)
    rank 22 (node004 gpu5 mlx5_2) receiving from it waits 1.62x the median receive

-o json: job, nodes, rows, suspects (live ones first) and live (docs/JSON.md).`,
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
			return a.printJobReport(r)
		},
	}
	cmd.Flags().StringVar(&job, "job", "", "the job id")
	return cmd
}

// printJobReport writes the report as a table: the summary, the live
// part, the rows (none: no table) and the topology notes.
func (a *app) printJobReport(r jobReport) error {
	a.summary("job %s on %s: %d rows", r.Job, hostlist.Compress(r.Nodes), len(r.Rows))
	if r.Live.Running {
		a.summary("live: %d ranks reporting (%d missing), last report %s", r.Live.RanksReporting, r.Live.MissingRanks, clock(r.Live.LastReport))
	}
	for _, s := range r.Suspects {
		if s.Kind == kindTopology {
			continue
		}
		line := fmt.Sprintf("suspect %s %s %s: %sx", cell(s.Kind), cell(s.Node), cell(s.Component), slowdownWord(s.Slowdown))
		if s.Since != "" {
			line += " since " + clock(s.Since)
		}
		if s.Confirmed {
			line += ", confirmed"
		}
		fmt.Fprintln(a.stdout, escapeText(line))
		for _, e := range s.Evidence {
			fmt.Fprintln(a.stdout, escapeText("  "+e))
		}
	}
	if len(r.Rows) > 0 {
		t := a.newTable("RANKS", "NODES", "COLLECTIVE", "SIZE", "RAN", "PREDICTED_GBPS", "MEASURED_GBPS", "VERDICT")
		for _, row := range r.Rows {
			t.row(row.NRanks, row.NNodes, row.Collective, humanSize(row.SizeBytes), row.Ran,
				fmt.Sprintf("%.1f", row.PredictedGB), fmt.Sprintf("%.1f", row.MeasuredGB), text(row.Verdict))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	for _, s := range r.Suspects {
		if s.Kind == kindTopology {
			fmt.Fprintln(a.stdout, escapeText(fmt.Sprintf("suspect %s: %s", s.Node, s.What)))
		}
	}
	return nil
}

// jobLive asks the masters what they see of the running job: nil (no
// error) when no rank of it reported within the live horizon (NOT_FOUND),
// or when the masters are older than live reports (UNIMPLEMENTED; old
// says so).
func (a *app) jobLive(ctx context.Context, job string) (resp *ginv1.GetJobLiveResponse, old bool, err error) {
	err = a.withLive(ctx, func(ctx context.Context, lc ginv1.LiveServiceClient) (err error) {
		resp, err = lc.GetJobLive(ctx, &ginv1.GetJobLiveRequest{JobId: job})
		return err
	})
	switch status.Code(err) {
	case codes.OK:
		return resp, false, nil
	case codes.NotFound:
		return nil, false, nil
	case codes.Unimplemented:
		return nil, true, nil
	}
	return nil, false, err
}

// jobReport asks the masters what they see of the job live, fetches its
// production measurements and its nodes' graph, and builds the report.
func (a *app) jobReport(ctx context.Context, job string) (jobReport, error) {
	live, old, err := a.jobLive(ctx, job)
	if err != nil {
		return jobReport{}, err
	}
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
		switch {
		case live != nil:
			r := emptyJobReport(job)
			r.addLive(live)
			return r, nil
		case old:
			return jobReport{}, fmt.Errorf("job %s: no production measurements (import its NCCL Inspector dump: ginctl calibrate import --nccl-inspector PATH --job %s); the masters are older than live job reports, upgrade them to see running jobs", job, job)
		}
		return jobReport{}, fmt.Errorf("job %s: GIN knows nothing of it: no rank reported while it ran (within the last %s; is it running with NCCL_GIN_ENABLED=1 and gin-agent on its nodes?) and no production measurements (import its NCCL Inspector dump: ginctl calibrate import --nccl-inspector PATH --job %s)", job, livejob.Default().Horizon, job)
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
	r := buildJobReport(job, g, gr.GetInventories(), ms)
	r.addLive(live)
	return r, nil
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
