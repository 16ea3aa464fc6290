package nccltests

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Bounds on what Parse accepts.
const (
	MaxLineBytes = 1 << 20
	MaxRows      = 100_000
	MaxRuns      = 4096
	MaxRanks     = 1 << 16
	// maxErrors is how many line errors Parse reports (it counts the rest).
	maxErrors = 20
)

// Collective names as nccl-tests' binaries spell them without "_perf".
const (
	AllReduce     = "all_reduce"
	AllGather     = "all_gather"
	ReduceScatter = "reduce_scatter"
	Broadcast     = "broadcast"
	Reduce        = "reduce"
	AllToAll      = "alltoall"
	SendRecv      = "sendrecv"
)

// Log is everything Parse found in one file.
type Log struct {
	Runs []Run
}

// Run is one test's header and table.
type Run struct {
	// Line is the 1-based line where the run starts.
	Line int
	// Test is the binary's name without "_perf" and suffix ("all_reduce"),
	// or "" when the log does not say; Collective is Test, or what the
	// busbw/algbw ratio implies for the rank count when Test is "".
	Test       string
	Collective string
	// TestsVersion is nccl-tests' version (2.17.3+ print it).
	TestsVersion string
	// NCCLVersion is "2.21.5" (from "NCCL version …", else from the
	// nccl-library code in nccl-tests' version line), "" when absent.
	NCCLVersion string
	// NThread and NGpus are from the parameter line (0 when absent).
	NThread, NGpus int
	// Ranks are the "# Using devices" lines.
	Ranks []Rank
	// NNodes is NCCL's "nNodes" when printed, else the distinct hosts of
	// Ranks; NRanks is NCCL's "nRanks"/"nranks" when printed, else len(Ranks).
	NNodes, NRanks int
	// Env holds NCCL_* variables NCCL reported as set by the environment,
	// upper-case names, values as printed (trailing period removed).
	Env map[string]string
	// Network is the transport NCCL reported ("IB", "RoCE", "Socket",
	// "efa"), "" when the log does not say.
	Network string
	// Rows is the table in the order printed.
	Rows []Row
	// AvgBusBW is the footer's average (GB/s); HasAvg says it was there.
	AvgBusBW float64
	HasAvg   bool
	// Failure is the "Test … failure" line that cut the run short, if any.
	Failure string
	// TimeInMs: a v1 table (time printed in ms; Cell.TimeUs is converted).
	TimeInMs bool
}

// Rank is one "# Rank" line.
type Rank struct {
	// Line is the 1-based line it was printed on.
	Line   int
	Rank   int
	Host   string
	Device int
	BusID  string
	Name   string
}

// Row is one table row.
type Row struct {
	Line  int
	Bytes uint64
	Count uint64
	Type  string
	Op    string
	Root  int
	// OutOfPlace is nil for an in-place-only table.
	OutOfPlace *Cell
	InPlace    *Cell
	// Choice is NCCL's choice for this size when the log has TUNING lines.
	Choice *Choice
}

// Cell is one half of a row.
type Cell struct {
	TimeUs, AlgBW, BusBW float64
	// Wrong is the #wrong/error column as printed ("0", "N/A", "0e+00").
	Wrong string
}

// Choice is what a NCCL TUNING line says NCCL used for a size.
type Choice struct {
	Algo  string // NCCL's name: "Tree", "Ring", "NVLS", …
	Proto string // "LL", "LL128", "Simple"
}

