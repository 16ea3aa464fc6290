package tunercsv

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/planread"
)

// MaxLine is the longest line Render writes, without its newline. The
// example reads its file with fgets into a 256-byte buffer: a longer line
// would be split and its tail read as a line of its own.
const MaxLine = 255

// Columns is the example's column order, as written in the header.
const Columns = "collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff"

// Options are what Render writes beyond the plan.
type Options struct {
	// Generator names the program that wrote the file, with its version
	// ("ginctl v1.4.0"), in the header; empty leaves it out.
	Generator string
}

// CollectiveName is the example's name of a collective; ok is false for
// one it cannot name.
func CollectiveName(c ginv1.Collective) (string, bool) {
	switch c {
	case ginv1.Collective_COLLECTIVE_BROADCAST:
		return "broadcast", true
	case ginv1.Collective_COLLECTIVE_REDUCE:
		return "reduce", true
	case ginv1.Collective_COLLECTIVE_ALL_GATHER:
		return "allgather", true
	case ginv1.Collective_COLLECTIVE_REDUCE_SCATTER:
		return "reducescatter", true
	case ginv1.Collective_COLLECTIVE_ALL_REDUCE:
		return "allreduce", true
	}
	return "", false
}

// AlgorithmName is the example's name of an algorithm; ok is false for
// one it cannot name (UNSPECIFIED included).
func AlgorithmName(a ginv1.Algorithm) (string, bool) {
	switch a {
	case ginv1.Algorithm_ALGORITHM_TREE:
		return "tree", true
	case ginv1.Algorithm_ALGORITHM_RING:
		return "ring", true
	case ginv1.Algorithm_ALGORITHM_COLLNET_DIRECT:
		return "collnet_direct", true
	case ginv1.Algorithm_ALGORITHM_COLLNET_CHAIN:
		return "collnet_chain", true
	case ginv1.Algorithm_ALGORITHM_NVLS:
		return "nvls", true
	case ginv1.Algorithm_ALGORITHM_NVLS_TREE:
		return "nvls_tree", true
	case ginv1.Algorithm_ALGORITHM_PAT:
		return "pat", true
	}
	return "", false
}

// ProtocolName is the example's name of a protocol; ok is false for one
// it cannot name (UNSPECIFIED included).
func ProtocolName(p ginv1.Protocol) (string, bool) {
	switch p {
	case ginv1.Protocol_PROTOCOL_LL:
		return "ll", true
	case ginv1.Protocol_PROTOCOL_LL128:
		return "ll128", true
	case ginv1.Protocol_PROTOCOL_SIMPLE:
		return "simple", true
	}
	return "", false
}

// ByteRange is the inclusive byte range of log2 buckets lo..hi as the
// plugin reads them (planread.Bucket): bucket 0 holds 0 and 1 byte, the
// last bucket (planread.MaxLog2Bytes) every larger size.
func ByteRange(lo, hi uint32) (minBytes, maxBytes uint64) {
	if lo > 0 {
		minBytes = 1 << lo
	}
	maxBytes = math.MaxUint64
	if hi < planread.MaxLog2Bytes {
		maxBytes = 1<<(hi+1) - 1
	}
	return minBytes, maxBytes
}

// Render writes the plan as the example tuner's CSV: a comment header,
// then per rule a comment line and a row per forcing choice, in
// preference order, up to its first choice that leaves it to NCCL. It
// fails, writing nothing, on a collective, algorithm or protocol the
// example cannot name, a choice that forces an algorithm without a
// protocol, and rules that overlap or name buckets past the last.
func Render(p *ginv1.Plan, o Options) ([]byte, error) {
	if p == nil {
		return nil, errors.New("tunercsv: no plan")
	}
	if err := check(p); err != nil {
		return nil, err
	}
	var w writer
	w.comment("NCCL example tuner config (plugins/tuner/example; NCCL_TUNER_PLUGIN=example, NCCL_TUNER_CONFIG_FILE=this file)")
	gen := "written by ginctl export nccl-tuner-csv"
	if o.Generator != "" {
		gen = "written by " + o.Generator + " (export nccl-tuner-csv)"
	}
	w.comment(gen)
	w.comment(fmt.Sprintf("job %s, plan hash %s, %d nodes x %d GPUs, model %s, %d rules",
		p.GetJobId(), p.GetContentHash(), len(p.GetNodes()), p.GetGpusPerNode(), p.GetModelVersion(), len(p.GetRules())))
	w.comment("nodes: " + strings.Join(p.GetNodes(), ","))
	w.comment("A rule's choices are consecutive rows in preference order: the example forces the first")
	w.comment("matching row whose cell NCCL offers. It has no row for \"leave it to NCCL\": rules that leave")
	w.comment("the choice to NCCL have no rows (NCCL decides), and a rule's rows stop at its first choice")
	w.comment("that leaves it to NCCL. Caution: the example sets nChannels=1 on every call unless the")
	w.comment("matched row sets channels (-1 and no match both give 1 channel); GIN's own plugin keeps NCCL's.")
	w.comment(Columns)
	for i, r := range p.GetRules() {
		if err := w.rule(i, r); err != nil {
			return nil, err
		}
	}
	return w.buf.Bytes(), nil
}

