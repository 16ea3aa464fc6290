package tunercsvin

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/calib"
)

// Bounds on what Parse accepts.
const (
	MaxFileBytes  = 16 << 20
	MaxRows       = 100_000
	MaxLineBytes  = 4096
	MaxFieldBytes = 64
	MaxColumns    = 64
	// MaxNodes, MaxRanks and MaxSize bound a row's counts and size.
	MaxNodes = 1 << 16
	MaxRanks = 1 << 20
	MaxSize  = 1 << 50
	// maxErrors is how many line errors Parse reports (it counts the rest).
	maxErrors = 20
)

// Columns is the documented column order, the order of a file without a
// header line.
var Columns = []string{"collective", "size_bytes", "algorithm", "protocol", "channels", "nodes", "ranks",
	"pipeOps", "regBuff", "cost_metric", "bandwidth_gbps", "latency_us"}

// required are the columns a file must have.
var required = []string{"collective", "size_bytes", "algorithm", "protocol", "nodes", "ranks", "latency_us"}

// Row is one measured configuration.
type Row struct {
	// Line is the 1-based line it was read from.
	Line       int
	Collective ginv1.Collective
	Bytes      uint64
	Algorithm  ginv1.Algorithm
	Protocol   ginv1.Protocol
	// Channels, Nodes, Ranks, PipeOps and RegBuff are -1 where the row
	// says "any" (or the column is absent).
	Channels, Nodes, Ranks, PipeOps, RegBuff int
	// CostMetric and BandwidthGBps are 0 where absent (as the script reads
	// them); LatencyUs is the measured time, always > 0.
	CostMetric, BandwidthGBps, LatencyUs float64
}

// File is what Parse read.
type File struct {
	Rows []Row
	// HeaderLine is the line of the first header, 0 when the file has none
	// (its columns are then Columns, in that order).
	HeaderLine int
}

