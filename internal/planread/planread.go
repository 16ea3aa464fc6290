package planread

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"strings"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// FormatVersion is the plan format this package writes.
const FormatVersion = 1

// MaxLog2Bytes is the last size bucket: buckets are floor(log2(nBytes)),
// 0 for nBytes ≤ 1, clamped to MaxLog2Bytes above.
const MaxLog2Bytes = 40

// Hash is the hex SHA-256 of the deterministic encoding of p without
// content_hash, created_index, created_at and expires_at.
func Hash(p *ginv1.Plan) string {
	c := proto.Clone(p).(*ginv1.Plan)
	c.ContentHash, c.CreatedIndex, c.CreatedAt, c.ExpiresAt = "", 0, nil, nil
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Verify checks a plan's format, its content hash and that its rules do
// not overlap.
func Verify(p *ginv1.Plan) error {
	if p == nil {
		return errors.New("plan: nil")
	}
	if p.FormatVersion != FormatVersion {
		return fmt.Errorf("plan: format_version %d, want %d", p.FormatVersion, FormatVersion)
	}
	if h := Hash(p); h != p.ContentHash {
		return fmt.Errorf("plan: content_hash %q does not match the content (%s)", p.ContentHash, h)
	}
	type key struct {
		coll   ginv1.Collective
		rk, nd uint32
	}
	used := map[key]uint64{} // bucket bitmap
	for i, r := range p.Rules {
		if r.MinLog2Bytes > r.MaxLog2Bytes || r.MaxLog2Bytes > MaxLog2Bytes {
			return fmt.Errorf("plan: rules[%d]: buckets %d..%d", i, r.MinLog2Bytes, r.MaxLog2Bytes)
		}
		if err := verifyChoices(r.GetChoices()); err != nil {
			return fmt.Errorf("plan: rules[%d]: %w", i, err)
		}
		k := key{r.Collective, r.NRanks, r.NNodes}
		m := (uint64(1)<<(r.MaxLog2Bytes+1) - 1) &^ (uint64(1)<<r.MinLog2Bytes - 1)
		if used[k]&m != 0 {
			return fmt.Errorf("plan: rules[%d] overlaps an earlier rule", i)
		}
		used[k] |= m
	}
	return nil
}

// MaxChoices bounds a rule's ordered choices.
const MaxChoices = 4

// verifyChoices checks a rule's choices: at most MaxChoices, algorithms
// and protocols NCCL names, a forcing choice with its protocol, and a
// version range that is none or ordered.
func verifyChoices(cs []*ginv1.PlanChoice) error {
	if len(cs) > MaxChoices {
		return fmt.Errorf("%d choices, more than %d", len(cs), MaxChoices)
	}
	for j, c := range cs {
		a, p := c.GetAlgorithm(), c.GetProtocol()
		switch {
		case a < 0 || a > ginv1.Algorithm_ALGORITHM_PAT || p < 0 || p > ginv1.Protocol_PROTOCOL_SIMPLE:
			return fmt.Errorf("choices[%d]: algorithm %d, protocol %d out of range", j, a, p)
		case a == ginv1.Algorithm_ALGORITHM_UNSPECIFIED && (p != 0 || c.GetNcclIfOffered()):
			return fmt.Errorf("choices[%d]: NCCL's choice names a protocol or a condition", j)
		case a != ginv1.Algorithm_ALGORITHM_UNSPECIFIED && p == 0 && !c.GetNcclIfOffered():
			return fmt.Errorf("choices[%d]: forces %v without a protocol", j, a)
		case (c.GetMinNcclVersion() == 0) != (c.GetMaxNcclVersion() == 0) || c.GetMinNcclVersion() > c.GetMaxNcclVersion():
			return fmt.Errorf("choices[%d]: NCCL versions %d..%d", j, c.GetMinNcclVersion(), c.GetMaxNcclVersion())
		}
	}
	return nil
}

// ChoiceName names one choice as one token: "tree/simple" (forced, "×8ch"
// with channels), "nccl" (NCCL's choice), "nccl(nvls_tree)" (NCCL's choice
// when it offers nvls_tree).
func ChoiceName(c *ginv1.PlanChoice) string {
	a := c.GetAlgorithm()
	var s string
	switch {
	case a == ginv1.Algorithm_ALGORITHM_UNSPECIFIED:
		s = "nccl"
	case c.GetNcclIfOffered() && c.GetProtocol() == ginv1.Protocol_PROTOCOL_UNSPECIFIED:
		s = "nccl(" + strings.ToLower(strings.TrimPrefix(a.String(), "ALGORITHM_")) + ")"
	case c.GetNcclIfOffered():
		s = "nccl(" + CellName(a, c.GetProtocol()) + ")"
	default:
		s = CellName(a, c.GetProtocol())
	}
	if c.GetChannels() > 0 {
		s += fmt.Sprintf("×%dch", c.GetChannels())
	}
	return s
}

// Choices names a rule's ordered choices as one token, comma-separated
// ("nccl(nvls_tree),tree/simple"), or for a rule without choices its one
// cell ("ring/simple", "nccl"): what the plugin tries in order before
// leaving the choice to NCCL.
func Choices(r *ginv1.PlanRule) string {
	if len(r.GetChoices()) == 0 {
		if r.GetAlgorithm() == ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
			return "nccl"
		}
		s := CellName(r.GetAlgorithm(), r.GetProtocol())
		if r.GetChannels() > 0 {
			s += fmt.Sprintf("×%dch", r.GetChannels())
		}
		return s
	}
	names := make([]string, len(r.GetChoices()))
	for i, c := range r.GetChoices() {
		names[i] = ChoiceName(c)
	}
	return strings.Join(names, ",")
}

