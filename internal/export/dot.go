package export

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/gin-topology/gin/internal/graph"
)

// DOT writes the graph for Graphviz (`dot -Tsvg`): an undirected graph with
// one rank per switch tier (highest at the top) and the nodes at the
// bottom. Switches are boxes labelled with their description and tier;
// nodes are labelled with their GPU count and NVLink domain. A node's ports
// cabled to one switch are one edge labelled "<count>x<rate>G"; switch
// uplinks are labelled with the narrowest cable rate. Vertex ids are "s:"
// + switch id and "n:" + node name. The output is deterministic.
func DOT(g *graph.Graph) ([]byte, error) {
	doc, err := Model(g)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("graph \"gin\" {\n")
	b.WriteString("  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=8];\n")

	tiers := map[uint32][]Switch{}
	var order []uint32
	for _, s := range doc.Switches {
		if _, ok := tiers[s.Tier]; !ok {
			order = append(order, s.Tier)
		}
		tiers[s.Tier] = append(tiers[s.Tier], s)
	}
	sort.Slice(order, func(i, j int) bool { return order[i] > order[j] })
	for _, t := range order {
		fmt.Fprintf(&b, "  subgraph \"tier%d\" {\n    rank=same;\n", t)
		for _, s := range tiers[t] {
			label := s.Name
			if label == "" {
				label = s.ID
			}
			label += fmt.Sprintf("\ntier %d", s.Tier)
			style := ""
			if !s.InFabric {
				style = ", style=dashed"
			}
			fmt.Fprintf(&b, "    %s [shape=box, label=%s%s];\n", dotID("s:"+s.ID), dotString(label), style)
		}
		b.WriteString("  }\n")
	}
	if len(doc.Nodes) > 0 {
		b.WriteString("  subgraph \"nodes\" {\n    rank=same;\n")
		for _, n := range doc.Nodes {
			label := fmt.Sprintf("%s\n%d GPUs", n.Name, len(n.GPUs))
			if n.NVLinkDomain != "" {
				label += "\nNVLink " + n.NVLinkDomain
			}
			fmt.Fprintf(&b, "    %s [shape=ellipse, label=%s];\n", dotID("n:"+n.Name), dotString(label))
		}
		b.WriteString("  }\n")
	}

	// Node–switch edges: a node's ports per switch and rate.
	type key struct {
		node, sw string
		gbps     uint64
	}
	portOwner := map[string]string{}
	for _, n := range doc.Nodes {
		for _, nic := range n.NICs {
			for _, p := range nic.Ports {
				portOwner[p.ID] = n.Name
			}
		}
	}
	counts := map[key]int{}
	var keys []key
	for _, l := range doc.Links {
		if l.Kind != "port" {
			continue
		}
		k := key{portOwner[l.A], l.B, l.RateGbps}
		if counts[k] == 0 {
			keys = append(keys, k)
		}
		counts[k]++
	}
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s -- %s [label=%s];\n", dotID("n:"+k.node), dotID("s:"+k.sw), dotString(fmt.Sprintf("%dx%s", counts[k], gbpsText(k.gbps))))
	}
	for _, l := range doc.Links {
		if l.Kind != "switch" {
			continue
		}
		fmt.Fprintf(&b, "  %s -- %s [label=%s];\n", dotID("s:"+l.A), dotID("s:"+l.B), dotString(gbpsText(l.RateGbps)))
	}
	b.WriteString("}\n")
	return b.Bytes(), nil
}

func gbpsText(g uint64) string {
	if g == 0 {
		return "?"
	}
	return fmt.Sprintf("%dG", g)
}

// dotID quotes a vertex id.
func dotID(s string) string { return dotString(s) }

// dotString quotes a DOT string; newlines become \n line breaks.
func dotString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "")
	return `"` + r.Replace(s) + `"`
}
