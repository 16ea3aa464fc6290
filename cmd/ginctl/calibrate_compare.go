package main

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/calib"
	"github.com/gin-topology/gin/internal/costmodel"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/jsonout"
)

// importRegressionPct is how much slower (percent of time) an import must
// be than a stored measurement of an older NCCL release for calibrate
// import to warn.
const importRegressionPct = 10.0

// compareReport is what calibrate compare prints with -o json.
type compareReport struct {
	// From and To are the two NCCL versions, as given.
	From string `json:"from"`
	To   string `json:"to"`
	// ThresholdPercent: a size is a regression when To's time is at least
	// this much (percent) above From's.
	ThresholdPercent float64 `json:"threshold_percent"`
	SizesCompared    int     `json:"sizes_compared"`
	Regressions      int     `json:"regressions"`
	Improvements     int     `json:"improvements"`
	// Shapes are the placement shapes measured on both versions.
	Shapes []compareShape `json:"shapes"`
}

// compareShape is one placement shape (its key, nccl_version left empty)
// and what was compared on it.
type compareShape struct {
	Shape         *ginv1.PlacementShape `json:"shape"`
	SizesCompared int                   `json:"sizes_compared"`
	// Improvements: sizes where To is at least the threshold faster.
	Improvements int                 `json:"improvements"`
	Regressions  []compareRegression `json:"regressions"`
	// OnlyFrom and OnlyTo name the cells (collective and algorithm/protocol,
	// "default" for NCCL's choice) measured on one of the versions only:
	// nothing to compare them with.
	OnlyFrom []string `json:"only_from"`
	OnlyTo   []string `json:"only_to"`
}

// compareRegression is one size of one cell that is slower on To.
type compareRegression struct {
	Collective string `json:"collective"`
	SizeBytes  uint64 `json:"size_bytes"`
	// Algorithm and Protocol are the cell compared ("unspecified" for
	// NCCL's choice).
	Algorithm     string      `json:"algorithm"`
	Protocol      string      `json:"protocol"`
	SlowerPercent float64     `json:"slower_percent"`
	From          compareSide `json:"from"`
	To            compareSide `json:"to"`
	// Force is what GIN would force on To to win the loss back: the cell
	// measured fastest on To at this size among To's forced measurements
	// of the shape, when faster than To's time; null when none is.
	Force *compareForce `json:"force"`
	// cell is the cell compared, for the table.
	cell cellKeyOf
}

// compareSide is one version's measurement at the size.
type compareSide struct {
	Measurement string `json:"measurement"`
	ForcedBy    string `json:"forced_by"`
	// NcclAlgorithm and NcclProtocol are what NCCL used where the
	// measurement recorded it (TUNING lines), else "unspecified".
	NcclAlgorithm string  `json:"nccl_algorithm"`
	NcclProtocol  string  `json:"nccl_protocol"`
	TimeUs        float64 `json:"time_us"`
	BusbwGbps     float64 `json:"busbw_gbps"`
}

// compareForce is a forced cell measured on To.
type compareForce struct {
	Algorithm   string  `json:"algorithm"`
	Protocol    string  `json:"protocol"`
	Measurement string  `json:"measurement"`
	TimeUs      float64 `json:"time_us"`
	BusbwGbps   float64 `json:"busbw_gbps"`
	// SlowerPercent is its time against From's (negative: faster than
	// From).
	SlowerPercent float64 `json:"slower_percent"`
}