// VersionName writes an NCCL_VERSION_CODE as "2.27.3"; "" for 0.
func VersionName(code uint32) string {
	if code == 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d.%d", code/10000, code/100%100, code%100)
}

// ParseVersion reads "2.27.3" (or "2.27.3-1", "2.27.3+cuda12.9") as an
// NCCL_VERSION_CODE (22703); 0 when s is not such a version.
func ParseVersion(s string) uint32 {
	var maj, mnr, pat uint32
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "-+ "); i >= 0 {
		s = s[:i]
	}
	if n, err := fmt.Sscanf(s, "%d.%d.%d", &maj, &mnr, &pat); err != nil || n != 3 || maj == 0 || maj > 9 || mnr > 99 || pat > 99 {
		return 0
	}
	if fmt.Sprintf("%d.%d.%d", maj, mnr, pat) != s {
		return 0
	}
	return maj*10000 + mnr*100 + pat
}

// Bucket is the size bucket of nBytes: floor(log2(nBytes)), 0 for
// nBytes ≤ 1, clamped to MaxLog2Bytes.
func Bucket(nBytes uint64) uint32 {
	if nBytes <= 1 {
		return 0
	}
	return uint32(min(63-bits.LeadingZeros64(nBytes), MaxLog2Bytes))
}

// Lookup finds the rule for a collective on a communicator of nRanks over
// nNodes and nBytes, as the plugin does; ok is false when the plan has no
// rule for it.
func Lookup(p *ginv1.Plan, coll ginv1.Collective, nRanks, nNodes int, nBytes uint64) (*ginv1.PlanRule, bool) {
	if p == nil || nRanks < 0 || nNodes < 0 {
		return nil, false
	}
	b := Bucket(nBytes)
	for _, r := range p.Rules {
		if r.Collective == coll && int(r.NRanks) == nRanks && int(r.NNodes) == nNodes &&
			r.MinLog2Bytes <= b && b <= r.MaxLog2Bytes {
			return r, true
		}
	}
	return nil, false
}