// LineError is an error tied to a line of the input.
type LineError struct {
	Line int
	Msg  string
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

var (
	reLauncher   = regexp.MustCompile(`^\s*(?:\[\d+,\d+\]<(?:stdout|stderr)>:|\d+:\s|\[\d+\]\s|\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[^\]]*\]\s)`)
	reDebug      = regexp.MustCompile(`(\S*):(\d+):(\d+) \[\d+\](?: [^ ]+:\d+)? NCCL (INFO|WARN|TRACE|ABORT)( |$)`)
	reParams     = regexp.MustCompile(`^#?\s*nThreads?:?\s+(\d+)\s+nGpus:?\s+(\d+)`)
	reTestStart  = regexp.MustCompile(`^#\s*Collective test starting:\s*(\S+)`)
	reTestsVer   = regexp.MustCompile(`^#\s*nccl-tests version (\S+)(?:.*nccl-library=(\d+))?`)
	reRank       = regexp.MustCompile(`^#?\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*)$`)
	reNCCLVer    = regexp.MustCompile(`(?:^|\s)NCCL version (\d+\.\d+\.\d+)`)
	reEnv        = regexp.MustCompile(`\b(NCCL_[A-Z0-9_]+) set by environment to (.*)$`)
	reNNodes     = regexp.MustCompile(`\bnRanks (\d+) nNodes (\d+)\b`)
	reNranks     = regexp.MustCompile(`\bnranks (\d+)\b.*Init COMPLETE`)
	reTuning     = regexp.MustCompile(`(?:\w+(?: \[Symmetric\])?: )?(\d+) Bytes -> Algo (\w+) proto (\w+)`)
	reAvg        = regexp.MustCompile(`^#\s*Avg bus bandwidth\s*:\s*(\S+)`)
	reFailure    = regexp.MustCompile(`Test (?:NCCL |CUDA )?failure`)
	reNetIB      = regexp.MustCompile(`NET/IB : Using \S+/(IB|RoCE)`)
	reNetOFI     = regexp.MustCompile(`NET/OFI Selected Provider is (\S+)`)
	reNetUsing   = regexp.MustCompile(`Using network (\S+)`)
	reTestInCmd  = regexp.MustCompile(`\b(all_reduce|all_gather|reduce_scatter|broadcast|reduce|alltoall|sendrecv|gather|scatter|hypercube)_perf\w*`)
	reTestSuffix = regexp.MustCompile(`^(all_reduce|all_gather|reduce_scatter|broadcast|reduce|alltoall|sendrecv|gather|scatter|hypercube)_perf`)
)

var numericAlgos = []string{"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"}
var numericProtos = []string{"LL", "LL128", "Simple"}

// layout is what the column header says about the rows.
type layout struct {
	seen      bool
	halves    int // 1 (in-place only) or 2
	perHalf   int // metric columns per half: 4, or 8 with -I
	timestamp bool
	hasWrong  bool
	keys      int // key columns before the first time column
}

type parser struct {
	log     Log
	cur     *Run
	lay     layout
	inPlace bool // the banner names only in-place
	errs    []error
	nerrs   int
	rows    int
	// pending is a row cut by a debug line: its text so far and line.
	pending     string
	pendingLine int
	// choices of the current run from TUNING lines, by size.
	choices map[uint64]Choice
	// lastKeys is the key-column count of the last row read.
	lastKeys int
	// log-wide facts that may come before or after the header.
	version string
	env     map[string]string
	network string
}

// Parse reads nccl-tests output. It returns the runs it found and an error
// (joining *LineError values) when a line inside a table cannot be read, a
// bound is exceeded or no run with a table was found.
func Parse(r io.Reader) (*Log, error) {
	p := &parser{env: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), MaxLineBytes)
	n := 0
	for sc.Scan() {
		n++
		if err := p.line(n, sc.Text()); err != nil {
			return &p.log, err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &p.log, &LineError{Line: n + 1, Msg: fmt.Sprintf("line longer than %d bytes", MaxLineBytes)}
		}
		return &p.log, fmt.Errorf("nccltests: read: %w", err)
	}
	p.flushPending()
	p.finish()
	if p.nerrs > maxErrors {
		p.errs = append(p.errs, fmt.Errorf("and %d more line errors", p.nerrs-maxErrors))
	}
	if len(p.errs) > 0 {
		return &p.log, errors.Join(p.errs...)
	}
	for _, run := range p.log.Runs {
		if len(run.Rows) > 0 {
			return &p.log, nil
		}
	}
	return &p.log, errors.New("nccltests: no nccl-tests result table found")
}

func (p *parser) fail(line int, format string, args ...any) {
	p.nerrs++
	if p.nerrs <= maxErrors {
		p.errs = append(p.errs, &LineError{Line: line, Msg: fmt.Sprintf(format, args...)})
	}
}

// findIf runs re only on lines that contain lit.
func findIf(s, lit string, re *regexp.Regexp) []string {
	if !strings.Contains(s, lit) {
		return nil
	}
	return re.FindStringSubmatch(s)
}

