package webui

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"slices"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/calib"
	"github.com/gin-topology/gin/internal/costmodel"
	"github.com/gin-topology/gin/internal/webui/draw"
)

// Bounds of a plan's charts: collectives charted, sizes per chart.
const (
	maxChartCollectives = 5
	minChartLog2        = 10 // 1 KiB
	maxChartLog2        = 34 // 16 GiB
	maxMeasuredMarks    = 2000
)

// jobPage is /ui/job?id=J: while the job runs, its ranks and suspects
// (the leader's live state); its nodes on the fabric, the suspects marked;
// and its plan as charts. A job with no plan pinned is drawn when it is
// live; one neither pinned nor live is not found.
func (h *handler) jobPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id := q.Get("id")
	if len(id) > maxJobIDLen || !jobIDRE.MatchString(id) {
		http.Error(w, "id: a job id is 1 to 128 characters of [A-Za-z0-9._:-]", http.StatusBadRequest)
		return
	}
	expanded, all, err := expandSet(q)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	plans, err := h.b.PinnedPlans(ctx)
	if err != nil {
		h.fail(w, err)
		return
	}
	var plan *ginv1.Plan
	if i := slices.IndexFunc(plans, func(p *ginv1.Plan) bool { return p.GetJobId() == id }); i >= 0 {
		plan = plans[i]
	}
	// The live state is the leader's: unavailable (an election, the
	// leader not answering) is said on the page, not a failure of it.
	var live *liveSection
	var marked map[string]string
	var liveNodes []string
	resp, liveErr := h.b.JobLive(ctx, id)
	switch {
	case liveErr != nil:
		live = liveUnavailable(liveErr)
	case resp != nil:
		live, marked, liveNodes = liveOf(resp)
	}
	if plan == nil && resp == nil {
		msg := fmt.Sprintf("no plan pinned for job %q, and no rank of it is reporting", id)
		if liveErr != nil {
			msg = fmt.Sprintf("no plan pinned for job %q (%s)", id, live.Err)
		}
		http.Error(w, msg, http.StatusNotFound)
		return
	}
	sc, err := h.scene(ctx)
	if err != nil {
		h.fail(w, err)
		return
	}
	highlight := make(map[string]bool, len(plan.GetNodes())+len(liveNodes))
	for _, n := range plan.GetNodes() {
		highlight[n] = true
	}
	for _, n := range liveNodes {
		highlight[n] = true
	}
	fab, err := fabricSVG(sc, expanded, all, highlight, marked, q)
	if err != nil {
		h.fail(w, err)
		return
	}
	var out []template.HTML
	var note, summary string
	if plan != nil {
		ms, err := h.b.Measurements(ctx)
		if err != nil {
			h.fail(w, err)
			return
		}
		var charts []draw.Chart
		charts, note = planCharts(sc, plan, ms)
		for _, c := range charts {
			var b bytes.Buffer
			if err := draw.DrawChart(&b, c); err != nil {
				h.fail(w, err)
				return
			}
			out = append(out, svgHTML(b.Bytes()))
		}
		summary = fmt.Sprintf("job %s: %d nodes (%s), %s GPUs per node, %d rules, model %s, hash %.12s", id, len(plan.GetNodes()),
			short(strings.Join(plan.GetNodes(), ", "), 200), gpusWord(plan.GetGpusPerNode()), len(plan.GetRules()), orDash(plan.GetModelVersion()), plan.GetContentHash())
	} else {
		summary = fmt.Sprintf("job %s: no plan pinned; its ranks run on %d nodes (%s)", id, len(liveNodes), short(strings.Join(liveNodes, ", "), 200))
	}
	h.render(w, "job.html", struct {
		pageHead
		Summary, Job, Note string
		Live               *liveSection
		Planned            bool
		Fabric             template.HTML
		Charts             []template.HTML
	}{pageHead{"Job " + id, false}, summary, id, note, live, plan != nil, svgHTML(fab), out})
}

func gpusWord(n uint32) string {
	if n == 0 {
		return "all"
	}
	return fmt.Sprint(n)
}

func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func algoWord(a ginv1.Algorithm) string {
	if a == ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
		return "NCCL's default"
	}
	return strings.ToLower(strings.TrimPrefix(a.String(), "ALGORITHM_"))
}

func protoWord(p ginv1.Protocol) string {
	return strings.ToLower(strings.TrimPrefix(p.String(), "PROTOCOL_"))
}

func collWord(c ginv1.Collective) string {
	return strings.ToLower(strings.TrimPrefix(c.String(), "COLLECTIVE_"))
}

// busbw is nccl-tests' bus bandwidth of bytes in us on n ranks, GB/s.
func busbw(coll ginv1.Collective, n int, bytes uint64, us float64) float64 {
	if us <= 0 {
		return math.NaN()
	}
	return float64(bytes) / us / 1e3 * costmodel.BusFactor(coll, n)
}

