package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"strings"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/costmodel"
	"github.com/gin-topology/gin/internal/graph"
)

// FormatVersion is the plan format this package writes.
const FormatVersion = 1

// MaxLog2Bytes is the last size bucket: buckets are floor(log2(nBytes)),
// 0 for nBytes ≤ 1, clamped to MaxLog2Bytes above.
const MaxLog2Bytes = 40

// OverrideMargin is how much faster (relative) GIN's choice must be, in
// GIN's model, than NCCL's own choice before the plan overrides NCCL.
const OverrideMargin = 0.03

// Collectives are the collectives NCCL consults the tuner for, in order.
var Collectives = []ginv1.Collective{
	ginv1.Collective_COLLECTIVE_BROADCAST, ginv1.Collective_COLLECTIVE_REDUCE,
	ginv1.Collective_COLLECTIVE_ALL_GATHER, ginv1.Collective_COLLECTIVE_REDUCE_SCATTER,
	ginv1.Collective_COLLECTIVE_ALL_REDUCE,
}

// comm is one communicator shape a job uses.
type comm struct {
	shape costmodel.Shape
	what  string
}

// Build computes the plan of a job running gpusPerNode GPUs (0: all) on
// each of nodes, in the order given.
func Build(g *graph.Graph, jobID string, nodes []string, gpusPerNode int) (*ginv1.Plan, error) {
	if jobID == "" {
		return nil, errors.New("plan: empty job id")
	}
	if g == nil {
		return nil, errors.New("plan: nil graph")
	}
	if len(nodes) == 0 {
		return nil, errors.New("plan: no nodes")
	}
	world, err := costmodel.ShapeOf(g, nodes, gpusPerNode)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	ppn := world.NRanks / world.NNodes
	comms := []comm{{world, "world"}}
	if ppn > 1 && world.NNodes > 1 {
		one := world
		one.NRanks, one.NNodes, one.MNNVL = ppn, 1, false
		one.NICsPerNode, one.NICGbps, one.InterHops, one.Oversubscription, one.Ethernet = 0, 0, 0, 0, false
		comms = append(comms, comm{one, "one node"})
	}
	if world.NNodes > 1 && ppn > 1 {
		per, err := costmodel.ShapeOf(g, nodes, 1)
		if err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		comms = append(comms, comm{per, "one GPU per node"})
	}
	p := &ginv1.Plan{
		FormatVersion: FormatVersion,
		JobId:         jobID,
		Nodes:         append([]string(nil), nodes...),
		GpusPerNode:   uint32(ppn),
		ModelVersion:  costmodel.ModelVersion,
	}
	for _, c := range comms {
		for _, coll := range Collectives {
			rules, err := rulesFor(c, coll)
			if err != nil {
				return nil, fmt.Errorf("plan: %s (%d ranks over %d nodes): %w", c.what, c.shape.NRanks, c.shape.NNodes, err)
			}
			p.Rules = append(p.Rules, rules...)
		}
	}
	p.ContentHash = Hash(p)
	return p, nil
}

// decision is one bucket's outcome.
type decision struct {
	algo     ginv1.Algorithm
	proto    ginv1.Protocol
	channels uint32
	us       float64
	reason   string
}

func (d decision) same(o decision) bool {
	return d.algo == o.algo && d.proto == o.proto && d.channels == o.channels
}

// rulesFor computes the rules of one shape and collective, merging
// adjacent buckets with the same decision.
func rulesFor(c comm, coll ginv1.Collective) ([]*ginv1.PlanRule, error) {
	var rules []*ginv1.PlanRule
	var prev decision
	for b := 0; b <= MaxLog2Bytes; b++ {
		d, err := decide(c.shape, coll, uint64(1)<<b)
		if err != nil {
			return nil, err
		}
		if len(rules) > 0 && d.same(prev) {
			rules[len(rules)-1].MaxLog2Bytes = uint32(b)
			continue
		}
		prev = d
		rules = append(rules, &ginv1.PlanRule{
			Collective: coll, NRanks: uint32(c.shape.NRanks), NNodes: uint32(c.shape.NNodes),
			MinLog2Bytes: uint32(b), MaxLog2Bytes: uint32(b),
			Algorithm: d.algo, Protocol: d.proto, Channels: d.channels,
			PredictedUs: round3(d.us), Reason: d.reason,
		})
	}
	return rules, nil
}

