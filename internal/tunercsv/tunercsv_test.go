package tunercsv

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/planread"
	"github.com/gin-topology/gin/internal/plantable"
)

// The reader below follows the example tuner's documented format
// (docs/reference: plugins/tuner/example), not Render: NCCL's indices
// (ncclFunc_t, NCCL_ALGO_*, NCCL_PROTO_*) by name, rows of 8 to 10
// trimmed fields, '#' and blank lines ignored, -1 as "any".
var (
	exColl  = map[string]int{"broadcast": 0, "reduce": 1, "allgather": 2, "reducescatter": 3, "allreduce": 4}
	exAlgo  = map[string]int{"tree": 0, "ring": 1, "collnet_direct": 2, "collnet_chain": 3, "nvls": 4, "nvls_tree": 5, "pat": 6}
	exProto = map[string]int{"ll": 0, "ll128": 1, "simple": 2}
)

type exRow struct {
	coll, algo, proto                   int
	minB, maxB                          uint64
	channels, nNodes, nRanks, pipe, reg int64
}

// readExample parses a config strictly: an unknown name, a bad number or
// a line over 256 bytes fails the test (the example would silently read
// them otherwise).
func readExample(t *testing.T, b []byte) []exRow {
	t.Helper()
	var rows []exRow
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if len(line)+1 > 256 {
			t.Fatalf("line %d: %d bytes with its newline, more than 256: %q", n, len(line)+1, line)
		}
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) < 8 || len(f) > 10 {
			t.Fatalf("line %d: %d fields: %q", n, len(f), line)
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		num := func(s string) int64 {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatalf("line %d: %q: %v", n, s, err)
			}
			return v
		}
		size := func(s string) uint64 {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatalf("line %d: %q: %v", n, s, err)
			}
			return v
		}
		name := func(m map[string]int, s string) int {
			v, ok := m[s]
			if !ok {
				t.Fatalf("line %d: unknown name %q", n, s)
			}
			return v
		}
		r := exRow{coll: name(exColl, f[0]), minB: size(f[1]), maxB: size(f[2]), algo: name(exAlgo, f[3]), proto: name(exProto, f[4]),
			channels: num(f[5]), nNodes: num(f[6]), nRanks: num(f[7]), pipe: -1, reg: -1}
		if len(f) > 8 {
			r.pipe = num(f[8])
		}
		if len(f) > 9 {
			r.reg = num(f[9])
		}
		rows = append(rows, r)
	}
	return rows
}

// exResolve is the example's getCollInfo: the first row that matches and
// whose cell is within numAlgo×numProto and usable; ok false when none.
func exResolve(rows []exRow, coll int, nBytes uint64, nNodes, nRanks int, numAlgo, numProto int, usable func(a, p int) bool) (exRow, bool) {
	for _, r := range rows {
		if r.coll == coll && nBytes >= r.minB && nBytes <= r.maxB &&
			(r.nNodes == -1 || r.nNodes == int64(nNodes)) && (r.nRanks == -1 || r.nRanks == int64(nRanks)) &&
			r.pipe == -1 && r.reg == -1 &&
			r.algo < numAlgo && r.proto < numProto && usable(r.algo, r.proto) {
			return r, true
		}
	}
	return exRow{}, false
}

func choice(a ginv1.Algorithm, p ginv1.Protocol, ch uint32) *ginv1.PlanChoice {
	return &ginv1.PlanChoice{Algorithm: a, Protocol: p, Channels: ch, Evidence: fmt.Sprintf("%v/%v by test", a, p), Basis: "model"}
}

func ifOffered(a ginv1.Algorithm, p ginv1.Protocol) *ginv1.PlanChoice {
	return &ginv1.PlanChoice{Algorithm: a, Protocol: p, NcclIfOffered: true, Basis: "nccl", Evidence: "NCCL's own choice"}
}