// planCharts charts a plan: for each collective its rules cover on the
// job's whole communicator, the bus bandwidth GIN's model predicts per
// algorithm NCCL could run (its best protocol at each size), the plan's
// choice at each size it decides, and the measured points of stored
// measurements of the placement's shape. note says what could not be
// charted.
func planCharts(sc scene, plan *ginv1.Plan, ms []*ginv1.Measurement) ([]draw.Chart, string) {
	if sc.g == nil {
		return nil, "No topology graph: nothing to predict from."
	}
	nodes, gpn := plan.GetNodes(), int(plan.GetGpusPerNode())
	shape, err := costmodel.ShapeOf(sc.g, nodes, gpn)
	if err != nil {
		return nil, fmt.Sprintf("The placement cannot be modelled now: %v.", err)
	}
	model := map[string]string{}
	for _, n := range sc.nodes {
		model[n.GetName()] = n.GetGpuModel()
	}
	key, keyErr := calib.KeyOf(sc.g, func(n string) string { return model[n] }, nodes, gpn, "")

	// The rules of the whole communicator, by collective.
	byColl := map[ginv1.Collective][]*ginv1.PlanRule{}
	lo, hi := uint32(maxChartLog2), uint32(minChartLog2)
	for _, r := range plan.GetRules() {
		if int(r.GetNNodes()) != shape.NNodes || int(r.GetNRanks()) != shape.NRanks {
			continue
		}
		byColl[r.GetCollective()] = append(byColl[r.GetCollective()], r)
		lo, hi = min(lo, r.GetMinLog2Bytes()), max(hi, r.GetMaxLog2Bytes())
	}
	lo, hi = max(lo, minChartLog2), min(hi, maxChartLog2)
	if lo >= hi {
		lo, hi = minChartLog2, 30
	}
	var colls []ginv1.Collective
	for c := range byColl {
		colls = append(colls, c)
	}
	// all_reduce first (what most jobs spend their time in), then by enum.
	slices.SortFunc(colls, func(a, b ginv1.Collective) int {
		if (a == ginv1.Collective_COLLECTIVE_ALL_REDUCE) != (b == ginv1.Collective_COLLECTIVE_ALL_REDUCE) {
			if a == ginv1.Collective_COLLECTIVE_ALL_REDUCE {
				return -1
			}
			return 1
		}
		return int(a) - int(b)
	})
	note := ""
	if len(colls) == 0 {
		colls = []ginv1.Collective{ginv1.Collective_COLLECTIVE_ALL_REDUCE}
		note = "The plan has no rule for the job's whole communicator: all_reduce is charted without choices."
	}
	if len(colls) > maxChartCollectives {
		colls = colls[:maxChartCollectives]
	}
	var charts []draw.Chart
	for _, coll := range colls {
		ch := draw.Chart{
			Title:  fmt.Sprintf("%s on %d ranks over %d nodes", collWord(coll), shape.NRanks, shape.NNodes),
			XLabel: "message size (bytes)", YLabel: "busbw GB/s", XBytes: true,
		}
		idx := map[ginv1.Algorithm]int{}
		for _, a := range costmodel.Algorithms {
			var pts []draw.Point
			for l := lo; l <= hi; l++ {
				b := uint64(1) << l
				best := math.Inf(1)
				for _, p := range costmodel.Protocols {
					if us, ok := costmodel.Cost(shape, coll, a, p, b); ok {
						best = math.Min(best, us)
					}
				}
				if !math.IsInf(best, 1) {
					pts = append(pts, draw.Point{X: float64(b), Y: busbw(coll, shape.NRanks, b, best)})
				}
			}
			if len(pts) > 0 {
				idx[a] = len(ch.Series)
				ch.Series = append(ch.Series, draw.Series{Name: algoWord(a), Points: pts})
			}
		}
		for _, r := range byColl[coll] {
			for l := max(r.GetMinLog2Bytes(), lo); l <= min(r.GetMaxLog2Bytes(), hi); l++ {
				b := uint64(1) << l
				a, p, who := r.GetAlgorithm(), r.GetProtocol(), "GIN"
				if a == ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
					pr, err := costmodel.PredictNCCL(shape, coll, b)
					if err != nil {
						continue
					}
					a, p, who = pr.Algorithm, pr.Protocol, "NCCL's own, kept"
				}
				us, ok := costmodel.Cost(shape, coll, a, p, b)
				if !ok {
					continue
				}
				ch.Choices = append(ch.Choices, draw.Mark{X: float64(b), Y: busbw(coll, shape.NRanks, b, us), Series: -1,
					Label: fmt.Sprintf("%s: %s/%s (%s)%s: %s", draw.SizeWord(b), algoWord(a), protoWord(p), who, choicesWord(r), r.GetReason())})
			}
		}
		if keyErr == nil {
			for _, m := range ms {
				if m.GetCollective() != coll || !calib.SameShape(m.GetShape(), key) {
					continue
				}
				si := -1
				if i, ok := idx[m.GetAlgorithm()]; ok {
					si = i
				}
				for _, p := range m.GetPoints() {
					if len(ch.Measured) >= maxMeasuredMarks {
						break
					}
					ch.Measured = append(ch.Measured, draw.Mark{X: float64(p.GetBytes()), Y: p.GetBusBwGbps(), Series: si,
						Label: fmt.Sprintf("measured %s %s: %.1f GB/s (%s)", algoWord(m.GetAlgorithm()), draw.SizeWord(p.GetBytes()), p.GetBusBwGbps(), m.GetSource())})
				}
			}
		}
		charts = append(charts, ch)
	}
	return charts, note
}

// choicesWord lists a rule's ordered choices as ginctl plan prints them
// ("nccl(nvls_tree), tree/simple"); "" for a rule of one choice.
func choicesWord(r *ginv1.PlanRule) string {
	if len(r.GetChoices()) < 2 {
		return ""
	}
	var ws []string
	for _, c := range r.GetChoices() {
		switch {
		case c.GetAlgorithm() == ginv1.Algorithm_ALGORITHM_UNSPECIFIED:
			ws = append(ws, "nccl")
		case c.GetNcclIfOffered():
			ws = append(ws, "nccl("+algoWord(c.GetAlgorithm())+")")
		default:
			ws = append(ws, algoWord(c.GetAlgorithm())+"/"+protoWord(c.GetProtocol()))
		}
	}
	return ", choices in order " + strings.Join(ws, ", ")
}