// check refuses what the example cannot be given: names it does not
// know, invalid choices, buckets past the last and overlapping rules
// (the example's first-match would then differ from the plugin's lookup).
func check(p *ginv1.Plan) error {
	type key struct {
		coll   ginv1.Collective
		rk, nd uint32
	}
	used := map[key]uint64{}
	for i, r := range p.GetRules() {
		if _, ok := CollectiveName(r.GetCollective()); !ok {
			return fmt.Errorf("tunercsv: rules[%d]: collective %v has no name in NCCL's example tuner", i, r.GetCollective())
		}
		if a := r.GetAlgorithm(); a != ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
			if _, ok := AlgorithmName(a); !ok {
				return fmt.Errorf("tunercsv: rules[%d]: algorithm %v has no name in NCCL's example tuner", i, a)
			}
		}
		if pr := r.GetProtocol(); pr != ginv1.Protocol_PROTOCOL_UNSPECIFIED {
			if _, ok := ProtocolName(pr); !ok {
				return fmt.Errorf("tunercsv: rules[%d]: protocol %v has no name in NCCL's example tuner", i, pr)
			}
		}
		if r.GetNRanks() > math.MaxInt32 || r.GetNNodes() > math.MaxInt32 {
			return fmt.Errorf("tunercsv: rules[%d]: %d ranks, %d nodes: more than the example reads", i, r.GetNRanks(), r.GetNNodes())
		}
		if r.GetMinLog2Bytes() > r.GetMaxLog2Bytes() || r.GetMaxLog2Bytes() > planread.MaxLog2Bytes {
			return fmt.Errorf("tunercsv: rules[%d]: buckets %d..%d", i, r.GetMinLog2Bytes(), r.GetMaxLog2Bytes())
		}
		if len(r.GetChoices()) > planread.MaxChoices {
			return fmt.Errorf("tunercsv: rules[%d]: %d choices, more than %d", i, len(r.GetChoices()), planread.MaxChoices)
		}
		for j, c := range r.GetChoices() {
			a, pr := c.GetAlgorithm(), c.GetProtocol()
			if _, ok := AlgorithmName(a); !ok && a != ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
				return fmt.Errorf("tunercsv: rules[%d].choices[%d]: algorithm %v has no name in NCCL's example tuner", i, j, a)
			}
			if _, ok := ProtocolName(pr); !ok && pr != ginv1.Protocol_PROTOCOL_UNSPECIFIED {
				return fmt.Errorf("tunercsv: rules[%d].choices[%d]: protocol %v has no name in NCCL's example tuner", i, j, pr)
			}
			switch {
			case a == ginv1.Algorithm_ALGORITHM_UNSPECIFIED && (pr != ginv1.Protocol_PROTOCOL_UNSPECIFIED || c.GetNcclIfOffered()):
				return fmt.Errorf("tunercsv: rules[%d].choices[%d]: NCCL's choice names a protocol or a condition", i, j)
			case a != ginv1.Algorithm_ALGORITHM_UNSPECIFIED && pr == ginv1.Protocol_PROTOCOL_UNSPECIFIED && !c.GetNcclIfOffered():
				return fmt.Errorf("tunercsv: rules[%d].choices[%d]: forces %v without a protocol", i, j, a)
			case c.GetChannels() > math.MaxInt16:
				return fmt.Errorf("tunercsv: rules[%d].choices[%d]: %d channels", i, j, c.GetChannels())
			}
		}
		if r.GetChannels() > math.MaxInt16 {
			return fmt.Errorf("tunercsv: rules[%d]: %d channels", i, r.GetChannels())
		}
		k := key{r.GetCollective(), r.GetNRanks(), r.GetNNodes()}
		m := (uint64(1)<<(r.GetMaxLog2Bytes()+1) - 1) &^ (uint64(1)<<r.GetMinLog2Bytes() - 1)
		if used[k]&m != 0 {
			return fmt.Errorf("tunercsv: rules[%d] overlaps an earlier rule", i)
		}
		used[k] |= m
	}
	return nil
}

type writer struct {
	buf bytes.Buffer
}

// comment writes "# s" on one line: control characters become spaces and
// a line longer than MaxLine is cut (at a character boundary) with "...".
func (w *writer) comment(s string) {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s)
	line := strings.TrimRight("# "+s, " ")
	if len(line) > MaxLine {
		cut := MaxLine - len("...")
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		line = line[:cut] + "..."
	}
	w.buf.WriteString(line)
	w.buf.WriteByte('\n')
}