// releaseNumbers reads "2.23.4" (a suffix such as "+cuda12.9" ignored) as
// its numbers; ok is false for anything else.
func releaseNumbers(v string) ([]int, bool) {
	end := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if end >= 0 {
		v = v[:end]
	}
	if v == "" {
		return nil, false
	}
	var out []int
	for _, p := range strings.Split(v, ".") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

// olderRelease says whether NCCL version a is an older release than b;
// false when either does not read as a release number.
func olderRelease(a, b string) bool {
	x, ok1 := releaseNumbers(a)
	y, ok2 := releaseNumbers(b)
	return ok1 && ok2 && slices.Compare(x, y) < 0
}

// sizeCmp is one size both measurements measured.
type sizeCmp struct {
	bytes     uint64
	from, to  *ginv1.MeasuredPoint
	slowerPct float64 // 100 × (to's time / from's time − 1)
	fromBusbw float64
	toBusbw   float64
}

// pointBusbw is a point's busbw, derived from its time where the
// measurement did not store one.
func pointBusbw(m *ginv1.Measurement, p *ginv1.MeasuredPoint) float64 {
	if b := p.GetBusBwGbps(); b > 0 {
		return b
	}
	if p.GetTimeUs() <= 0 {
		return 0
	}
	n := int(m.GetShape().GetGpusPerNode() * m.GetShape().GetNodeCount())
	return float64(p.GetBytes()) / p.GetTimeUs() / 1000 * costmodel.BusFactor(m.GetCollective(), n)
}

// compareAtSizes compares two measurements at the sizes both measured.
func compareAtSizes(from, to *ginv1.Measurement) []sizeCmp {
	at := map[uint64]*ginv1.MeasuredPoint{}
	for _, p := range to.GetPoints() {
		at[p.GetBytes()] = p
	}
	var out []sizeCmp
	for _, p := range from.GetPoints() {
		q, ok := at[p.GetBytes()]
		if !ok || p.GetTimeUs() <= 0 || q.GetTimeUs() <= 0 {
			continue
		}
		out = append(out, sizeCmp{bytes: p.GetBytes(), from: p, to: q, slowerPct: 100 * (q.GetTimeUs()/p.GetTimeUs() - 1),
			fromBusbw: pointBusbw(from, p), toBusbw: pointBusbw(to, q)})
	}
	return out
}

// round2c keeps two decimals (tables and JSON alike).
func round2c(v float64) float64 { return math.Round(v*100) / 100 }

func algoWord(a ginv1.Algorithm) string {
	return jsonout.EnumWord(a.Descriptor(), a.Number())
}

func protoWord(p ginv1.Protocol) string {
	return jsonout.EnumWord(p.Descriptor(), p.Number())
}

// cellKeyOf is a measurement's cell.
type cellKeyOf struct {
	coll  ginv1.Collective
	algo  ginv1.Algorithm
	proto ginv1.Protocol
}

func cellOf(m *ginv1.Measurement) cellKeyOf {
	return cellKeyOf{m.GetCollective(), m.GetAlgorithm(), m.GetProtocol()}
}

func (c cellKeyOf) String() string { return collName(c.coll) + " " + cellLabel(c.algo, c.proto) }

func cmpCells(a, b cellKeyOf) int {
	return cmp.Or(cmp.Compare(a.coll, b.coll), cmp.Compare(a.algo, b.algo), cmp.Compare(a.proto, b.proto))
}

// shapeClass is a shape without its NCCL version.
type shapeClass struct {
	shape    *ginv1.PlacementShape
	from, to []*ginv1.Measurement
}

// compareReleases compares the measurements (with their points) of NCCL
// from and to, per shape, cell and size.
func compareReleases(ms []*ginv1.Measurement, from, to string, thresholdPct float64) compareReport {
	r := compareReport{From: from, To: to, ThresholdPercent: thresholdPct, Shapes: []compareShape{}}
	var classes []*shapeClass
	for _, m := range ms {
		v := m.GetShape().GetNcclVersion()
		if v != from && v != to {
			continue
		}
		var c *shapeClass
		for _, x := range classes {
			if calib.SameShape(x.shape, m.GetShape()) {
				c = x
				break
			}
		}
		if c == nil {
			s := &ginv1.PlacementShape{GpuModel: m.GetShape().GetGpuModel(), NvlinkDomainSize: m.GetShape().GetNvlinkDomainSize(),
				GpusPerNode: m.GetShape().GetGpusPerNode(), NicsPerNode: m.GetShape().GetNicsPerNode(), NicGbps: m.GetShape().GetNicGbps(),
				NodeCount: m.GetShape().GetNodeCount(), FabricTiers: m.GetShape().GetFabricTiers()}
			c = &shapeClass{shape: s}
			classes = append(classes, c)
		}
		if v == from {
			c.from = append(c.from, m)
		} else {
			c.to = append(c.to, m)
		}
	}
	slices.SortFunc(classes, func(a, b *shapeClass) int {
		x, y := a.shape, b.shape
		return cmp.Or(cmp.Compare(x.GetGpuModel(), y.GetGpuModel()), cmp.Compare(x.GetNodeCount(), y.GetNodeCount()),
			cmp.Compare(x.GetGpusPerNode(), y.GetGpusPerNode()), cmp.Compare(x.GetNvlinkDomainSize(), y.GetNvlinkDomainSize()),
			cmp.Compare(x.GetNicsPerNode(), y.GetNicsPerNode()), cmp.Compare(x.GetNicGbps(), y.GetNicGbps()), cmp.Compare(x.GetFabricTiers(), y.GetFabricTiers()))
	})
	byCell := func(ms []*ginv1.Measurement) map[cellKeyOf]*ginv1.Measurement {
		out := map[cellKeyOf]*ginv1.Measurement{}
		for _, m := range ms {
			if old, ok := out[cellOf(m)]; !ok || m.GetCreatedIndex() > old.GetCreatedIndex() {
				out[cellOf(m)] = m
			}
		}
		return out
	}
	for _, c := range classes {
		if len(c.from) == 0 || len(c.to) == 0 {
			continue
		}
		sh := compareShape{Shape: c.shape, Regressions: []compareRegression{}, OnlyFrom: []string{}, OnlyTo: []string{}}
		fromCells, toCells := byCell(c.from), byCell(c.to)
		cells := make([]cellKeyOf, 0, len(fromCells))
		for k := range fromCells {
			cells = append(cells, k)
		}
		slices.SortFunc(cells, cmpCells)
		for _, k := range cells {
			ma, mb := fromCells[k], toCells[k]
			if mb == nil {
				sh.OnlyFrom = append(sh.OnlyFrom, k.String())
				continue
			}
			for _, s := range compareAtSizes(ma, mb) {
				sh.SizesCompared++
				switch {
				case s.slowerPct <= -thresholdPct:
					sh.Improvements++
				case s.slowerPct >= thresholdPct:
					sh.Regressions = append(sh.Regressions, regressionOf(k, ma, mb, s, c.to))
				}
			}
		}
		for k := range toCells {
			if fromCells[k] == nil {
				sh.OnlyTo = append(sh.OnlyTo, k.String())
			}
		}
		slices.Sort(sh.OnlyTo)
		r.SizesCompared += sh.SizesCompared
		r.Improvements += sh.Improvements
		r.Regressions += len(sh.Regressions)
		r.Shapes = append(r.Shapes, sh)
	}
	return r
}

// regressionOf describes one slower size, with the fastest forced cell of
// the shape measured on To at that size when it beats To's time.
func regressionOf(k cellKeyOf, ma, mb *ginv1.Measurement, s sizeCmp, toMs []*ginv1.Measurement) compareRegression {
	side := func(m *ginv1.Measurement, p *ginv1.MeasuredPoint, busbw float64) compareSide {
		return compareSide{Measurement: m.GetId(), ForcedBy: m.GetForcedBy(), NcclAlgorithm: algoWord(p.GetNcclAlgorithm()),
			NcclProtocol: protoWord(p.GetNcclProtocol()), TimeUs: round2c(p.GetTimeUs()), BusbwGbps: round2c(busbw)}
	}
	reg := compareRegression{cell: k, Collective: collName(k.coll), SizeBytes: s.bytes, Algorithm: algoWord(k.algo), Protocol: protoWord(k.proto),
		SlowerPercent: round2c(s.slowerPct), From: side(ma, s.from, s.fromBusbw), To: side(mb, s.to, s.toBusbw)}
	var best *ginv1.Measurement
	var bestPt *ginv1.MeasuredPoint
	for _, m := range toMs {
		if m.GetCollective() != k.coll || m.GetAlgorithm() == ginv1.Algorithm_ALGORITHM_UNSPECIFIED || m.GetId() == mb.GetId() {
			continue
		}
		for _, p := range m.GetPoints() {
			if p.GetBytes() != s.bytes || p.GetTimeUs() <= 0 || p.GetTimeUs() >= s.to.GetTimeUs() {
				continue
			}
			if bestPt == nil || p.GetTimeUs() < bestPt.GetTimeUs() || (p.GetTimeUs() == bestPt.GetTimeUs() && m.GetId() < best.GetId()) {
				best, bestPt = m, p
			}
		}
	}
	if best != nil {
		reg.Force = &compareForce{Algorithm: algoWord(best.GetAlgorithm()), Protocol: protoWord(best.GetProtocol()), Measurement: best.GetId(),
			TimeUs: round2c(bestPt.GetTimeUs()), BusbwGbps: round2c(pointBusbw(best, bestPt)),
			SlowerPercent: round2c(100 * (bestPt.GetTimeUs()/s.from.GetTimeUs() - 1))}
	}
	return reg
}

// ranLabel is what a measurement ran at a point: its forced cell, or
// NCCL's default (and what NCCL chose, where it was recorded).
func ranLabel(forced ginv1.Algorithm, forcedP ginv1.Protocol, ncclAlgo, ncclProto string) string {
	if forced != 0 || forcedP != 0 {
		return cellLabel(forced, forcedP)
	}
	if ncclAlgo != "unspecified" || ncclProto != "unspecified" {
		a, p := ncclAlgo, ncclProto
		if a == "unspecified" {
			a = "*"
		}
		if p == "unspecified" {
			p = "*"
		}
		return "default(" + a + "/" + p + ")"
	}
	return "default"
}

// compactBytes is humanBytes as one token ("64MiB").
func compactBytes(b uint64) string { return strings.ReplaceAll(humanBytes(b), " ", "") }

// signedPct writes a slowdown: "+40%", "-3%".
func signedPct(p float64) string { return fmt.Sprintf("%+.0f%%", p) }

func (a *app) calibrateCompareCmd() *cobra.Command {
	var versions []string
	var nodes string
	var gpn int
	var threshold float64
	var exitZero bool
	cmd := &cobra.Command{
		Use:   "compare --nccl-version A --nccl-version B [--nodes LIST]",
		Short: "Name every size where NCCL release B measured slower than release A (an upgrade sentinel)",
		Long: `Compare the stored measurements of two NCCL releases on the same placement
shape (GPU model, NVLink domain, GPUs and NICs per node, NIC rate, node count,
fabric tiers): per collective, cell (the forced algorithm and protocol, or NCCL's
default) and size both measured, B's time against A's. Every size where B is
--threshold percent (10) or more slower is named with both measurements (busbw,
time, what each ran) and what GIN would force on B to win the loss back: the
forced algorithm/protocol measured fastest on B at that size among B's
measurements of the shape, when it beats B's time, else "none measured on B".
--nodes (and --gpus-per-node) keep the shape of those nodes only.

Exit status, for scripts gating an upgrade: 0 when no size regressed; 1 when any
did, after everything is printed (table or -o json), 0 all the same with
--exit-zero. 1 also when the masters cannot answer or a release has no
measurement, 2 for a usage error.`,
		Example: `  ginctl calibrate compare --nccl-version 2.21.5 --nccl-version 2.23.4 || echo "do not upgrade yet"
  ginctl calibrate compare --nccl-version 2.21.5 --nccl-version 2.23.4 -o json --exit-zero | jq '.shapes[].regressions[] | {collective, size_bytes, slower_percent}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(versions) != 2 || versions[0] == "" || versions[1] == "" {
				return usagef("give --nccl-version twice: the release to compare from, then the one to compare to")
			}
			if versions[0] == versions[1] {
				return usagef("--nccl-version %s twice: compare two different releases", versions[0])
			}
			if threshold <= 0 || threshold >= 1000 || math.IsNaN(threshold) {
				return usagef("--threshold %g: want a percentage above 0", threshold)
			}
			if gpn < 0 {
				return usagef("--gpus-per-node %d", gpn)
			}
			if gpn > 0 && nodes == "" {
				return usagef("--gpus-per-node needs --nodes")
			}
			r, err := a.compareReleases(cmd.Context(), versions[0], versions[1], nodes, gpn, threshold)
			if err != nil {
				return err
			}
			if a.output == "json" {
				err = a.printJSON(r)
			} else {
				err = a.printCompare(r)
			}
			if err != nil || exitZero || r.Regressions == 0 {
				return err
			}
			var named []string
			for _, sh := range r.Shapes {
				for _, g := range sh.Regressions {
					if len(named) < 3 {
						named = append(named, fmt.Sprintf("%s at %s %s", g.cell, humanBytes(g.SizeBytes), signedPct(g.SlowerPercent)))
					}
				}
			}
			more := ""
			if r.Regressions > len(named) {
				more = fmt.Sprintf(" and %d more", r.Regressions-len(named))
			}
			return fmt.Errorf("%d size(s) %g%% or more slower on NCCL %s than on %s: %s%s (--exit-zero exits 0 on regressions)",
				r.Regressions, threshold, r.To, r.From, strings.Join(named, ", "), more)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&versions, "nccl-version", nil, "an NCCL release, twice: the one to compare from, then the one to compare to (2.21.5)")
	f.StringVar(&nodes, "nodes", "", "only the placement shape of these nodes (Slurm hostlist)")
	f.IntVar(&gpn, "gpus-per-node", 0, "with --nodes: GPUs per node of the shape (default: all)")
	f.Float64Var(&threshold, "threshold", 10, "how much slower (percent of time) a size must be to be named")
	f.BoolVar(&exitZero, "exit-zero", false, "exit 0 even when a size regressed (default: exit 1)")
	return cmd
}

// compareReleases reads the stored measurements of from and to (of the
// shape of nodes, when given) with their points and compares them.
func (a *app) compareReleases(ctx context.Context, from, to, nodes string, gpn int, threshold float64) (compareReport, error) {
	var key *ginv1.PlacementShape
	if nodes != "" {
		names, err := hostlist.Expand(nodes)
		if err != nil {
			return compareReport{}, usageError{fmt.Errorf("--nodes: %w", err)}
		}
		if key, err = a.shapeOf(ctx, names, gpn); err != nil {
			return compareReport{}, err
		}
	}
	var list *ginv1.ListMeasurementsResponse
	if err := a.withCalibration(ctx, func(ctx context.Context, cc ginv1.CalibrationServiceClient) (err error) {
		list, err = cc.ListMeasurements(ctx, &ginv1.ListMeasurementsRequest{})
		return err
	}); err != nil {
		return compareReport{}, err
	}
	var ms []*ginv1.Measurement
	seen := map[string]bool{}
	var stored []string
	count := map[string]int{}
	for _, m := range list.GetMeasurements() {
		v := m.GetShape().GetNcclVersion()
		if !seen[v] && v != "" {
			seen[v] = true
			stored = append(stored, v)
		}
		if (v != from && v != to) || (key != nil && !calib.SameShape(key, m.GetShape())) {
			continue
		}
		count[v]++
		ms = append(ms, m)
	}
	slices.SortFunc(stored, func(x, y string) int {
		switch {
		case olderRelease(x, y):
			return -1
		case olderRelease(y, x):
			return 1
		}
		return strings.Compare(x, y)
	})
	where := ""
	if key != nil {
		where = " of the shape of " + nodes
	}
	for _, v := range []string{from, to} {
		if count[v] == 0 {
			known := "none"
			if len(stored) > 0 {
				known = strings.Join(stored, ", ")
			}
			return compareReport{}, fmt.Errorf("no stored measurement%s at NCCL %s (stored releases: %s; import one with calibrate import ... --nccl-version %s)", where, v, known, v)
		}
	}
	full := make([]*ginv1.Measurement, 0, len(ms))
	for _, m := range ms {
		var resp *ginv1.GetMeasurementResponse
		if err := a.withCalibration(ctx, func(ctx context.Context, cc ginv1.CalibrationServiceClient) (err error) {
			resp, err = cc.GetMeasurement(ctx, &ginv1.GetMeasurementRequest{Id: m.GetId()})
			return err
		}); err != nil {
			return compareReport{}, fmt.Errorf("measurement %s: %w", m.GetId(), err)
		}
		full = append(full, resp.GetMeasurement())
	}
	r := compareReleases(full, from, to, threshold)
	if len(r.Shapes) == 0 {
		return compareReport{}, fmt.Errorf("no placement shape%s has measurements at both NCCL %s and %s: nothing to compare", where, from, to)
	}
	return r, nil
}

// shapeOf is the placement shape (without NCCL version) of gpn GPUs (0:
// all) of each of names, as the masters derive a measurement's.
func (a *app) shapeOf(ctx context.Context, names []string, gpn int) (*ginv1.PlacementShape, error) {
	var gr *ginv1.GetGraphResponse
	if err := a.withTopology(ctx, func(ctx context.Context, tc ginv1.TopologyServiceClient) (err error) {
		gr, err = tc.GetGraph(ctx, &ginv1.GetGraphRequest{Nodes: hostlist.Compress(names), Consistency: a.consistency()})
		return err
	}); err != nil {
		return nil, err
	}
	g, err := graph.Build(gr.GetInventories(), gr.GetFabric())
	if err != nil {
		return nil, fmt.Errorf("the nodes' graph: %w", err)
	}
	model := map[string]string{}
	for _, inv := range gr.GetInventories() {
		if gpus := inv.GetGpus(); len(gpus) > 0 {
			model[inv.GetNodeName()] = gpus[0].GetModel()
		}
	}
	key, err := calib.KeyOf(g, func(n string) string { return model[n] }, names, gpn, "")
	if err != nil {
		return nil, usageError{fmt.Errorf("--nodes: %w", err)}
	}
	return key, nil
}

// printCompare writes the comparison: a summary, each shape, and a row per
// regressed size.
func (a *app) printCompare(r compareReport) error {
	if !a.noHeaders {
		fmt.Fprintln(a.stdout, escapeText(fmt.Sprintf("NCCL %s → %s on %d shape(s): %d size(s) compared, %d slower by %g%% or more, %d faster by %g%% or more",
			r.From, r.To, len(r.Shapes), r.SizesCompared, r.Regressions, r.ThresholdPercent, r.Improvements, r.ThresholdPercent)))
		for i, sh := range r.Shapes {
			line := fmt.Sprintf("shape %d: %s", i+1, strings.TrimPrefix(shapeWithoutVersion(sh.Shape), "shape "))
			if len(sh.OnlyFrom) > 0 {
				line += fmt.Sprintf("; only on %s: %s", r.From, strings.Join(sh.OnlyFrom, ", "))
			}
			if len(sh.OnlyTo) > 0 {
				line += fmt.Sprintf("; only on %s: %s", r.To, strings.Join(sh.OnlyTo, ", "))
			}
			fmt.Fprintln(a.stdout, escapeText(line))
		}
	}
	if r.Regressions == 0 {
		return nil
	}
	t := a.newTable("SHAPE", "COLLECTIVE", "SIZE", "SLOWER", "A_RAN", "A_BUSBW", "A_TIME_US", "B_RAN", "B_BUSBW", "B_TIME_US", "FORCE_ON_B")
	for i, sh := range r.Shapes {
		for _, g := range sh.Regressions {
			force := "none measured on B"
			if f := g.Force; f != nil {
				how := fmt.Sprintf("%.0f%% slower than A", f.SlowerPercent)
				if f.SlowerPercent < 0 {
					how = fmt.Sprintf("%.0f%% faster than A", -f.SlowerPercent)
				}
				force = fmt.Sprintf("%s/%s: %.2f GB/s, %.2f µs, %s (measurement %s)", f.Algorithm, f.Protocol, f.BusbwGbps, f.TimeUs, how, f.Measurement)
			}
			t.row(i+1, g.Collective, compactBytes(g.SizeBytes), signedPct(g.SlowerPercent),
				ranLabel(g.cell.algo, g.cell.proto, g.From.NcclAlgorithm, g.From.NcclProtocol), fmt.Sprintf("%.2f", g.From.BusbwGbps), fmt.Sprintf("%.2f", g.From.TimeUs),
				ranLabel(g.cell.algo, g.cell.proto, g.To.NcclAlgorithm, g.To.NcclProtocol), fmt.Sprintf("%.2f", g.To.BusbwGbps), fmt.Sprintf("%.2f", g.To.TimeUs),
				text(force))
		}
	}
	return t.flush()
}

// shapeWithoutVersion is shapeLine without its NCCL version.
func shapeWithoutVersion(s *ginv1.PlacementShape) string {
	line, _, _ := strings.Cut(shapeLine(s), ", NCCL ")
	return line
}

// finishImport warns of what an import measured slower than an older NCCL
// release, then prints what it stored.
func (a *app) finishImport(ctx context.Context, out []*ginv1.ImportMeasurementResponse) error {
	a.warnRegressions(ctx, out)
	return a.printImported(out)
}

// warnRegressions writes a warning line per imported measurement that is
// importRegressionPct or more slower, at a size both measured, than a
// stored measurement of the same shape, collective and cell at an older
// NCCL release. It is advice: a failure to read is a note, not an error.
func (a *app) warnRegressions(ctx context.Context, out []*ginv1.ImportMeasurementResponse) {
	var imported []*ginv1.Measurement
	for _, resp := range out {
		if m := resp.GetMeasurement(); m != nil {
			if _, ok := releaseNumbers(m.GetShape().GetNcclVersion()); ok {
				imported = append(imported, m)
			}
		}
	}
	if len(imported) == 0 {
		return
	}
	var list *ginv1.ListMeasurementsResponse
	err := a.withCalibration(ctx, func(ctx context.Context, cc ginv1.CalibrationServiceClient) (err error) {
		list, err = cc.ListMeasurements(ctx, &ginv1.ListMeasurementsRequest{})
		return err
	})
	if err != nil {
		fmt.Fprintf(a.stderr, "ginctl: not compared with older NCCL releases: %v\n", err)
		return
	}
	fetched := map[string]*ginv1.Measurement{}
	for _, m := range imported {
		for _, old := range list.GetMeasurements() {
			ov := old.GetShape().GetNcclVersion()
			if cellOf(old) != cellOf(m) || !calib.SameShape(old.GetShape(), m.GetShape()) || !olderRelease(ov, m.GetShape().GetNcclVersion()) {
				continue
			}
			full, ok := fetched[old.GetId()]
			if !ok {
				var resp *ginv1.GetMeasurementResponse
				if err := a.withCalibration(ctx, func(ctx context.Context, cc ginv1.CalibrationServiceClient) (err error) {
					resp, err = cc.GetMeasurement(ctx, &ginv1.GetMeasurementRequest{Id: old.GetId()})
					return err
				}); err != nil {
					fmt.Fprintf(a.stderr, "ginctl: not compared with measurement %s (NCCL %s): %v\n", old.GetId(), ov, err)
					continue
				}
				full = resp.GetMeasurement()
				fetched[old.GetId()] = full
			}
			var worst *sizeCmp
			slower := 0
			sizes := compareAtSizes(full, m)
			for i := range sizes {
				if sizes[i].slowerPct >= importRegressionPct {
					slower++
					if worst == nil || sizes[i].slowerPct > worst.slowerPct {
						worst = &sizes[i]
					}
				}
			}
			if worst == nil {
				continue
			}
			fmt.Fprintln(a.stderr, escapeText(fmt.Sprintf("ginctl: warning: %s on NCCL %s is %.0f%% or more slower than on NCCL %s at %d of %d size(s), worst %s at %s (%.2f µs against %.2f µs; measurement %s against %s): ginctl calibrate compare --nccl-version %s --nccl-version %s names each",
				cellOf(m), m.GetShape().GetNcclVersion(), importRegressionPct, ov, slower, len(sizes), signedPct(worst.slowerPct), humanBytes(worst.bytes),
				worst.to.GetTimeUs(), worst.from.GetTimeUs(), m.GetId(), old.GetId(), ov, m.GetShape().GetNcclVersion())))
		}
	}
}