// findDebug locates a NCCL debug line's "host:pid:tid [dev] NCCL LEVEL ".
func findDebug(s string) []int {
	if !strings.Contains(s, " NCCL ") {
		return nil
	}
	return reDebug.FindStringSubmatchIndex(s)
}

// strip removes CR, launcher prefixes and a leading timestamp.
func strip(s string) string {
	s = strings.TrimRight(s, "\r")
	for range 3 {
		loc := reLauncher.FindStringIndex(s)
		if loc == nil {
			break
		}
		s = s[loc[1]:]
	}
	return s
}

func (p *parser) newRun(line int) error {
	p.flushPending()
	p.finish()
	if len(p.log.Runs) >= MaxRuns {
		return &LineError{Line: line, Msg: fmt.Sprintf("more than %d test runs", MaxRuns)}
	}
	p.log.Runs = append(p.log.Runs, Run{Line: line, Env: map[string]string{}})
	p.cur = &p.log.Runs[len(p.log.Runs)-1]
	p.lay = layout{}
	p.inPlace = false
	p.choices = map[uint64]Choice{}
	for k, v := range p.env {
		p.cur.Env[k] = v
	}
	p.cur.Network = p.network
	return nil
}

// run returns the current run, starting one if there is none yet.
func (p *parser) run(line int) (*Run, error) {
	if p.cur == nil {
		if err := p.newRun(line); err != nil {
			return nil, err
		}
	}
	return p.cur, nil
}

// line reads one line of the log, in this order: an NCCL debug message
// (debugLine), a fact NCCL prints (fact), the rest of a row a debug line
// cut (joinPending), a line describing the run (runLine), the table
// (tableLine).
func (p *parser) line(n int, raw string) error {
	s := strip(raw)
	if loc := findDebug(s); loc != nil {
		return p.debugLine(n, s, loc)
	}
	t := strings.TrimSpace(s)
	if t == "" {
		return nil
	}
	for _, step := range []func(n int, t string) (bool, error){p.fact, p.joinPending, p.runLine, p.tableLine} {
		if done, err := step(n, t); done || err != nil {
			return err
		}
	}
	return nil
}

// debugLine handles a line holding an NCCL debug message (loc: where it
// starts and its text does): a table row cut by it is kept for the next
// line.
func (p *parser) debugLine(n int, s string, loc []int) error {
	before := s[:loc[0]]
	msg := s[loc[1]:]
	if bf := strings.Fields(before); len(bf) > 0 && isUint(bf[0]) && p.lay.seen {
		// A row cut by a debug line: keep its start for the next
		// line. NCCL's "host:pid:tid" may have swallowed the
		// out-of-place #wrong digit ("0host:…"): mark it unknown.
		keys := p.lastKeys
		if keys == 0 {
			keys = p.lay.keys
		}
		if p.lay.hasWrong && keys > 0 && len(bf) == keys+3 {
			before += " N/A"
		}
		p.pending, p.pendingLine = before, n
	}
	return p.debug(n, msg)
}

// fact reads the facts NCCL prints bare (its version) or inside INFO
// lines (environment settings, failures).
func (p *parser) fact(_ int, t string) (bool, error) {
	if m := findIf(t, "NCCL version", reNCCLVer); m != nil && !strings.HasPrefix(t, "#") {
		p.version = m[1]
		if p.cur != nil {
			p.cur.NCCLVersion = m[1]
		}
		return true, nil
	}
	if m := findIf(t, "set by environment", reEnv); m != nil {
		p.setEnv(m[1], m[2])
		return true, nil
	}
	if strings.Contains(t, "failure") && reFailure.MatchString(t) {
		if p.cur != nil && p.cur.Failure == "" {
			p.cur.Failure = t
		}
		return true, nil
	}
	return false, nil
}

// joinPending finishes a row a debug line cut, when t is its numeric
// tail; else the kept start is given up.
func (p *parser) joinPending(_ int, t string) (bool, error) {
	if p.pending == "" {
		return false, nil
	}
	if isNumericTail(t) {
		joined := p.pending + " " + t
		line := p.pendingLine
		p.pending = ""
		return true, p.row(line, joined)
	}
	p.flushPending()
	return false, nil
}