// decide compares GIN's choice with NCCL's for one bucket.
func decide(s costmodel.Shape, coll ginv1.Collective, bytes uint64) (decision, error) {
	gin, err := costmodel.Predict(s, coll, bytes)
	if err != nil {
		return decision{}, err
	}
	nccl, err := costmodel.PredictNCCL(s, coll, bytes)
	if err != nil {
		return decision{}, err
	}
	if gin.Algorithm == nccl.Algorithm && gin.Protocol == nccl.Protocol {
		return decision{us: gin.TimeUs, reason: "leave it to NCCL: its model picks the same (" + cellName(gin.Algorithm, gin.Protocol) + ")"}, nil
	}
	// NCCL's choice as GIN's model sees it.
	ncclUs, ok := costmodel.Cost(s, coll, nccl.Algorithm, nccl.Protocol, bytes)
	if ok && gin.TimeUs >= ncclUs*(1-OverrideMargin) {
		return decision{us: ncclUs, reason: fmt.Sprintf("leave it to NCCL: %s is within %d%% of NCCL's %s",
			cellName(gin.Algorithm, gin.Protocol), int(OverrideMargin*100), cellName(nccl.Algorithm, nccl.Protocol))}, nil
	}
	why := "GIN's model"
	if ok {
		why = fmt.Sprintf("%.0f%% faster than NCCL's %s", 100*(1-gin.TimeUs/ncclUs), cellName(nccl.Algorithm, nccl.Protocol))
	}
	return decision{algo: gin.Algorithm, proto: gin.Protocol, us: gin.TimeUs,
		reason: cellName(gin.Algorithm, gin.Protocol) + ": " + why + factors(s, gin.Algorithm)}, nil
}

// factors names what GIN knows that NCCL's model does not.
func factors(s costmodel.Shape, a ginv1.Algorithm) string {
	var f []string
	if s.NNodes == 2 && a == ginv1.Algorithm_ALGORITHM_TREE {
		f = append(f, "2 nodes: tree halves the inter-node bytes")
	}
	if s.InterHops > 1 && s.Oversubscription > 1 {
		f = append(f, fmt.Sprintf("spine oversubscription %g:1", s.Oversubscription))
	}
	if s.InterHops > 1 {
		f = append(f, fmt.Sprintf("%d switch hops", s.InterHops))
	}
	if s.Ethernet {
		f = append(f, "RoCE latency")
	}
	if s.NNodes > 1 && s.CompCap < 90 && s.IntraNVLink {
		f = append(f, "measured NVLink LL step latency")
	}
	if len(f) == 0 {
		return ""
	}
	return " (" + strings.Join(f, "; ") + ")"
}

func cellName(a ginv1.Algorithm, p ginv1.Protocol) string {
	an := strings.ToLower(strings.TrimPrefix(a.String(), "ALGORITHM_"))
	pn := strings.ToLower(strings.TrimPrefix(p.String(), "PROTOCOL_"))
	return an + "/" + pn
}

// round3 keeps predicted times to ns so that the plan does not carry
// float noise.
func round3(v float64) float64 {
	return float64(int64(v*1000+0.5)) / 1000
}

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
		k := key{r.Collective, r.NRanks, r.NNodes}
		m := (uint64(1)<<(r.MaxLog2Bytes+1) - 1) &^ (uint64(1)<<r.MinLog2Bytes - 1)
		if used[k]&m != 0 {
			return fmt.Errorf("plan: rules[%d] overlaps an earlier rule", i)
		}
		used[k] |= m
	}
	return nil
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

// Explain describes a plan for humans (`ginctl plan`), one line per rule
// after a header.
func Explain(p *ginv1.Plan) []string {
	if p == nil {
		return nil
	}
	lines := []string{
		fmt.Sprintf("plan for job %s: %d nodes × %d GPUs, model %s, hash %.12s", p.JobId, len(p.Nodes), p.GpusPerNode, p.ModelVersion, p.ContentHash),
	}
	overrides := 0
	for _, r := range p.Rules {
		choice := "NCCL"
		if r.Algorithm != ginv1.Algorithm_ALGORITHM_UNSPECIFIED {
			choice = cellName(r.Algorithm, r.Protocol)
			overrides++
			if r.Channels > 0 {
				choice += fmt.Sprintf(" ×%d ch", r.Channels)
			}
		}
		coll := strings.ToLower(strings.TrimPrefix(r.Collective.String(), "COLLECTIVE_"))
		lines = append(lines, fmt.Sprintf("%-14s %5d ranks/%-4d nodes  %-10s %-16s %10.1f µs  %s",
			coll, r.NRanks, r.NNodes, sizeRange(r.MinLog2Bytes, r.MaxLog2Bytes), choice, r.PredictedUs, r.Reason))
	}
	lines[0] += fmt.Sprintf(", %d rules, %d override NCCL", len(p.Rules), overrides)
	return lines
}

func sizeRange(lo, hi uint32) string {
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