const (
	tree   = ginv1.Algorithm_ALGORITHM_TREE
	ring   = ginv1.Algorithm_ALGORITHM_RING
	cnd    = ginv1.Algorithm_ALGORITHM_COLLNET_DIRECT
	cnc    = ginv1.Algorithm_ALGORITHM_COLLNET_CHAIN
	nvls   = ginv1.Algorithm_ALGORITHM_NVLS
	nvlsT  = ginv1.Algorithm_ALGORITHM_NVLS_TREE
	pat    = ginv1.Algorithm_ALGORITHM_PAT
	ll     = ginv1.Protocol_PROTOCOL_LL
	ll128  = ginv1.Protocol_PROTOCOL_LL128
	simple = ginv1.Protocol_PROTOCOL_SIMPLE
	noAlgo = ginv1.Algorithm_ALGORITHM_UNSPECIFIED
	noProt = ginv1.Protocol_PROTOCOL_UNSPECIFIED
)

func rule(coll ginv1.Collective, ranks, nodes, lo, hi uint32) *ginv1.PlanRule {
	return &ginv1.PlanRule{Collective: coll, NRanks: ranks, NNodes: nodes, MinLog2Bytes: lo, MaxLog2Bytes: hi, Reason: "test rule"}
}

func withChoices(r *ginv1.PlanRule, cs ...*ginv1.PlanChoice) *ginv1.PlanRule {
	r.Choices = cs
	// The rule's own cell is its first choice's, as the planner writes it.
	if c := cs[0]; !c.GetNcclIfOffered() {
		r.Algorithm, r.Protocol, r.Channels = c.GetAlgorithm(), c.GetProtocol(), c.GetChannels()
	}
	return r
}

func withCell(r *ginv1.PlanRule, a ginv1.Algorithm, p ginv1.Protocol, ch uint32) *ginv1.PlanRule {
	r.Algorithm, r.Protocol, r.Channels = a, p, ch
	return r
}

func finish(p *ginv1.Plan) *ginv1.Plan {
	p.FormatVersion = planread.FormatVersion
	p.ContentHash = planread.Hash(p)
	return p
}

// mixedPlan has every kind of rule: one-cell rules (forcing, leaving it
// to NCCL, NCCL's choice with channels), forcing choices, a conditional
// NCCL choice first or in the middle, measured choices with versions, a
// gap without rules, and the last bucket.
func mixedPlan() *ginv1.Plan {
	ar, ag, rs, bc, rd := ginv1.Collective_COLLECTIVE_ALL_REDUCE, ginv1.Collective_COLLECTIVE_ALL_GATHER,
		ginv1.Collective_COLLECTIVE_REDUCE_SCATTER, ginv1.Collective_COLLECTIVE_BROADCAST, ginv1.Collective_COLLECTIVE_REDUCE
	measured := choice(ring, simple, 0)
	measured.Basis, measured.MinNcclVersion, measured.MaxNcclVersion = "measured", 22703, 22705
	return finish(&ginv1.Plan{JobId: "42", Nodes: []string{"node001", "node002"}, GpusPerNode: 8, ModelVersion: "test",
		Rules: []*ginv1.PlanRule{
			withCell(rule(ar, 16, 2, 0, 9), tree, ll, 0),
			withChoices(rule(ar, 16, 2, 10, 19), choice(nvls, simple, 0), choice(ring, ll128, 8)),
			withChoices(rule(ar, 16, 2, 20, 29), ifOffered(nvls, noProt), choice(tree, simple, 0)),
			withChoices(rule(ar, 16, 2, 30, 34), measured, &ginv1.PlanChoice{Basis: "nccl"}),
			withChoices(rule(ar, 16, 2, 35, 40), choice(nvlsT, simple, 16), choice(nvls, simple, 0), choice(ring, simple, 0)),
			rule(ag, 16, 2, 0, 40),
			withChoices(rule(rs, 16, 2, 0, 14), choice(pat, simple, 0), ifOffered(nvlsT, simple), choice(ring, ll, 0)),
			withChoices(rule(rs, 16, 2, 15, 40), &ginv1.PlanChoice{Basis: "nccl"}),
			withCell(rule(bc, 8, 1, 0, 40), ring, simple, 4),
			withChoices(rule(rd, 8, 1, 5, 12), choice(cnd, simple, 0), choice(cnc, simple, 0), choice(tree, ll128, 2)),
			withCell(rule(ar, 8, 1, 0, 40), noAlgo, noProt, 2),
			withCell(rule(ag, 8, 1, 0, 20), tree, noProt, 0),
			withChoices(rule(ag, 8, 1, 21, 40), ifOffered(nvls, simple), choice(ring, simple, 0)),
		}})
}