// runLine reads the lines that describe a run: the nccl-tests version,
// the test's start, its parameters, a rank, the average bus bandwidth,
// and the table's '#' header.
func (p *parser) runLine(n int, t string) (bool, error) {
	hash := strings.HasPrefix(t, "#")
	if m := findIf(t, "nccl-tests version", reTestsVer); hash && m != nil {
		if err := p.startIfUsed(n); err != nil {
			return true, err
		}
		r, err := p.run(n)
		if err != nil {
			return true, err
		}
		r.TestsVersion = m[1]
		if m[2] != "" && r.NCCLVersion == "" {
			r.NCCLVersion = versionFromCode(m[2])
		}
		return true, nil
	}
	if m := findIf(t, "Collective test starting", reTestStart); hash && m != nil {
		if err := p.startIfUsed(n); err != nil {
			return true, err
		}
		r, err := p.run(n)
		if err != nil {
			return true, err
		}
		if mm := reTestSuffix.FindStringSubmatch(m[1]); mm != nil {
			r.Test = mm[1]
		}
		return true, nil
	}
	if m := findIf(t, "nGpus", reParams); m != nil {
		if err := p.startIfUsed(n); err != nil {
			return true, err
		}
		r, err := p.run(n)
		if err != nil {
			return true, err
		}
		r.NThread, _ = strconv.Atoi(m[1])
		r.NGpus, _ = strconv.Atoi(m[2])
		return true, nil
	}
	if m := findIf(t, "Rank", reRank); m != nil {
		return true, p.rank(n, m)
	}
	if m := findIf(t, "Avg bus bandwidth", reAvg); hash && m != nil {
		if p.cur == nil {
			return true, nil
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
			p.fail(n, "average bus bandwidth %q is not a number", m[1])
			return true, nil
		}
		p.cur.AvgBusBW, p.cur.HasAvg = v, true
		return true, nil
	}
	if hash {
		p.header(n, strings.TrimSpace(strings.TrimPrefix(t, "#")))
		return true, nil
	}
	return false, nil
}

// rank records a "#  Rank  0 Group ... on host device ..." line (m: its
// reRank match); a rank after rows starts a new run.
func (p *parser) rank(n int, m []string) error {
	if p.cur != nil && len(p.cur.Rows) > 0 {
		if err := p.newRun(n); err != nil {
			return err
		}
	}
	r, err := p.run(n)
	if err != nil {
		return err
	}
	if len(r.Ranks) >= MaxRanks {
		return &LineError{Line: n, Msg: fmt.Sprintf("more than %d ranks", MaxRanks)}
	}
	rk, _ := strconv.Atoi(m[1])
	dev, _ := strconv.Atoi(m[3])
	r.Ranks = append(r.Ranks, Rank{Line: n, Rank: rk, Host: m[2], Device: dev, BusID: m[4], Name: strings.TrimSpace(m[5])})
	return nil
}

// tableLine reads the rest: the test named in an echoed command, v1's
// column names without '#', and the table's rows.
func (p *parser) tableLine(n int, t string) (bool, error) {
	if p.cur != nil && p.cur.Test == "" {
		if m := findIf(t, "_perf", reTestInCmd); m != nil {
			p.cur.Test = m[1]
		}
	}
	// v1 printed the column names without '#'.
	if strings.HasPrefix(t, "bytes ") || strings.HasPrefix(t, "size ") || t == "out-of-place in-place" || strings.HasPrefix(t, "out-of-place ") || strings.HasPrefix(t, "(B)") {
		p.header(n, t)
		return true, nil
	}
	if first, _, _ := strings.Cut(t, " "); isUint(strings.TrimSpace(strings.SplitN(first, "\t", 2)[0])) {
		if p.cur == nil || !p.lay.seen {
			// Numbers outside a table (an echoed command, a paste
			// without the header): only read if it looks like a row.
			if p.cur == nil || len(strings.Fields(t)) < 6 {
				return true, nil
			}
		}
		return true, p.row(n, t)
	}
	if p.cur == nil {
		if m := findIf(t, "_perf", reTestInCmd); m != nil {
			// An echoed command before the header names the test.
			if err := p.newRun(n); err != nil {
				return true, err
			}
			p.cur.Test = m[1]
		}
	}
	return true, nil
}

// startIfUsed starts a new run when the current one already has rows or a
// parameter line (a second test in the same file).
func (p *parser) startIfUsed(n int) error {
	if p.cur != nil && (len(p.cur.Rows) > 0 || p.cur.HasAvg) {
		return p.newRun(n)
	}
	return nil
}

