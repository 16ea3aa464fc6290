package kubelabels

import (
	"errors"
	"fmt"
	"maps"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/export"
	"github.com/gin-topology/gin/internal/nodelabels"
	"github.com/gin-topology/gin/internal/state"
)

// Health gives the nodes' verdicts from the state at one index. It must be
// a pure function of v (every leader computes the same labels).
type Health interface {
	// Verdicts returns a verdict for some or all nodes of v; a node left
	// out passes.
	Verdicts(v state.View) map[string]nodelabels.Verdict
}

// StateHealth is the verdict from what the state records: a node GIN
// holds DOWN, or with an NVLink or compute port down, fails.
type StateHealth struct{}

// Verdicts implements Health.
func (StateHealth) Verdicts(v state.View) map[string]nodelabels.Verdict {
	out := map[string]nodelabels.Verdict{}
	for _, n := range v.NodeNames() {
		if h, ok := v.Head(n); ok && h.Record.GetState() == ginv1.NodeState_NODE_STATE_DOWN {
			out[n] = nodelabels.Fail
			continue
		}
		if v.Graph == nil {
			continue
		}
		if info, ok := v.Graph.NodeInfo(n); ok && (info.NVLinksUp < info.NVLinksTotal || info.ComputePortsUp < info.ComputePortsTotal) {
			out[n] = nodelabels.Fail
		}
	}
	return out
}

// placement is where one node sits, by the names the Slurm exports give.
type placement struct {
	leaf, spine, core   string
	block, nvlinkDomain string
}

// placements reads every node's placement off the exports' model: its
// leaf group and the switches above it, and its NVLink block.
func placements(t *export.Topology) map[string]placement {
	out := make(map[string]placement, len(t.Nodes))
	for _, s := range t.Tree.Switches {
		if s.Level != 1 {
			continue
		}
		p := placement{leaf: s.Name}
		if up := s.Parent; up != nil {
			p.spine = up.Name
			if up.Parent != nil {
				p.core = up.Parent.Name
			}
		}
		for _, n := range s.Nodes {
			out[n] = p
		}
	}
	for _, b := range t.Blocks {
		for _, n := range b.Nodes {
			p := out[n]
			p.block, p.nvlinkDomain = b.Name, b.Domain
			out[n] = p
		}
	}
	return out
}

// Desired returns the labels GIN owns for every node of v: its keys only,
// valid label values, and no key whose value is unknown (a node with no
// spine above it has no KeySpine). The names are those of the Slurm
// exports (export.Build), so both schedulers see the same groups. It fails
// when the exports' model cannot be built (a node name no hostlist can
// carry): then nothing is relabelled rather than every label removed.
func Desired(v state.View, health Health, topograph bool) (map[string]map[string]string, error) {
	ps := map[string]placement{}
	if v.Len() > 0 {
		t, err := export.Build(v.Graph)
		if err != nil && !errors.Is(err, export.ErrNoNodes) {
			return nil, fmt.Errorf("the topology model: %w", err)
		}
		if t != nil {
			ps = placements(t)
		}
	}
	verdicts := health.Verdicts(v)
	out := make(map[string]map[string]string, v.Len())
	for _, n := range v.NodeNames() {
		p := ps[n]
		l := map[string]string{}
		set := func(k, val string) {
			if val != "" {
				l[k] = nodelabels.Value(val)
			}
		}
		set(nodelabels.KeyLeaf, p.leaf)
		set(nodelabels.KeySpine, p.spine)
		set(nodelabels.KeyCore, p.core)
		set(nodelabels.KeyBlock, p.block)
		set(nodelabels.KeyNVLinkDomain, p.nvlinkDomain)
		verdict := verdicts[n]
		if verdict == "" {
			verdict = nodelabels.Pass
		}
		set(nodelabels.KeyHealth, string(verdict))
		if topograph {
			set(nodelabels.TopographTier0, p.leaf)
			set(nodelabels.TopographTier1, p.spine)
			set(nodelabels.TopographTier2, p.core)
			set(nodelabels.TopographDomain, p.nvlinkDomain)
		}
		out[n] = l
	}
	return out, nil
}

// equal reports whether two label sets are the same.
func equal(a, b map[string]string) bool { return maps.Equal(a, b) }