// Explain describes a plan for humans (`ginctl plan`): a summary line, a
// column header, then one line per rule with the predicted (or measured)
// time at the start of its size range.
func Explain(p *ginv1.Plan) []string {
	if p == nil {
		return nil
	}
	lines := []string{
		fmt.Sprintf("plan for job %s: %d nodes × %d GPUs, model %s, hash %.12s", p.JobId, len(p.Nodes), p.GpusPerNode, p.ModelVersion, p.ContentHash),
		fmt.Sprintf("%-14s %-22s  %-10s %-16s %13s  %s", "COLLECTIVE", "RANKS/NODES", "SIZES", "CHOICES", "TIME AT START", "WHY"),
	}
	overrides := 0
	for _, r := range p.Rules {
		choice := Choices(r)
		if Overrides(r) {
			overrides++
		}
		coll := strings.ToLower(strings.TrimPrefix(r.Collective.String(), "COLLECTIVE_"))
		lines = append(lines, fmt.Sprintf("%-14s %5d ranks/%-4d nodes  %-10s %-16s %10.1f µs  %s",
			coll, r.NRanks, r.NNodes, SizeRange(r.MinLog2Bytes, r.MaxLog2Bytes), choice, r.PredictedUs, r.Reason))
	}
	lines[0] += fmt.Sprintf(", %d rules, %d override NCCL", len(p.Rules), overrides)
	return lines
}

// Overrides says whether a rule may override NCCL: its one cell forces
// an algorithm, or one of its choices does.
func Overrides(r *ginv1.PlanRule) bool {
	if r.GetAlgorithm() != ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
		return true
	}
	for _, c := range r.GetChoices() {
		if c.GetAlgorithm() != ginv1.Algorithm_ALGORITHM_UNSPECIFIED && !c.GetNcclIfOffered() {
			return true
		}
	}
	return false
}

// SizeRange names a rule's size range [2^lo, 2^(hi+1)) as "512K-8M",
// "0-512K" or "8M-∞".
func SizeRange(lo, hi uint32) string {
	end := humanBytes(hi + 1)
	if hi == MaxLog2Bytes {
		end = "∞"
	}
	if lo == 0 {
		return "0-" + end
	}
	return humanBytes(lo) + "-" + end
}

func humanBytes(l uint32) string {
	switch {
	case l >= 40:
		return fmt.Sprintf("%dT", uint64(1)<<(l-40))
	case l >= 30:
		return fmt.Sprintf("%dG", uint64(1)<<(l-30))
	case l >= 20:
		return fmt.Sprintf("%dM", uint64(1)<<(l-20))
	case l >= 10:
		return fmt.Sprintf("%dK", uint64(1)<<(l-10))
	}
	return fmt.Sprintf("%dB", uint64(1)<<l)
}

// CellName names an (algorithm, protocol) cell as "ring/simple".
func CellName(a ginv1.Algorithm, p ginv1.Protocol) string {
	an := strings.ToLower(strings.TrimPrefix(a.String(), "ALGORITHM_"))
	pn := strings.ToLower(strings.TrimPrefix(p.String(), "PROTOCOL_"))
	return an + "/" + pn
}

// MaxBytes bounds an encoded plan read from a file, a socket or a master.
// The largest plan the master builds (a 1,024-node job) is far below it.
const MaxBytes = 8 << 20

// MaxRules bounds the rules of a plan a reader accepts.
const MaxRules = 65536

// Decode parses an encoded plan and verifies it (format, content hash,
// rules). Anything longer than MaxBytes or with more than MaxRules rules
// is refused before it costs more than its own bytes.
func Decode(b []byte) (*ginv1.Plan, error) {
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("plan: %d bytes, more than the %d-byte limit", len(b), MaxBytes)
	}
	p := &ginv1.Plan{}
	if err := proto.Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("plan: cannot decode %d bytes (garbage or truncated): %w", len(b), err)
	}
	if n := len(p.GetRules()); n > MaxRules {
		return nil, fmt.Errorf("plan: %d rules, more than the limit of %d", n, MaxRules)
	}
	if err := Verify(p); err != nil {
		return nil, err
	}
	return p, nil
}