func (p *parser) setEnv(name, value string) {
	value = strings.TrimSpace(value)
	value = strings.TrimSuffix(value, ".")
	p.env[name] = value
	if p.cur != nil {
		p.cur.Env[name] = value
	}
}

func (p *parser) debug(n int, msg string) error {
	if m := reNCCLVer.FindStringSubmatch(" " + msg); m != nil {
		p.version = m[1]
		if p.cur != nil {
			p.cur.NCCLVersion = m[1]
		}
	}
	if m := reEnv.FindStringSubmatch(msg); m != nil {
		p.setEnv(m[1], m[2])
	}
	if m := reNNodes.FindStringSubmatch(msg); m != nil && p.cur != nil {
		p.cur.NRanks, _ = strconv.Atoi(m[1])
		p.cur.NNodes, _ = strconv.Atoi(m[2])
	} else if m := reNranks.FindStringSubmatch(msg); m != nil && p.cur != nil {
		p.cur.NRanks, _ = strconv.Atoi(m[1])
	}
	if m := reTuning.FindStringSubmatch(msg); m != nil && p.cur != nil {
		size, err := strconv.ParseUint(m[1], 10, 64)
		if err == nil {
			if _, ok := p.choices[size]; !ok {
				p.choices[size] = Choice{Algo: algoName(m[2]), Proto: protoName(m[3])}
			}
		}
	}
	for _, re := range []*regexp.Regexp{reNetIB, reNetOFI, reNetUsing} {
		if m := re.FindStringSubmatch(msg); m != nil {
			p.network = m[1]
			if p.cur != nil {
				p.cur.Network = m[1]
			}
			break
		}
	}
	return nil
}

func algoName(s string) string {
	if i, err := strconv.Atoi(s); err == nil {
		if i >= 0 && i < len(numericAlgos) {
			return numericAlgos[i]
		}
		return s
	}
	for _, a := range numericAlgos {
		if strings.EqualFold(a, s) || strings.EqualFold(strings.ReplaceAll(a, "NVLSTree", "NVLS_TREE"), s) || strings.EqualFold(strings.ReplaceAll(a, "CollNet", "COLLNET_"), s) {
			return a
		}
	}
	return s
}

func protoName(s string) string {
	if i, err := strconv.Atoi(s); err == nil {
		if i >= 0 && i < len(numericProtos) {
			return numericProtos[i]
		}
		return s
	}
	for _, pr := range numericProtos {
		if strings.EqualFold(pr, s) {
			return pr
		}
	}
	return s
}

// header reads '#' lines of the table header (without the '#').
func (p *parser) header(n int, h string) {
	f := strings.Fields(h)
	if len(f) == 0 {
		return
	}
	switch {
	case f[0] == "out-of-place" || f[0] == "in-place":
		p.inPlace = f[0] == "in-place" && len(f) == 1
	case f[0] == "size" || f[0] == "bytes":
		r, err := p.run(n)
		if err != nil {
			return
		}
		p.lay = columnLayout(f, p.inPlace)
		r.TimeInMs = f[0] == "bytes"
	}
}

// columnLayout reads the column-name line.
func columnLayout(f []string, inPlaceOnly bool) layout {
	l := layout{seen: true, halves: 2, perHalf: 4}
	times, first := 0, -1
	for i, c := range f {
		switch c {
		case "time", "cputime":
			times++
			if first < 0 {
				first = i
			}
		case "timestamp":
			l.timestamp = true
		case "#wrong", "error", "res", "wrong":
			l.hasWrong = true
		}
	}
	l.keys = max(first, 0)
	if times == 1 || inPlaceOnly {
		l.halves = 1
	}
	cols := len(f) - first
	if l.timestamp {
		cols--
	}
	if first >= 0 && l.halves > 0 && cols/l.halves >= 3 {
		l.perHalf = cols / l.halves
	}
	if !l.hasWrong && l.perHalf == 4 {
		l.perHalf = 3
	}
	return l
}

func (p *parser) flushPending() {
	if p.pending == "" {
		return
	}
	line, text := p.pendingLine, p.pending
	p.pending = ""
	_ = p.row(line, text)
}

