package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/calib"
	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/inspector"
	"github.com/gin-topology/gin/internal/planread"
)

// maxSource is the stored source's limit (internal/state).
const maxSource = 256

// clusterGPUs answers each named node's GPU models (one per GPU) from the
// masters' inventories; a node the cluster does not know is left out.
func (a *app) clusterGPUs(ctx context.Context, names []string) (map[string][]string, error) {
	out := map[string][]string{}
	err := a.withTopology(ctx, func(ctx context.Context, tc ginv1.TopologyServiceClient) error {
		for _, n := range names {
			resp, err := tc.GetNode(ctx, &ginv1.GetNodeRequest{Name: n, Consistency: a.consistency()})
			if status.Code(err) == codes.NotFound {
				continue
			}
			if err != nil {
				return fmt.Errorf("node %s: %w", n, err)
			}
			models := []string{}
			for _, g := range resp.GetInventory().GetGpus() {
				models = append(models, g.GetModel())
			}
			out[n] = models
		}
		return nil
	})
	return out, err
}

// flagDifferences refuses an import whose log differs from the cluster
// (diffs, from calib.CheckPlacement), or with force keeps it and flags
// its source and standard error.
func (a *app) flagDifferences(req *ginv1.ImportMeasurementRequest, diffs []string, force bool) error {
	if len(diffs) == 0 {
		return nil
	}
	if !force {
		what := "the log"
		if strings.HasPrefix(req.GetSource(), tunerSourcePrefix) {
			what = "the file's rows"
		}
		return fmt.Errorf("%s: %s did not run where --nodes says (--force stores it anyway, flagged):\n  %s",
			req.GetSource(), what, strings.Join(diffs, "\n  "))
	}
	for _, d := range diffs {
		fmt.Fprintf(a.stderr, "ginctl: --force: %s: %s\n", req.GetSource(), d)
	}
	req.Source = truncate(fmt.Sprintf("%s [--force: %s]", req.GetSource(), strings.Join(diffs, "; ")), maxSource)
	return nil
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// importInspector stores what an NCCL Inspector dump measured: for each
// communicator and collective, one measurement of NCCL's choice (and one
// per cell the job's pinned plan forced, with --job) over its size
// buckets, on the communicator's nodes.
func (a *app) importInspector(ctx context.Context, path, nodes, job, ncclVersion string, force bool) error {
	agg, err := inspector.ReadPath(path)
	if err != nil {
		return usageError{err}
	}
	comms := agg.Comms()
	world := comms[0]
	names := world.Hosts()
	if nodes != "" {
		if names, err = hostlist.Expand(nodes); err != nil {
			return usageError{fmt.Errorf("--nodes: %w", err)}
		}
	}
	gpus, err := a.clusterGPUs(ctx, names)
	if err != nil {
		return err
	}
	// The world communicator's ranks against the nodes: host names and
	// GPU counts (the dump names no GPU model).
	var ranks []calib.RankPlace
	for r := range world.NRanks {
		if h, ok := world.RankHost[r]; ok {
			ranks = append(ranks, calib.RankPlace{Where: world.RankWhere[r], Rank: r, Host: h})
		}
	}
	gpn := 0
	if world.NNodes > 0 && world.NRanks%world.NNodes == 0 {
		gpn = world.NRanks / world.NNodes
	}
	source := fmt.Sprintf("nccl-inspector:%s", baseName(path))
	if job != "" {
		source += " job " + job
	}
	probe := &ginv1.ImportMeasurementRequest{Source: source}
	if err := a.flagDifferences(probe, calib.CheckPlacement(ranks, names, gpn, gpus), force); err != nil {
		return err
	}
	source = probe.GetSource()
	// Hosts to nodes: by name, else (--force, or --nodes naming other
	// names) the world's i-th host is the i-th node.
	nodeOf := map[string]string{}
	known := map[string]string{}
	for _, n := range names {
		known[n], known[strings.SplitN(n, ".", 2)[0]] = n, n
	}
	for i, h := range world.Hosts() {
		if n, ok := known[h]; ok {
			nodeOf[h] = n
		} else if n, ok := known[strings.SplitN(h, ".", 2)[0]]; ok {
			nodeOf[h] = n
		} else if i < len(names) {
			nodeOf[h] = names[i]
		}
	}
	var plan *ginv1.Plan
	var notes []string
	if job != "" {
		if err := a.withPlans(ctx, func(ctx context.Context, pc ginv1.PlanServiceClient) error {
			resp, err := pc.GetPlan(ctx, &ginv1.GetPlanRequest{JobId: job, Consistency: a.consistency()})
			if status.Code(err) == codes.NotFound {
				notes = append(notes, fmt.Sprintf("job %s has no pinned plan (any more): NCCL's choice everywhere", job))
				return nil
			}
			plan = resp.GetPlan()
			return err
		}); err != nil {
			return fmt.Errorf("--job %s: %w", job, err)
		}
	}
	var reqs []*ginv1.ImportMeasurementRequest
	type cellKey struct {
		comm string
		coll int
		a    ginv1.Algorithm
		p    ginv1.Protocol
	}
	byCell := map[cellKey]*ginv1.ImportMeasurementRequest{}
	commByID := map[string]*inspector.Comm{}
	for _, c := range comms {
		commByID[c.ID] = c
	}
	for _, g := range agg.Groups() {
		c := commByID[g.CommID]
		var cnodes []string
		seen := map[string]bool{}
		for _, h := range c.Hosts() {
			n, ok := nodeOf[h]
			if !ok {
				return fmt.Errorf("%s: communicator %s (%q) ran on host %s, which is not among the world's hosts", path, c.ID, c.Name, h)
			}
			if !seen[n] {
				seen[n] = true
				cnodes = append(cnodes, n)
			}
		}
		if len(cnodes) != c.NNodes || c.NRanks%c.NNodes != 0 {
			notes = append(notes, fmt.Sprintf("communicator %s (%q): %d ranks over %d nodes, its ranks seen on %d: skipped", c.ID, c.Name, c.NRanks, c.NNodes, len(cnodes)))
			continue
		}
		coll := ginv1.Collective(g.Coll + 1)
		ran := cellKey{comm: c.ID, coll: g.Coll}
		bytes := g.MeanBytes()
		if plan != nil {
			if r, ok := planread.Lookup(plan, coll, c.NRanks, c.NNodes, bytes); ok {
				switch {
				case len(r.GetChoices()) > 0 && planread.Overrides(r):
					notes = append(notes, fmt.Sprintf("communicator %s %s %s: what ran depends on NCCL's cost table (choices %s; the plugin's log says which): skipped",
						c.ID, strings.ToLower(strings.TrimPrefix(coll.String(), "COLLECTIVE_")), planread.SizeRange(uint32(g.Bucket), uint32(g.Bucket)), planread.Choices(r)))
					continue
				case r.GetAlgorithm() != ginv1.Algorithm_ALGORITHM_UNSPECIFIED:
					ran.a, ran.p = r.GetAlgorithm(), r.GetProtocol()
				}
			}
		}
		req := byCell[ran]
		if req == nil {
			forcedBy, src := "default", source
			if ran.a != 0 {
				forcedBy, src = "log", truncate(source+" (forced by the pinned plan)", maxSource)
			}
			req = &ginv1.ImportMeasurementRequest{Nodes: hostlist.Compress(cnodes), GpusPerNode: uint32(c.NRanks / c.NNodes),
				Collective: coll, Algorithm: ran.a, Protocol: ran.p, ForcedBy: forcedBy, NcclVersion: ncclVersion, Source: src}
			byCell[ran] = req
			reqs = append(reqs, req)
		}
		if len(req.Points) == calib.MaxPoints {
			continue
		}
		req.Points = append(req.Points, &ginv1.MeasuredPoint{Bytes: bytes, TimeUs: g.MeanUs(), BusBwGbps: g.MeanBusBW()})
	}
	for _, req := range reqs {
		sort.Slice(req.Points, func(i, j int) bool { return req.Points[i].GetBytes() < req.Points[j].GetBytes() })
	}
	if len(reqs) == 0 {
		return fmt.Errorf("%s: nothing to store (%s)", path, strings.Join(notes, "; "))
	}
	var out []*ginv1.ImportMeasurementResponse
	for _, req := range reqs {
		var resp *ginv1.ImportMeasurementResponse
		if err := a.withCalibration(ctx, func(ctx context.Context, cc ginv1.CalibrationServiceClient) (err error) {
			resp, err = cc.ImportMeasurement(ctx, req)
			return err
		}); err != nil {
			return fmt.Errorf("%s %s: %w", req.GetNodes(), req.GetCollective(), err)
		}
		out = append(out, resp)
	}
	for _, n := range notes {
		fmt.Fprintf(a.stderr, "ginctl: %s\n", n)
	}
	fmt.Fprintf(a.stderr, "ginctl: %s: %d collective records of %d communicator(s) from %d file(s), %d p2p skipped\n",
		baseName(path), agg.Records, len(comms), agg.Files, agg.Skipped)
	return a.finishImport(ctx, out)
}

// printImported prints what calibrate import stored: the answers as JSON,
// or a line per measurement saying whether it was new ("stored") or
// already held ("unchanged": imports are keyed by content).
func (a *app) printImported(out []*ginv1.ImportMeasurementResponse) error {
	if a.output == "json" {
		return a.printJSON(out)
	}
	for _, resp := range out {
		m := resp.GetMeasurement()
		state := "stored"
		if !resp.GetChanged() {
			state = "unchanged"
		}
		fmt.Fprintln(a.stdout, escapeText(fmt.Sprintf("%s %s: %s, %s", state, m.GetId(), summary(m), shapeLine(m.GetShape()))))
	}
	return nil
}
