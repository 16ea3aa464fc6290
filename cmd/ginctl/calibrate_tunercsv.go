package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/calib"
	"github.com/gin-topology/gin/internal/costmodel"
	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/tunercsvin"
)

// tunerSourcePrefix starts the source of a measurement imported from a
// tuner measurement CSV (calib.Describe names it so).
const tunerSourcePrefix = "tuner-csv:"

// tunerGroup is one measurement of a tuner CSV: its request, the line of
// its first row, where its rows differ from --nodes/--gpus-per-node, and
// its ranks per node (for the placement check).
type tunerGroup struct {
	req         *ginv1.ImportMeasurementRequest
	line        int
	diffs       []string
	ranksOnNode int
}

// tunerKey groups a CSV's rows into measurements.
type tunerKey struct {
	coll         ginv1.Collective
	algo         ginv1.Algorithm
	proto        ginv1.Protocol
	nodes, ranks int
}

// tunerRequests turns a parsed tuner CSV into one request per
// (collective, algorithm, protocol, nodes, ranks) of its rows, in the
// order of their first rows, on names (nodes is their hostlist). gpn is
// --gpus-per-node (0: each group's ranks / nodes). notes are for standard
// error. An error is one the user must fix (a group whose GPUs per node
// cannot be known, two groups that would be stored as one).
func tunerRequests(f *tunercsvin.File, names []string, nodes string, gpn int, ncclVersion, source string) ([]tunerGroup, []string, error) {
	byKey := map[tunerKey][]tunercsvin.Row{}
	var order []tunerKey
	for _, r := range f.Rows {
		k := tunerKey{r.Collective, r.Algorithm, r.Protocol, r.Nodes, r.Ranks}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	var groups []tunerGroup
	var notes []string
	type storedKey struct {
		coll  ginv1.Collective
		algo  ginv1.Algorithm
		proto ginv1.Protocol
		gpn   int
	}
	stored := map[storedKey]int{}
	for _, k := range order {
		rows := byKey[k]
		line := rows[0].Line
		what := fmt.Sprintf("line %d: %s %s", line, collName(k.coll), cellLabel(k.algo, k.proto))
		nodesRan := k.nodes
		if nodesRan == -1 {
			nodesRan = len(names) // the rows do not say: --nodes
		}
		g := gpn
		switch {
		case g > 0:
		case k.ranks == -1:
			return nil, nil, usagef("%s: the rows say ranks -1 (any): give --gpus-per-node", what)
		case k.ranks%nodesRan != 0:
			return nil, nil, usagef("%s: %d ranks on %d node(s) is no whole number of GPUs per node: give --gpus-per-node", what, k.ranks, nodesRan)
		default:
			g = k.ranks / nodesRan
		}
		var diffs []string
		if k.nodes > 0 && k.nodes != len(names) {
			diffs = append(diffs, fmt.Sprintf("%s ran on %d node(s), --nodes names %d", what, k.nodes, len(names)))
		}
		if k.ranks > 0 && k.ranks != g*len(names) && (gpn > 0 || k.nodes == len(names) || k.nodes == -1) {
			diffs = append(diffs, fmt.Sprintf("%s ran %d ranks, but %d node(s) × %d GPUs is %d", what, k.ranks, len(names), g, g*len(names)))
		}
		sk := storedKey{k.coll, k.algo, k.proto, g}
		if first, dup := stored[sk]; dup {
			return nil, nil, fmt.Errorf("%s: its rows (nodes %d, ranks %d) would be stored as the same measurement as those of line %d on %s × %d GPUs: import them apart, with their own --nodes",
				what, k.nodes, k.ranks, first, hostlist.Compress(names), g)
		}
		stored[sk] = line
		nranks := k.ranks
		if nranks == -1 {
			nranks = g * len(names)
		}
		pts, ptNotes, err := tunerPoints(rows, k.coll, nranks)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", what, err)
		}
		notes = append(notes, ptNotes...)
		groups = append(groups, tunerGroup{
			req: &ginv1.ImportMeasurementRequest{
				Nodes: nodes, GpusPerNode: uint32(g), Collective: k.coll, Algorithm: k.algo, Protocol: k.proto,
				// The file names the cell each row ran: forced, as a log's
				// NCCL_ALGO/NCCL_PROTO lines say it.
				ForcedBy: "log", NcclVersion: ncclVersion,
				Source: truncate(fmt.Sprintf("%s%s:%d", tunerSourcePrefix, baseName(source), line), maxSource),
				Points: pts,
			},
			line: line, diffs: diffs, ranksOnNode: g,
		})
	}
	return groups, notes, nil
}