// row reads a table row.
func (p *parser) row(n int, t string) error {
	r, err := p.run(n)
	if err != nil {
		return err
	}
	if p.rows >= MaxRows {
		return &LineError{Line: n, Msg: fmt.Sprintf("more than %d table rows", MaxRows)}
	}
	f := strings.Fields(t)
	lay := p.lay
	if !lay.seen {
		// No header: the v2.13+ layout, in-place only when short.
		lay = layout{halves: 2, perHalf: 4, hasWrong: true}
		if len(f) < 2+8 {
			lay.halves = 1
		}
	}
	if lay.timestamp {
		if len(f) < 2 {
			p.fail(n, "row has no timestamp")
			return nil
		}
		f = f[:len(f)-2]
	}
	metrics := lay.halves * lay.perHalf
	keys := len(f) - metrics
	if keys < 1 {
		p.fail(n, "row has %d fields, want at least %d", len(f), 1+metrics)
		return nil
	}
	p.lastKeys = keys
	row := Row{Line: n, Root: -1}
	row.Bytes, err = strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		p.fail(n, "size %q is not a byte count", f[0])
		return nil
	}
	k := f[1:keys]
	if len(k) > 0 {
		if c, err := strconv.ParseUint(k[0], 10, 64); err == nil {
			row.Count = c
			k = k[1:]
		}
	}
	if len(k) > 0 {
		row.Type, k = k[0], k[1:]
	}
	if len(k) > 0 {
		if _, err := strconv.Atoi(k[0]); err != nil {
			row.Op, k = k[0], k[1:]
		}
	}
	if len(k) > 0 {
		if root, err := strconv.Atoi(k[0]); err == nil {
			row.Root = root
		}
	}
	cells := make([]*Cell, 0, 2)
	for h := range lay.halves {
		c, msg := readCell(f[keys+h*lay.perHalf:keys+(h+1)*lay.perHalf], lay.hasWrong, r.TimeInMs)
		if msg != "" {
			p.fail(n, "%s", msg)
			return nil
		}
		cells = append(cells, c)
	}
	if len(cells) == 2 {
		row.OutOfPlace, row.InPlace = cells[0], cells[1]
	} else {
		row.InPlace = cells[0]
	}
	if c, ok := p.choices[row.Bytes]; ok {
		row.Choice = &c
	}
	r.Rows = append(r.Rows, row)
	p.rows++
	return nil
}

func readCell(f []string, hasWrong, ms bool) (*Cell, string) {
	var v [3]float64
	for i, name := range []string{"time", "algbw", "busbw"} {
		x, err := strconv.ParseFloat(f[i], 64)
		if err != nil || math.IsInf(x, 0) || math.IsNaN(x) || x < 0 {
			return nil, fmt.Sprintf("%s %q is not a non-negative number", name, f[i])
		}
		v[i] = x
	}
	c := &Cell{TimeUs: v[0], AlgBW: v[1], BusBW: v[2]}
	if ms {
		c.TimeUs *= 1000
	}
	if hasWrong && len(f) > 3 {
		c.Wrong = f[3]
		if c.Wrong != "N/A" {
			if _, err := strconv.ParseFloat(c.Wrong, 64); err != nil {
				return nil, fmt.Sprintf("#wrong %q is neither a number nor N/A", c.Wrong)
			}
		}
	}
	return c, ""
}

// finish fills what is derived once a run is complete.
func (p *parser) finish() {
	r := p.cur
	if r == nil {
		return
	}
	if r.NCCLVersion == "" {
		r.NCCLVersion = p.version
	}
	if r.NNodes == 0 {
		hosts := map[string]bool{}
		for _, rk := range r.Ranks {
			hosts[rk.Host] = true
		}
		r.NNodes = len(hosts)
	}
	if r.NRanks == 0 {
		r.NRanks = len(r.Ranks)
	}
	for i := range r.Rows {
		if r.Rows[i].Choice == nil {
			if c, ok := p.choices[r.Rows[i].Bytes]; ok {
				r.Rows[i].Choice = &c
			}
		}
	}
	r.Collective = r.Test
	if r.Collective == "" {
		r.Collective = inferCollective(r)
	}
}