// rotatingPlan is the plugin harness's kind of plan: every shape ×
// collective × 5 buckets, the choices rotating over every algorithm and
// protocol.
func rotatingPlan() *ginv1.Plan {
	lists := [][]*ginv1.PlanChoice{
		{choice(tree, ll, 0)},
		{choice(nvls, simple, 0), choice(tree, simple, 0)},
		{ifOffered(nvlsT, noProt), choice(ring, ll128, 4)},
		{choice(pat, simple, 0), choice(ring, simple, 0)},
		{choice(cnd, simple, 0), choice(cnc, simple, 2), choice(nvls, ll128, 0), choice(ring, ll, 0)},
		{{Basis: "nccl"}},
		{choice(nvlsT, simple, 8), ifOffered(nvls, simple), choice(tree, ll128, 0)},
		{choice(ring, ll128, 0), {Basis: "nccl"}, choice(tree, ll, 0)},
	}
	p := &ginv1.Plan{JobId: "7", Nodes: []string{"a", "b", "c", "d"}, GpusPerNode: 4}
	for si, s := range [][2]uint32{{16, 4}, {4, 1}, {32, 4}} {
		for coll := range 5 {
			for lo, k := uint32(0), 0; lo <= planread.MaxLog2Bytes; lo, k = lo+5, k+1 {
				cs := lists[(coll+k+si)%len(lists)]
				r := rule(ginv1.Collective(coll+1), s[0], s[1], lo, min(lo+4, planread.MaxLog2Bytes))
				p.Rules = append(p.Rules, withChoices(r, cs...))
			}
		}
	}
	return finish(p)
}

// masks are cost tables: which (algo, proto) cells NCCL offers.
func masks() map[string]func(a, p int) bool {
	return map[string]func(a, p int) bool{
		"all":              func(a, p int) bool { return true },
		"no-nvls":          func(a, p int) bool { return a != 4 },
		"no-nvls-nvlstree": func(a, p int) bool { return a != 4 && a != 5 },
		"no-collnet-pat":   func(a, p int) bool { return a != 2 && a != 3 && a != 6 },
		"ring-tree-simple": func(a, p int) bool { return (a == 0 || a == 1) && p == 2 },
		"no-ll128":         func(a, p int) bool { return p != 1 },
		"none":             func(a, p int) bool { return false },
	}
}

func maskOf(usable func(a, p int) bool) plantable.Mask {
	var m plantable.Mask
	for a := range plantable.MaxAlgos {
		for p := range plantable.MaxProtos {
			if usable(a, p) {
				m |= 1 << (a*plantable.MaxProtos + p)
			}
		}
	}
	return m
}

// sizes are every bucket's boundaries (2^b-1, 2^b, 2^b+1) up to past the
// last bucket, and the largest size_t.
func sizes() []uint64 {
	s := []uint64{0, 1, math.MaxUint64}
	for b := 1; b <= planread.MaxLog2Bytes+2; b++ {
		s = append(s, 1<<b-1, 1<<b, 1<<b+1)
	}
	return s
}