// tunerPoints are a group's stored points, sizes ascending. The time is
// latency_us. busbw is derived from it as nccl-tests derives it (size /
// time × the collective's bus factor on nranks, the size being the
// tuner's nBytes, nccl-tests' size column): the script and its sample do
// not say whether bandwidth_gbps is an algbw or a busbw (the sample's
// values are not size / latency_us in either), so it is not used. A size
// measured more than once keeps its fastest row; the slowest row of that
// same configuration (channels, pipeOps, regBuff) is its slower time, the
// run-to-run spread; rows of other configurations are named in a note.
func tunerPoints(rows []tunercsvin.Row, coll ginv1.Collective, nranks int) ([]*ginv1.MeasuredPoint, []string, error) {
	bySize := map[uint64][]tunercsvin.Row{}
	var sizes []uint64
	for _, r := range rows {
		if _, ok := bySize[r.Bytes]; !ok {
			sizes = append(sizes, r.Bytes)
		}
		bySize[r.Bytes] = append(bySize[r.Bytes], r)
	}
	if len(sizes) > calib.MaxPoints {
		return nil, nil, fmt.Errorf("%d sizes, more than %d", len(sizes), calib.MaxPoints)
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
	factor := costmodel.BusFactor(coll, nranks)
	var pts []*ginv1.MeasuredPoint
	var notes []string
	for _, b := range sizes {
		rs := bySize[b]
		best := rs[0]
		for _, r := range rs[1:] {
			if r.LatencyUs < best.LatencyUs {
				best = r
			}
		}
		slower := 0.0
		var other []string
		for _, r := range rs {
			if r.Line == best.Line {
				continue
			}
			if r.Channels == best.Channels && r.PipeOps == best.PipeOps && r.RegBuff == best.RegBuff {
				slower = max(slower, r.LatencyUs)
			} else {
				other = append(other, fmt.Sprint(r.Line))
			}
		}
		if len(other) > 0 {
			notes = append(notes, fmt.Sprintf("line %d: %s %s at %s: the fastest row kept; line(s) %s measured other channels, pipeOps or regBuff",
				best.Line, collName(best.Collective), cellLabel(best.Algorithm, best.Protocol), humanBytes(b), strings.Join(other, ", ")))
		}
		pts = append(pts, &ginv1.MeasuredPoint{Bytes: b, TimeUs: best.LatencyUs, BusBwGbps: float64(b) / best.LatencyUs / 1000 * factor, SlowerTimeUs: slower})
	}
	return pts, notes, nil
}

// importTunerCSV stores what a tuner measurement CSV measured on nodes.
func (a *app) importTunerCSV(ctx context.Context, file, nodes string, gpn int, ncclVersion string, force bool) error {
	if nodes == "" {
		return usageError{fmt.Errorf("--tuner-csv FILE needs --nodes LIST: the nodes it ran on (the file names none)")}
	}
	names, err := hostlist.Expand(nodes)
	if err != nil {
		return usageError{fmt.Errorf("--nodes: %w", err)}
	}
	if gpn < 0 {
		return usageError{fmt.Errorf("--gpus-per-node %d", gpn)}
	}
	in, closeIn, err := a.openInput("--tuner-csv", file)
	if err != nil {
		return err
	}
	defer closeIn()
	parsed, err := tunercsvin.Parse(in)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	groups, notes, err := tunerRequests(parsed, names, nodes, gpn, ncclVersion, file)
	if err != nil {
		return err
	}
	gpus, err := a.clusterGPUs(ctx, names)
	if err != nil {
		return err
	}
	for _, g := range groups {
		// The file names no hosts or GPU models: its ranks are taken to
		// have run on --nodes, ranksOnNode each, which checks that the
		// nodes are the cluster's and have that many GPUs.
		var ranks []calib.RankPlace
		for i, n := range names {
			for j := range g.ranksOnNode {
				ranks = append(ranks, calib.RankPlace{Where: fmt.Sprintf("line %d", g.line), Rank: i*g.ranksOnNode + j, Host: n})
			}
		}
		diffs := append(g.diffs, calib.CheckPlacement(ranks, names, g.ranksOnNode, gpus)...)
		if err := a.flagDifferences(g.req, diffs, force); err != nil {
			return err
		}
	}
	var out []*ginv1.ImportMeasurementResponse
	for _, g := range groups {
		var resp *ginv1.ImportMeasurementResponse
		if err := a.withCalibration(ctx, func(ctx context.Context, cc ginv1.CalibrationServiceClient) (err error) {
			resp, err = cc.ImportMeasurement(ctx, g.req)
			return err
		}); err != nil {
			return fmt.Errorf("line %d: %w", g.line, err)
		}
		out = append(out, resp)
	}
	for _, n := range notes {
		fmt.Fprintf(a.stderr, "ginctl: %s\n", n)
	}
	if ncclVersion == "" {
		fmt.Fprintf(a.stderr, "ginctl: stored without an NCCL version (the file does not say; --nccl-version does): calibrate compare cannot compare it with another release\n")
	}
	return a.finishImport(ctx, out)
}