// inferCollective guesses the collective from busbw/algbw and the rank
// count when the log does not name the test.
func inferCollective(r *Run) string {
	n := float64(r.NRanks)
	if n < 2 {
		return ""
	}
	for _, row := range r.Rows {
		c := row.InPlace
		if row.OutOfPlace != nil {
			c = row.OutOfPlace
		}
		if c == nil || c.AlgBW < 1 {
			continue
		}
		ratio := c.BusBW / c.AlgBW
		switch {
		case math.Abs(ratio-2*(n-1)/n) < 0.02:
			return AllReduce
		case math.Abs(ratio-(n-1)/n) < 0.02:
			return "" // all_gather, reduce_scatter or alltoall: ambiguous
		}
		return ""
	}
	return ""
}

// versionFromCode turns nccl-tests' nccl-library code into "X.Y.Z".
func versionFromCode(s string) string {
	c, err := strconv.Atoi(s)
	if err != nil || c <= 0 {
		return ""
	}
	if c >= 20900 {
		return fmt.Sprintf("%d.%d.%d", c/10000, c/100%100, c%100)
	}
	return fmt.Sprintf("%d.%d.%d", c/1000, c/100%10, c%100)
}

func isUint(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// isNumericTail: the rest of a row cut by a debug line (numbers and N/A).
func isNumericTail(t string) bool {
	f := strings.Fields(t)
	if len(f) == 0 || len(f) > 12 {
		return false
	}
	for _, x := range f {
		if x == "N/A" {
			continue
		}
		if _, err := strconv.ParseFloat(x, 64); err != nil {
			return false
		}
	}
	return true
}

// Point is one measured size of a run: the best of its out-of-place and
// in-place cells (the faster time).
type Point struct {
	Bytes  uint64
	TimeUs float64
	BusBW  float64
	AlgBW  float64
	Choice *Choice
	// SlowerTimeUs is the slowest cell of the size (the other of
	// out-of-place and in-place, or the slowest repeat), 0 when the size
	// has one cell: SlowerTimeUs/TimeUs - 1 is the size's run-to-run spread.
	SlowerTimeUs float64
}

// Points returns the run's measurements per size, the faster cell of each
// row; a size printed more than once (-N, repeated sweeps) keeps its
// fastest. Rows with zero time are skipped. Sorted by size.
func (r *Run) Points() []Point {
	best := map[uint64]Point{}
	cells := map[uint64]int{}
	slowest := map[uint64]float64{}
	var order []uint64
	for _, row := range r.Rows {
		for _, c := range []*Cell{row.OutOfPlace, row.InPlace} {
			if c == nil || c.TimeUs <= 0 {
				continue
			}
			old, ok := best[row.Bytes]
			if !ok {
				order = append(order, row.Bytes)
			}
			if !ok || c.TimeUs < old.TimeUs {
				best[row.Bytes] = Point{Bytes: row.Bytes, TimeUs: c.TimeUs, BusBW: c.BusBW, AlgBW: c.AlgBW, Choice: row.Choice}
			}
			cells[row.Bytes]++
			slowest[row.Bytes] = max(slowest[row.Bytes], c.TimeUs)
		}
	}
	for b, p := range best {
		if cells[b] > 1 {
			p.SlowerTimeUs = slowest[b]
			best[b] = p
		}
	}
	out := make([]Point, 0, len(order))
	for _, b := range order {
		out = append(out, best[b])
	}
	sortPoints(out)
	return out
}

func sortPoints(ps []Point) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].Bytes < ps[j].Bytes })
}

// GPUsPerNode is the ranks per node when every node has the same count,
// else 0.
func (r *Run) GPUsPerNode() int {
	if len(r.Ranks) == 0 || r.NNodes == 0 {
		if r.NNodes > 0 && r.NRanks%r.NNodes == 0 {
			return r.NRanks / r.NNodes
		}
		return 0
	}
	per := map[string]int{}
	for _, rk := range r.Ranks {
		per[rk.Host]++
	}
	n := -1
	for _, c := range per {
		if n >= 0 && c != n {
			return 0
		}
		n = c
	}
	return n
}

// Hosts lists the distinct hosts of the rank lines in first-seen order.
func (r *Run) Hosts() []string {
	seen := map[string]bool{}
	var out []string
	for _, rk := range r.Ranks {
		if !seen[rk.Host] {
			seen[rk.Host] = true
			out = append(out, rk.Host)
		}
	}
	return out
}