// LineError is an error tied to a line of the input.
type LineError struct {
	Line int
	Msg  string
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

type parser struct {
	file  File
	cols  map[string]int // column name to field index
	ncols int
	errs  []error
	nerrs int
}

func (p *parser) fail(line int, format string, args ...any) {
	p.nerrs++
	if p.nerrs <= maxErrors {
		p.errs = append(p.errs, &LineError{Line: line, Msg: fmt.Sprintf(format, args...)})
	}
}

// Parse reads a performance-data CSV. It returns the rows it could read
// and an error (joining *LineError values) when a line cannot be read, a
// bound is exceeded, or the file has no row.
func Parse(r io.Reader) (*File, error) {
	p := &parser{}
	cr := &countingReader{r: io.LimitReader(r, MaxFileBytes+1)}
	sc := bufio.NewScanner(cr)
	sc.Buffer(make([]byte, 0, MaxLineBytes+1), MaxLineBytes)
	n, consumed := 0, 0
	for sc.Scan() {
		n++
		if consumed += len(sc.Bytes()) + 1; consumed > MaxFileBytes {
			return &p.file, &LineError{Line: n, Msg: fmt.Sprintf("the file is larger than %d MiB", MaxFileBytes>>20)}
		}
		line := sc.Text()
		if n == 1 {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		if fatal := p.line(n, line); fatal != nil {
			return &p.file, fatal
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &p.file, &LineError{Line: n + 1, Msg: fmt.Sprintf("line longer than %d bytes", MaxLineBytes)}
		}
		return &p.file, fmt.Errorf("tunercsvin: read: %w", err)
	}
	if cr.n > MaxFileBytes {
		return &p.file, &LineError{Line: n, Msg: fmt.Sprintf("the file is larger than %d MiB", MaxFileBytes>>20)}
	}
	if p.nerrs > maxErrors {
		p.errs = append(p.errs, fmt.Errorf("and %d more line errors", p.nerrs-maxErrors))
	}
	if len(p.errs) > 0 {
		return &p.file, errors.Join(p.errs...)
	}
	if len(p.file.Rows) == 0 {
		return &p.file, errors.New("tunercsvin: no measurement row (want " + strings.Join(Columns, ",") + ")")
	}
	return &p.file, nil
}

// line reads one line; the error it returns ends the parse (a header
// that cannot be read, too many rows).
func (p *parser) line(n int, raw string) error {
	t := strings.TrimSpace(raw)
	if t == "" || strings.HasPrefix(t, "#") {
		return nil
	}
	parts := strings.Split(t, ",")
	if len(parts) > MaxColumns {
		return &LineError{Line: n, Msg: fmt.Sprintf("%d fields, more than %d", len(parts), MaxColumns)}
	}
	fields := make([]string, len(parts))
	for i, f := range parts {
		v, err := field(f)
		if err != nil {
			p.fail(n, "field %d: %v", i+1, err)
			return nil
		}
		fields[i] = v
	}
	for _, f := range fields {
		if strings.EqualFold(f, "collective") {
			return p.header(n, fields)
		}
	}
	if p.cols == nil {
		p.cols = map[string]int{}
		for i, c := range Columns {
			p.cols[c] = i
		}
		p.ncols = len(Columns)
	}
	if len(p.file.Rows) >= MaxRows {
		return &LineError{Line: n, Msg: fmt.Sprintf("more than %d rows", MaxRows)}
	}
	if len(fields) != p.ncols {
		how := "the documented columns are"
		if p.file.HeaderLine > 0 {
			how = "the header names"
		}
		p.fail(n, "%d fields, %s %d (%s)", len(fields), how, p.ncols, p.columnList())
		return nil
	}
	row, err := p.row(n, fields)
	if err != nil {
		p.fail(n, "%v", err)
		return nil
	}
	p.file.Rows = append(p.file.Rows, row)
	return nil
}

// columnList names the current columns in order.
func (p *parser) columnList() string {
	names := make([]string, p.ncols)
	for c, i := range p.cols {
		names[i] = c
	}
	for i, c := range names {
		if c == "" {
			names[i] = "?"
		}
	}
	return strings.Join(names, ",")
}

// field is one field as read: trimmed, unquoted, bounded.
func field(f string) (string, error) {
	f = strings.TrimSpace(f)
	if len(f) > MaxFieldBytes {
		return "", fmt.Errorf("%d bytes, more than %d", len(f), MaxFieldBytes)
	}
	if strings.Contains(f, `"`) {
		if len(f) < 2 || f[0] != '"' || f[len(f)-1] != '"' || strings.Contains(f[1:len(f)-1], `"`) {
			return "", fmt.Errorf("%q: a quoted field is one value between two quotes", f)
		}
		f = strings.TrimSpace(f[1 : len(f)-1])
	}
	return f, nil
}

// header reads a header line: the columns of the rows after it, by name
// as the script's csv.DictReader reads them (case aside; unknown ones are
// ignored).
func (p *parser) header(n int, fields []string) error {
	cols := map[string]int{}
	canon := map[string]string{}
	for _, c := range Columns {
		canon[strings.ToLower(c)] = c
	}
	for i, f := range fields {
		name, known := canon[strings.ToLower(f)]
		if !known {
			continue
		}
		if _, dup := cols[name]; dup {
			return &LineError{Line: n, Msg: fmt.Sprintf("header: column %s twice", name)}
		}
		cols[name] = i
	}
	var missing []string
	for _, c := range required {
		if _, ok := cols[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return &LineError{Line: n, Msg: fmt.Sprintf("header: no column %s (a measurement needs %s)", strings.Join(missing, ", "), strings.Join(required, ","))}
	}
	p.cols, p.ncols = cols, len(fields)
	if p.file.HeaderLine == 0 {
		p.file.HeaderLine = n
	}
	return nil
}

// row reads one data row.
func (p *parser) row(n int, fields []string) (Row, error) {
	r := Row{Line: n, Channels: -1, Nodes: -1, Ranks: -1, PipeOps: -1, RegBuff: -1}
	get := func(c string) (string, bool) {
		i, ok := p.cols[c]
		if !ok {
			return "", false
		}
		return fields[i], true
	}
	var err error
	v, _ := get("collective")
	if r.Collective, err = ParseCollective(v); err != nil {
		return r, err
	}
	v, _ = get("size_bytes")
	if r.Bytes, err = strconv.ParseUint(v, 10, 64); err != nil || r.Bytes == 0 || r.Bytes > MaxSize {
		return r, fmt.Errorf("size_bytes %q: want a whole number of bytes in 1..2^50", v)
	}
	v, _ = get("algorithm")
	if r.Algorithm, err = ParseAlgorithm(v); err != nil {
		return r, err
	}
	v, _ = get("protocol")
	if r.Protocol, err = ParseProtocol(v); err != nil {
		return r, err
	}
	for _, c := range []struct {
		name    string
		to      *int
		lo, max int
		opt     bool
	}{
		{"channels", &r.Channels, 0, 1024, true},
		{"nodes", &r.Nodes, 1, MaxNodes, false},
		{"ranks", &r.Ranks, 1, MaxRanks, false},
		{"pipeOps", &r.PipeOps, 0, 1 << 20, true},
		{"regBuff", &r.RegBuff, 0, 1, true},
	} {
		v, ok := get(c.name)
		if !ok || (c.opt && v == "") {
			continue
		}
		i, err := strconv.Atoi(v)
		if err != nil || (i != -1 && (i < c.lo || i > c.max)) {
			return r, fmt.Errorf("%s %q: want -1 (any) or a whole number in %d..%d", c.name, v, c.lo, c.max)
		}
		*c.to = i
	}
	if r.Nodes > 0 && r.Ranks > 0 && r.Ranks < r.Nodes {
		return r, fmt.Errorf("%d ranks on %d nodes", r.Ranks, r.Nodes)
	}
	for _, c := range []struct {
		name     string
		to       *float64
		positive bool
	}{
		{"cost_metric", &r.CostMetric, false},
		{"bandwidth_gbps", &r.BandwidthGBps, false},
		{"latency_us", &r.LatencyUs, true},
	} {
		v, ok := get(c.name)
		if !ok || (!c.positive && v == "") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		switch {
		case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
			return r, fmt.Errorf("%s %q: not a finite number", c.name, v)
		case c.positive && f <= 0:
			return r, fmt.Errorf("%s %q: a measured time must be above 0", c.name, v)
		case f < 0 && c.name == "bandwidth_gbps":
			return r, fmt.Errorf("%s %q: a bandwidth is not negative", c.name, v)
		}
		*c.to = f
	}
	return r, nil
}

// ParseCollective reads a collective as the example tuner spells it
// (allreduce, allgather, reducescatter, broadcast, reduce; case and
// underscores aside: all_reduce too).
func ParseCollective(s string) (ginv1.Collective, error) {
	switch strings.ReplaceAll(strings.ToLower(s), "_", "") {
	case "allreduce":
		return ginv1.Collective_COLLECTIVE_ALL_REDUCE, nil
	case "allgather":
		return ginv1.Collective_COLLECTIVE_ALL_GATHER, nil
	case "reducescatter":
		return ginv1.Collective_COLLECTIVE_REDUCE_SCATTER, nil
	case "broadcast":
		return ginv1.Collective_COLLECTIVE_BROADCAST, nil
	case "reduce":
		return ginv1.Collective_COLLECTIVE_REDUCE, nil
	}
	return 0, fmt.Errorf("collective %q: want one of allreduce, allgather, reducescatter, broadcast, reduce (the collectives NCCL's tuner sees)", s)
}

// ParseAlgorithm reads an algorithm as the example tuner spells it (tree,
// ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat; case and
// underscores aside): calib's names without the underscores.
func ParseAlgorithm(s string) (ginv1.Algorithm, error) {
	a, err := calib.ParseAlgorithm(strings.ReplaceAll(s, "_", ""))
	if err != nil {
		return 0, fmt.Errorf("algorithm %q: want one of tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat", s)
	}
	return a, nil
}

// ParseProtocol reads a protocol (ll, ll128, simple; case aside).
func ParseProtocol(s string) (ginv1.Protocol, error) {
	p, err := calib.ParseProtocol(s)
	if err != nil {
		return 0, fmt.Errorf("protocol %q: want one of ll, ll128, simple", s)
	}
	return p, nil
}