// TestAgreesWithPlugin renders plans and checks that the example, reading
// the file, forces what GIN's plugin forces (plantable.Decide and
// Resolve, its C walk in Go) for every collective, shape and size at each
// bucket boundary, under several cost tables, except where the file says
// it cannot: after a choice that leaves it to NCCL, the example leaves it
// to NCCL where the plugin would try the next choice.
func TestAgreesWithPlugin(t *testing.T) {
	for name, p := range map[string]*ginv1.Plan{"mixed": mixedPlan(), "rotating": rotatingPlan()} {
		t.Run(name, func(t *testing.T) {
			if err := planread.Verify(p); err != nil {
				t.Fatal(err)
			}
			b, err := Render(p, Options{Generator: "ginctl test"})
			if err != nil {
				t.Fatal(err)
			}
			rows := readExample(t, b)
			shapes := map[[2]int]bool{{3, 1}: true} // and one the plan does not have
			for _, r := range p.GetRules() {
				shapes[[2]int{int(r.GetNRanks()), int(r.GetNNodes())}] = true
			}
			var checked, forced, truncated int
			for mname, usable := range masks() {
				m := maskOf(usable)
				for _, numAlgo := range []int{7, 6} { // 6: NCCL ≤ 2.22, no PAT
					for sh := range shapes {
						for coll := range plantable.NumColls {
							for _, n := range sizes() {
								cell := plantable.Decide(p, coll, uint32(sh[0]), uint32(sh[1]), n)
								want := cell.Resolve(m, numAlgo, plantable.MaxProtos, 0)
								// The first choice that leaves it to NCCL: the file stops there.
								stop := int(cell.N)
								for i := range int(cell.N) {
									if c := cell.Choices[i]; c.Algo < 0 || c.Flags&plantable.FlagIfOffered != 0 {
										stop = i
										break
									}
								}
								got, ok := exResolve(rows, coll, n, sh[1], sh[0], numAlgo, plantable.MaxProtos, usable)
								where := fmt.Sprintf("%s numAlgo %d: coll %d, %d ranks/%d nodes, %d bytes: plugin %+v", mname, numAlgo, coll, sh[0], sh[1], n, want)
								checked++
								switch {
								case want.Algo < 0 || want.Index > stop:
									if want.Index > stop {
										truncated++
									}
									if ok {
										t.Fatalf("%s; example forces %+v, want NCCL's choice", where, got)
									}
								case !ok:
									t.Fatalf("%s; example leaves it to NCCL", where)
								default:
									forced++
									wantCh := int64(want.Channels)
									if wantCh == 0 {
										wantCh = -1
									}
									if got.algo != want.Algo || got.proto != want.Proto || got.channels != wantCh {
										t.Fatalf("%s; example forces %+v", where, got)
									}
								}
							}
						}
					}
				}
			}
			if forced == 0 || truncated == 0 {
				t.Fatalf("%d cases, %d forced, %d past a choice that leaves it to NCCL: the plan does not exercise both", checked, forced, truncated)
			}
			t.Logf("%d rows, %d cases, %d forced, %d past a choice that leaves it to NCCL", len(rows), checked, forced, truncated)
		})
	}
}

func TestByteRange(t *testing.T) {
	for _, c := range []struct {
		lo, hi   uint32
		min, max uint64
	}{
		{0, 0, 0, 1},
		{0, 9, 0, 1023},
		{1, 1, 2, 3},
		{10, 19, 1024, 1<<20 - 1},
		{30, 33, 1 << 30, 16<<30 - 1},
		{34, 34, 16 << 30, 32<<30 - 1}, // 16 GiB itself
		{39, 39, 1 << 39, 1<<40 - 1},
		{35, 40, 32 << 30, math.MaxUint64},
	} {
		lo, hi := ByteRange(c.lo, c.hi)
		if lo != c.min || hi != c.max {
			t.Errorf("ByteRange(%d, %d) = %d..%d, want %d..%d", c.lo, c.hi, lo, hi, c.min, c.max)
		}
		// Every size in the range is in the rule's buckets, as the plugin buckets it.
		for _, n := range []uint64{lo, hi} {
			if b := planread.Bucket(n); b < c.lo || b > c.hi {
				t.Errorf("ByteRange(%d, %d): %d bytes is in bucket %d", c.lo, c.hi, n, b)
			}
		}
		if lo > 0 && planread.Bucket(lo-1) >= c.lo {
			t.Errorf("ByteRange(%d, %d): %d bytes is in bucket %d, not below", c.lo, c.hi, lo-1, planread.Bucket(lo-1))
		}
		if hi < math.MaxUint64 && planread.Bucket(hi+1) <= c.hi {
			t.Errorf("ByteRange(%d, %d): %d bytes is in bucket %d, not above", c.lo, c.hi, hi+1, planread.Bucket(hi+1))
		}
	}
}