// rule writes rule i: a comment naming it and its reason, then its rows.
func (w *writer) rule(i int, r *ginv1.PlanRule) error {
	coll, _ := CollectiveName(r.GetCollective())
	label := fmt.Sprintf("rule %d: %s %d ranks/%d nodes %s", i, coll, r.GetNRanks(), r.GetNNodes(), planread.SizeRange(r.GetMinLog2Bytes(), r.GetMaxLog2Bytes()))
	why := ""
	if r.GetReason() != "" {
		why = ": " + r.GetReason()
	}
	choices := r.GetChoices()
	if len(choices) == 0 {
		// A plan written before choices existed: the rule's one cell, as
		// plantable.CellOf reads it.
		one := &ginv1.PlanChoice{Algorithm: r.GetAlgorithm(), Protocol: r.GetProtocol(), Channels: r.GetChannels()}
		if r.GetProtocol() == ginv1.Protocol_PROTOCOL_UNSPECIFIED {
			one.Algorithm = ginv1.Algorithm_ALGORITHM_UNSPECIFIED
		}
		if one.GetAlgorithm() == ginv1.Algorithm_ALGORITHM_UNSPECIFIED && one.GetChannels() == 0 {
			w.comment(label + " left to NCCL (" + planread.Choices(r) + "), no row" + why)
			return nil
		}
		choices = []*ginv1.PlanChoice{one}
	}
	if !planread.Overrides(r) || choices[0].GetAlgorithm() == ginv1.Algorithm_ALGORITHM_UNSPECIFIED || choices[0].GetNcclIfOffered() {
		// Nothing to force before NCCL decides (Overrides can be true for
		// a rule whose forcing choice comes after a conditional one).
		w.comment(label + " left to NCCL (" + planread.Choices(r) + "), no row" + why)
		if c := choices[0]; c.GetAlgorithm() == ginv1.Algorithm_ALGORITHM_UNSPECIFIED && c.GetChannels() > 0 {
			w.comment(fmt.Sprintf("rule %d: not written: %d channels with NCCL's choice (the example sets channels only with a forced cell)", i, c.GetChannels()))
		}
		if len(choices) > 1 && planread.Overrides(r) {
			w.comment(fmt.Sprintf("rule %d: not written: %s, which GIN's plugin applies only when NCCL does not offer what %s names", i, choicesFrom(choices[1:]), planread.ChoiceName(choices[0])))
		}
		return nil
	}
	w.comment(label + " (" + planread.Choices(r) + ")" + why)
	minB, maxB := ByteRange(r.GetMinLog2Bytes(), r.GetMaxLog2Bytes())
	for j, c := range choices {
		if c.GetAlgorithm() == ginv1.Algorithm_ALGORITHM_UNSPECIFIED || c.GetNcclIfOffered() {
			w.comment(fmt.Sprintf("rule %d: then %s: no row (the example cannot leave it to NCCL); NCCL decides", i, planread.ChoiceName(c)))
			if rest := choices[j+1:]; len(rest) > 0 {
				w.comment(fmt.Sprintf("rule %d: not written: %s, which GIN's plugin applies only when NCCL does not offer what %s names", i, choicesFrom(rest), planread.ChoiceName(c)))
			}
			break
		}
		if ev := c.GetEvidence(); ev != "" {
			w.comment(fmt.Sprintf("rule %d choice %d: %s", i, j+1, ev))
		}
		if c.GetMinNcclVersion() != 0 {
			w.comment(fmt.Sprintf("rule %d choice %d: measured on NCCL %s..%s; GIN's plugin applies it on those release series only, the example on any",
				i, j+1, planread.VersionName(c.GetMinNcclVersion()), planread.VersionName(c.GetMaxNcclVersion())))
		}
		algo, ok := AlgorithmName(c.GetAlgorithm())
		proto, ok2 := ProtocolName(c.GetProtocol())
		if !ok || !ok2 {
			return fmt.Errorf("tunercsv: rules[%d]: %s has no name in NCCL's example tuner", i, planread.ChoiceName(c))
		}
		channels := "-1"
		if n := c.GetChannels(); n > 0 {
			channels = strconv.FormatUint(uint64(n), 10)
		}
		line := fmt.Sprintf("%s,%d,%d,%s,%s,%s,%d,%d,-1,-1", coll, minB, maxB, algo, proto, channels, r.GetNNodes(), r.GetNRanks())
		if len(line) > MaxLine {
			return fmt.Errorf("tunercsv: rules[%d]: row of %d bytes, more than %d", i, len(line), MaxLine)
		}
		w.buf.WriteString(line)
		w.buf.WriteByte('\n')
	}
	return nil
}

func choicesFrom(cs []*ginv1.PlanChoice) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = planread.ChoiceName(c)
	}
	return strings.Join(names, ",")
}
