package export

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/gin-topology/gin/internal/devid"
)

// DOT renders the model for Graphviz (`dot -Tsvg`): an undirected graph
// with one rank per switch tier (highest at the top) and the nodes at the
// bottom. Switches are boxes labelled with their description and tier
// (dashed when only nodes' fabric neighbours name them); nodes are labelled
// with their GPU count and NVLink domain. A node's ports cabled to one
// switch at one rate are one edge labelled "<count>x<rate>G"; switch
// uplinks are labelled with the narrowest cable rate. Vertex ids are "s:"
// + switch id (devid.GUIDText) and "n:" + node name. Vertices and edges
// come in the JSON document's order, so the output is deterministic.
func (t *Topology) DOT() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("graph \"gin\" {\n")
	b.WriteString("  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=8];\n")

	// t.Fabric is by tier, highest first: each run of one tier is a rank.
	for i := 0; i < len(t.Fabric); {
		tier := t.Fabric[i].Tier
		fmt.Fprintf(&b, "  subgraph \"tier%d\" {\n    rank=same;\n", tier)
		for ; i < len(t.Fabric) && t.Fabric[i].Tier == tier; i++ {
			s := t.Fabric[i]
			id := devid.GUIDText(s.GUID)
			label := s.Description
			if label == "" {
				label = id
			}
			label += fmt.Sprintf("\ntier %d", s.Tier)
			style := ""
			if s.FromInventory {
				style = ", style=dashed"
			}
			fmt.Fprintf(&b, "    %s [shape=box, label=%s%s];\n", dotID("s:"+id), dotString(label), style)
		}
		b.WriteString("  }\n")
	}
	if len(t.Hosts) > 0 {
		b.WriteString("  subgraph \"nodes\" {\n    rank=same;\n")
		for _, h := range t.Hosts {
			label := fmt.Sprintf("%s\n%d GPUs", h.Name, len(h.GPUs))
			if h.NVLinkDomain != "" {
				label += "\nNVLink " + h.NVLinkDomain
			}
			fmt.Fprintf(&b, "    %s [shape=ellipse, label=%s];\n", dotID("n:"+h.Name), dotString(label))
		}
		b.WriteString("  }\n")
	}

	// Node–switch edges: a node's ports per switch and rate, in the order
	// of each edge's first port.
	type key struct {
		node, sw string
		gbps     uint64
	}
	counts := map[key]int{}
	var keys []key
	for _, h := range t.Hosts {
		for _, hca := range h.HCAs {
			for _, p := range hca.Ports {
				if p.Switch == "" {
					continue
				}
				k := key{h.Name, devid.GUIDText(p.Switch), gbps(p.LinkMBps)}
				if counts[k] == 0 {
					keys = append(keys, k)
				}
				counts[k]++
			}
		}
	}
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s -- %s [label=%s];\n", dotID("n:"+k.node), dotID("s:"+k.sw), dotString(fmt.Sprintf("%dx%s", counts[k], gbpsText(k.gbps))))
	}
	for _, c := range t.Cables {
		fmt.Fprintf(&b, "  %s -- %s [label=%s];\n", dotID("s:"+devid.GUIDText(c.Lower)), dotID("s:"+devid.GUIDText(c.Upper)), dotString(gbpsText(gbps(c.MBps))))
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
	return `"` + dotEscaper.Replace(s) + `"`
}

// dotEscaper is built once: a strings.Replacer is immutable and safe for
// concurrent use, and building one per string was most of a drawing's
// allocations.
var dotEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "")