// TestRows checks the exact rows of small plans.
func TestRows(t *testing.T) {
	ar := ginv1.Collective_COLLECTIVE_ALL_REDUCE
	for _, c := range []struct {
		name string
		rule *ginv1.PlanRule
		want []string
	}{
		{"one cell", withCell(rule(ar, 16, 2, 0, 9), tree, ll, 0), []string{"allreduce,0,1023,tree,ll,-1,2,16,-1,-1"}},
		{"channels", withCell(rule(ar, 16, 2, 34, 34), ring, simple, 8), []string{"allreduce,17179869184,34359738367,ring,simple,8,2,16,-1,-1"}},
		{"choices in order", withChoices(rule(ar, 8, 1, 20, 40), choice(nvls, simple, 0), choice(ring, ll128, 4)),
			[]string{"allreduce,1048576,18446744073709551615,nvls,simple,-1,1,8,-1,-1", "allreduce,1048576,18446744073709551615,ring,ll128,4,1,8,-1,-1"}},
		{"stops at NCCL", withChoices(rule(ar, 8, 1, 0, 40), choice(pat, simple, 0), ifOffered(nvls, noProt), choice(tree, simple, 0)),
			[]string{"allreduce,0,18446744073709551615,pat,simple,-1,1,8,-1,-1"}},
		{"conditional first", withChoices(rule(ar, 8, 1, 0, 40), ifOffered(nvls, noProt), choice(tree, simple, 0)), nil},
		{"left to NCCL", rule(ar, 8, 1, 0, 40), nil},
		{"NCCL with channels", withCell(rule(ar, 8, 1, 0, 40), noAlgo, noProt, 4), nil},
		{"legacy without protocol", withCell(rule(ar, 8, 1, 0, 40), tree, noProt, 0), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := Render(finish(&ginv1.Plan{JobId: "1", Rules: []*ginv1.PlanRule{c.rule}}), Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			comments := 0
			for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
				if strings.HasPrefix(l, "#") {
					comments++
					continue
				}
				got = append(got, l)
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Fatalf("rows:\n%s\nwant:\n%s\nfile:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"), b)
			}
			if !strings.Contains(string(b), "# rule 0: allreduce") {
				t.Fatalf("no comment naming the rule:\n%s", b)
			}
		})
	}
}

func TestHeader(t *testing.T) {
	p := mixedPlan()
	b, err := Render(p, Options{Generator: "ginctl v9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# written by ginctl v9.9.9", "job 42, plan hash " + p.GetContentHash(), "2 nodes x 8 GPUs", "nodes: node001,node002",
		"# " + Columns, "# rule 3 choice 1: ALGORITHM_RING/PROTOCOL_SIMPLE by test", "not written: 2 channels with NCCL's choice", "# rule 5: allgather 16 ranks/2 nodes 0-∞ left to NCCL (nccl), no row: test rule",
		"measured on NCCL 2.27.3..2.27.5", "not written: tree/simple"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no %q in\n%s", want, b)
		}
	}
	if !strings.HasPrefix(string(b), "#") {
		t.Error("does not start with a comment")
	}
}

func TestUnnamable(t *testing.T) {
	ar := ginv1.Collective_COLLECTIVE_ALL_REDUCE
	for name, r := range map[string]*ginv1.PlanRule{
		"collective unspecified":  withCell(rule(ginv1.Collective_COLLECTIVE_UNSPECIFIED, 8, 1, 0, 40), ring, simple, 0),
		"collective unknown":      withCell(rule(ginv1.Collective(6), 8, 1, 0, 40), ring, simple, 0),
		"algorithm unknown":       withCell(rule(ar, 8, 1, 0, 40), ginv1.Algorithm(8), simple, 0),
		"protocol unknown":        withCell(rule(ar, 8, 1, 0, 40), ring, ginv1.Protocol(4), 0),
		"choice algorithm":        withChoices(rule(ar, 8, 1, 0, 40), choice(ginv1.Algorithm(99), simple, 0)),
		"choice protocol":         withChoices(rule(ar, 8, 1, 0, 40), choice(ring, ginv1.Protocol(-1), 0)),
		"unwritten choice":        withChoices(rule(ar, 8, 1, 0, 40), choice(ring, simple, 0), &ginv1.PlanChoice{Basis: "nccl"}, choice(ginv1.Algorithm(8), simple, 0)),
		"left rule, bad protocol": withCell(rule(ar, 8, 1, 0, 40), noAlgo, ginv1.Protocol(7), 0),
		"forces without protocol": withChoices(rule(ar, 8, 1, 0, 40), choice(tree, noProt, 0)),
		"buckets past the last":   withCell(rule(ar, 8, 1, 0, 41), ring, simple, 0),
		"too many choices":        withChoices(rule(ar, 8, 1, 0, 40), choice(ring, simple, 0), choice(ring, ll, 0), choice(ring, ll128, 0), choice(tree, ll, 0), choice(tree, simple, 0)),
	} {
		t.Run(name, func(t *testing.T) {
			b, err := Render(finish(&ginv1.Plan{JobId: "1", Rules: []*ginv1.PlanRule{withCell(rule(ar, 16, 2, 0, 40), tree, simple, 0), r}}), Options{})
			if err == nil {
				t.Fatalf("no error; wrote\n%s", b)
			}
			if b != nil {
				t.Fatalf("wrote %d bytes with the error %v", len(b), err)
			}
		})
	}
	overlap := finish(&ginv1.Plan{Rules: []*ginv1.PlanRule{withCell(rule(ar, 8, 1, 0, 10), ring, simple, 0), withCell(rule(ar, 8, 1, 10, 20), tree, simple, 0)}})
	if _, err := Render(overlap, Options{}); err == nil {
		t.Error("overlapping rules: no error")
	}
	if _, err := Render(nil, Options{}); err == nil {
		t.Error("nil plan: no error")
	}
}

// TestLines: every line fits the example's 256-byte buffer with its
// newline and is valid UTF-8 even when the job, nodes, reasons and
// evidence are long, multi-byte or hold newlines.
func TestLines(t *testing.T) {
	p := mixedPlan()
	for i := range 3000 {
		p.Nodes = append(p.Nodes, fmt.Sprintf("rack%02d-node%04d", i/64, i))
	}
	p.JobId = strings.Repeat("j", 300)
	for i, r := range p.Rules {
		r.Reason = strings.Repeat("µ", 100+i) + "\nallreduce,0,100,ring,simple,-1,-1,-1"
		for _, c := range r.Choices {
			c.Evidence = strings.Repeat("é, ", 200)
		}
	}
	b, err := Render(finish(p), Options{Generator: strings.Repeat("g", 400)})
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(b) {
		t.Error("not valid UTF-8")
	}
	for n, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if len(l) > MaxLine {
			t.Errorf("line %d: %d bytes: %q", n+1, len(l), l)
		}
		if !strings.HasPrefix(l, "#") && strings.Count(l, ",") != 9 {
			t.Errorf("line %d: not a comment and not a 10-field row: %q", n+1, l)
		}
	}
	// The reasons' newlines did not become rows.
	plain, err := Render(mixedPlan(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(readExample(t, b)), len(readExample(t, plain)); got != want {
		t.Errorf("%d rows with long comments, %d without", got, want)
	}
}

func TestDeterministic(t *testing.T) {
	for _, p := range []*ginv1.Plan{mixedPlan(), rotatingPlan()} {
		a, err := Render(p, Options{Generator: "ginctl x"})
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			c := proto.Clone(p).(*ginv1.Plan)
			b, err := Render(c, Options{Generator: "ginctl x"})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Fatalf("two renders differ:\n%s\n---\n%s", a, b)
			}
		}
	}
}
