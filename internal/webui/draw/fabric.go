package draw

import (
	"fmt"
	"html"
	"io"
	"slices"
	"sort"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/devid"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/natsort"
)

// CollapseAbove is the node count above which leaf groups are drawn as
// counts unless expanded: a cluster this size still draws every node as a
// labelled tile or a square at well under a megabyte.
const CollapseAbove = 512

// Bounds of what one picture draws, so its size stays bounded whatever
// the cluster: spines drawn one by one, nodes drawn one by one in a
// collapsed group (its faulty and highlighted ones), per-link marks looked
// up for faulty nodes, switches listed per other fabric.
const (
	maxSpines          = 64
	maxCollapsedShown  = 48
	maxLinkLookups     = 2000
	maxOtherSwitches   = 16
	bigTilesUpTo       = 128 // nodes: up to this many, tiles carry their names
	maxDomainLabelRune = 24
	maxFaultLinks      = 6
	maxMarkRunes       = 200 // a suspect's label, in its title
)

// FabricInput is what the fabric picture is drawn from.
type FabricInput struct {
	// Nodes are every node's summary (ListNodes).
	Nodes []*ginv1.NodeSummary
	// Graph gives leaves and ports; nil draws the nodes by their summaries'
	// leaf names only.
	Graph *graph.Graph
	// Fabric is the imported scan (cable states and rates); nil when none.
	Fabric *ginv1.FabricTopology
	// Verdicts colour the nodes; nil uses FromSummaries(Nodes).
	Verdicts Verdicts
	// Expanded says which groups are drawn node by node in a cluster of
	// more than CollapseAbove nodes; ExpandAll draws every one.
	Expanded  map[string]bool
	ExpandAll bool
	// Highlight marks nodes (a job's).
	Highlight map[string]bool
	// Marked are nodes drawn as suspects (a running job's, the live
	// state), each with a short label ("slow-link mlx5_3") in its title and
	// data-suspect: a red ring around the tile, whatever its colour. A
	// marked node is drawn in a collapsed group as a highlighted one is.
	Marked map[string]string
	// NodeHref and ExpandHref make the links (relative URLs); ExpandHref
	// with "" is the link that collapses everything again.
	NodeHref   func(node string) string
	ExpandHref func(group string) string
}

// group is one leaf group: the nodes whose first compute port (rail 0) is
// cabled to one leaf switch, with the rail leaves they reach.
type group struct {
	key   string // the rail-0 leaf's GUID (normalised), or its name; "" unknown
	label string
	nodes []*fnode
	// leaves are the switches the group's nodes' compute ports reach.
	leaves map[string]bool
	// uplinks counts the cables from its leaves to other switches.
	up, down, degraded int
	counts             [levels]int
	expanded           bool
}

// nodeLevel is what colours a node: its state first, then its verdict.
type nodeLevel uint8

const (
	lvPass nodeLevel = iota
	lvUnknown
	lvWarn
	lvFail
	lvDraining
	lvDown
	levels
)

var levelWord = [levels]string{"pass", "unknown", "warn", "fail", "draining", "down"}

type fnode struct {
	s       *ginv1.NodeSummary
	level   nodeLevel
	verdict Verdict
	badLink []string // data-link names of its cables not up
	job     bool
	mark    string // a suspect's label (FabricInput.Marked); "" none
}

func (n *fnode) notable() bool {
	return n.level != lvPass || n.job || n.mark != "" || len(n.badLink) > 0
}

// fabricModel is the picture's content, before layout.
type fabricModel struct {
	in      FabricInput
	groups  []*group
	spines  []spine
	others  []otherFabric
	collape bool
	counts  [levels]int
}

type spine struct {
	guid, label string
	down, all   int
}

// otherFabric is a connected part of the scan that no compute port
// reaches: storage or management networks.
type otherFabric struct {
	switches []string
	nodes    int
}

func normSwitch(s string) string {
	if g, ok := devid.GUID(s); ok {
		return g
	}
	return strings.ToLower(strings.TrimSpace(s))
}

func levelOf(s *ginv1.NodeSummary, v Verdict, known bool) nodeLevel {
	switch s.GetState() {
	case ginv1.NodeState_NODE_STATE_DOWN:
		return lvDown
	case ginv1.NodeState_NODE_STATE_DRAINING:
		return lvDraining
	}
	if !known {
		return lvUnknown
	}
	switch v.Level {
	case LevelFail:
		return lvFail
	case LevelWarn:
		return lvWarn
	case LevelPass:
		return lvPass
	}
	return lvUnknown
}

func buildFabric(in FabricInput) *fabricModel {
	m := &fabricModel{in: in, collape: len(in.Nodes) > CollapseAbove}
	if in.Verdicts == nil {
		in.Verdicts = FromSummaries(in.Nodes)
	}
	// Switch descriptions and tiers, from the graph (tiers derived) or the scan.
	desc := map[string]string{}
	tier := map[string]uint32{}
	if in.Graph != nil {
		for _, sw := range in.Graph.Switches() {
			desc[sw.GUID], tier[sw.GUID] = sw.Description, sw.Tier
		}
	}
	for _, sw := range in.Fabric.GetSwitches() {
		g := normSwitch(sw.GetGuid())
		if _, ok := desc[g]; !ok {
			desc[g], tier[g] = sw.GetDescription(), sw.GetTier()
		}
	}
	name := func(g string) string {
		if d := desc[g]; d != "" {
			return d
		}
		return g
	}

	// Cables: HCA ends per node, switch-to-switch cables.
	hcaLeaves := map[string][]string{} // node → switches its HCA cables reach
	badCable := map[string][]string{}  // node → "node/hca/port" of its cables not up
	type cable struct {
		a, b string
		down bool
		rate uint32
	}
	var cables []cable
	var maxRate uint32
	for _, l := range in.Fabric.GetLinks() {
		a, b := l.GetA(), l.GetB()
		if a.GetKind() == ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_HCA {
			a, b = b, a
		}
		if a.GetKind() != ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH {
			continue
		}
		down := l.GetState() == ginv1.LinkState_LINK_STATE_DOWN
		switch b.GetKind() {
		case ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_HCA:
			if n := b.GetNodeName(); n != "" {
				hcaLeaves[n] = append(hcaLeaves[n], normSwitch(a.GetGuid()))
				if down {
					badCable[n] = append(badCable[n], fmt.Sprintf("%s/%s/%d", n, b.GetHca(), b.GetPort()))
				}
			}
		case ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH:
			cables = append(cables, cable{normSwitch(a.GetGuid()), normSwitch(b.GetGuid()), down, l.GetRateGbps()})
			maxRate = max(maxRate, l.GetRateGbps())
		}
	}

	// Groups by rail-0 leaf.
	byKey := map[string]*group{}
	lookups := 0
	for _, s := range in.Nodes {
		v, known := in.Verdicts.Verdict(s.GetName())
		n := &fnode{s: s, verdict: v, level: levelOf(s, v, known), job: in.Highlight[s.GetName()],
			mark: short(in.Marked[s.GetName()], maxMarkRunes)}
		n.badLink = badCable[s.GetName()]
		if in.Graph != nil && s.GetComputePortsUp() < s.GetComputePortsTotal() && lookups < maxLinkLookups {
			lookups++
			n.badLink = append(n.badLink, portsNotUp(in.Graph, s.GetName())...)
			slices.Sort(n.badLink)
			n.badLink = slices.Compact(n.badLink)
		}
		key, label := "", "no leaf known (fabric not imported)"
		if in.Graph != nil {
			if g, ok := in.Graph.NodeLeaf(s.GetName()); ok {
				key, label = g, name(g)
			}
		}
		if key == "" && s.GetLeafSwitch() != "" {
			key, label = s.GetLeafSwitch(), s.GetLeafSwitch()
		}
		g := byKey[key]
		if g == nil {
			g = &group{key: key, label: label, leaves: map[string]bool{}}
			byKey[key] = g
			m.groups = append(m.groups, g)
		}
		g.nodes = append(g.nodes, n)
		g.counts[n.level]++
		m.counts[n.level]++
		for _, l := range hcaLeaves[s.GetName()] {
			g.leaves[l] = true
		}
		if key != "" && len(key) == 16 {
			g.leaves[key] = true
		}
	}
	sort.Slice(m.groups, func(i, j int) bool {
		a, b := m.groups[i], m.groups[j]
		if (a.key == "") != (b.key == "") {
			return b.key == "" // the unknown group last
		}
		return natsort.Less(a.label, b.label)
	})
	leafOf := map[string]*group{}
	for _, g := range m.groups {
		g.expanded = !m.collape || in.ExpandAll || in.Expanded[g.key]
		for l := range g.leaves {
			leafOf[l] = g
		}
		// Nodes of one NVLink domain together, then by name.
		sort.SliceStable(g.nodes, func(i, j int) bool {
			a, b := g.nodes[i].s, g.nodes[j].s
			if a.GetNvlinkDomain() != b.GetNvlinkDomain() {
				return natsort.Less(a.GetNvlinkDomain(), b.GetNvlinkDomain())
			}
			return natsort.Less(a.GetName(), b.GetName())
		})
	}

	// Uplinks of each group, spines, and the parts of the scan no compute
	// port reaches (union-find over switch cables).
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		p, ok := parent[x]
		if !ok || p == x {
			parent[x] = x
			return x
		}
		r := find(p)
		parent[x] = r
		return r
	}
	cabled := map[string]bool{}
	for _, c := range cables {
		parent[find(c.a)] = find(c.b)
		cabled[c.a], cabled[c.b] = true, true
	}
	for _, ls := range hcaLeaves {
		for _, l := range ls {
			cabled[l] = true
		}
	}
	compute := map[string]bool{}
	for l := range leafOf {
		compute[find(l)] = true
	}
	// Spines: the upper-tier switches of the compute fabric, and those
	// with no cable at all (a scan lists them; they carry nothing yet).
	spineIdx := map[string]int{}
	for _, sw := range in.Fabric.GetSwitches() {
		g := normSwitch(sw.GetGuid())
		if tier[g] >= 2 && leafOf[g] == nil && (compute[find(g)] || !cabled[g]) {
			if _, ok := spineIdx[g]; !ok {
				spineIdx[g] = len(m.spines)
				m.spines = append(m.spines, spine{guid: g, label: name(g)})
			}
		}
	}
	for _, c := range cables {
		ga, gb := leafOf[c.a], leafOf[c.b]
		if ga == gb {
			continue // inside a group (or between two switches of no group)
		}
		for _, g := range []*group{ga, gb} {
			if g == nil {
				continue
			}
			switch {
			case c.down:
				g.down++
			case c.rate < maxRate:
				g.degraded++
			default:
				g.up++
			}
		}
		for _, s := range []string{c.a, c.b} {
			if i, ok := spineIdx[s]; ok {
				m.spines[i].all++
				if c.down {
					m.spines[i].down++
				}
			}
		}
	}
	others := map[string]*otherFabric{}
	var otherKeys []string
	for _, sw := range in.Fabric.GetSwitches() {
		g := normSwitch(sw.GetGuid())
		r := find(g)
		if _, isSpine := spineIdx[g]; compute[r] || isSpine {
			continue
		}
		o := others[r]
		if o == nil {
			o = &otherFabric{}
			others[r] = o
			otherKeys = append(otherKeys, r)
		}
		o.switches = append(o.switches, name(g))
	}
	for n, ls := range hcaLeaves {
		seen := map[*otherFabric]bool{}
		for _, l := range ls {
			if o := others[find(l)]; o != nil && !seen[o] {
				seen[o] = true
				o.nodes++
			}
		}
		_ = n
	}
	for _, k := range otherKeys {
		natsortStrings(others[k].switches)
		m.others = append(m.others, *others[k])
	}
	sort.SliceStable(m.others, func(i, j int) bool { return natsort.Less(m.others[i].switches[0], m.others[j].switches[0]) })
	sort.SliceStable(m.spines, func(i, j int) bool { return natsort.Less(m.spines[i].label, m.spines[j].label) })
	return m
}

func natsortStrings(s []string) {
	sort.Slice(s, func(i, j int) bool { return natsort.Less(s[i], s[j]) })
}

// portsNotUp names a node's compute ports that are not active, as
// data-link names them ("node002/mlx5_0/1").
func portsNotUp(g *graph.Graph, node string) []string {
	v, ok := g.NodeView(node)
	if !ok {
		return nil
	}
	var out []string
	for _, h := range v.HCAs {
		for _, p := range h.Ports {
			if p.Rail >= 0 && !p.Active {
				out = append(out, fmt.Sprintf("%s/%s/%d", node, h.Name, p.Port))
			}
		}
	}
	return out
}

// Layout of the fabric picture, in px.
const (
	fMargin   = 24
	fCardW    = 256
	fCardGap  = 16
	fCols     = 4
	fWidth    = 2*fMargin + fCols*fCardW + (fCols-1)*fCardGap
	fSpineW   = 84
	fSpineH   = 24
	fSpineGap = 8
	fHeadH    = 40
	fPad      = 8
)

// tile is the size of a node's mark.
type tile struct{ w, h, pitchX, pitchY, perRow int }

var (
	bigTile   = tile{w: 56, h: 22, pitchX: 60, pitchY: 28, perRow: 4}
	smallTile = tile{w: 12, h: 12, pitchX: 15, pitchY: 17, perRow: 16}
)

// Fabric draws the fabric: the spines on top, the leaf groups below them
// as cards hanging off the spine bus (their uplinks marked when cables are
// down or slower), every node a tile coloured by state and verdict inside
// its group's card, grouped by NVLink domain; then the parts of the scan
// no compute port reaches (storage, management), and a legend.
func Fabric(w io.Writer, in FabricInput) error {
	if in.NodeHref == nil || in.ExpandHref == nil {
		return fmt.Errorf("draw: fabric: NodeHref and ExpandHref are required")
	}
	m := buildFabric(in)
	t := smallTile
	if len(in.Nodes) <= bigTilesUpTo {
		t = bigTile
	}
	var body svg
	y := fMargin

	// Headline.
	nSpines := len(m.spines)
	leaves := 0
	for _, g := range m.groups {
		leaves += len(g.leaves)
	}
	body.text(fmt.Sprintf("Compute fabric: %d spines, %d leaves in %d groups, %d nodes: %s", nSpines, leaves, len(m.groups),
		len(in.Nodes), countWords(m.counts)), "x", itoa(fMargin), "y", itoa(y), "class", "h")
	y += 16
	if m.collape {
		body.text(fmt.Sprintf("More than %d nodes: groups are drawn as counts with their faulty and highlighted nodes; expand one to see every node.", CollapseAbove),
			"x", itoa(fMargin), "y", itoa(y), "class", "note")
		y += 16
		// Where the faults are, as links to their groups' cards: at this
		// size the cards run down many screens.
		var faulty []*group
		for _, g := range m.groups {
			if g.counts[lvPass] < len(g.nodes) {
				faulty = append(faulty, g)
			}
		}
		if len(faulty) > 0 {
			body.open("text", "x", itoa(fMargin), "y", itoa(y), "class", "note")
			body.b.WriteString("Faults under: ")
			for i, g := range faulty[:min(len(faulty), maxFaultLinks)] {
				if i > 0 {
					body.b.WriteString(", ")
				}
				body.open("a", "href", "#"+GroupAnchor(g.key))
				body.open("tspan", "class", "lk")
				body.b.WriteString(html.EscapeString(short(g.label, 24)))
				body.close("tspan")
				body.close("a")
			}
			if len(faulty) > maxFaultLinks {
				body.b.WriteString(html.EscapeString(fmt.Sprintf(" and %d more groups", len(faulty)-maxFaultLinks)))
			}
			body.close("text")
			y += 14
		}
	}

	// Spines.
	busY := y + 10
	if nSpines > 0 {
		y += 8
		perRow := (fWidth - 2*fMargin + fSpineGap) / (fSpineW + fSpineGap)
		shown := min(nSpines, maxSpines)
		for i := range shown {
			sp := m.spines[i]
			x := fMargin + (i%perRow)*(fSpineW+fSpineGap)
			sy := y + (i/perRow)*(fSpineH+fSpineGap)
			cls := "sw"
			title := fmt.Sprintf("%s (%s): %d of %d cables down", sp.label, sp.guid, sp.down, sp.all)
			switch {
			case sp.all == 0:
				// The scan lists it with no cable: drawn apart, not on the bus.
				cls, title = "sw nocable", fmt.Sprintf("%s (%s): no cable in the scan (carries nothing)", sp.label, sp.guid)
			case sp.down == sp.all:
				cls = "sw down"
			case sp.down > 0:
				cls = "sw deg"
			}
			body.open("g", "data-switch", sp.guid)
			body.rect(x, sy, fSpineW, fSpineH, title, "class", cls)
			body.text(short(sp.label, 12), "x", itoa(x+fSpineW/2), "y", itoa(sy+16), "class", "swl")
			body.close("g")
			if sp.all > 0 && i/perRow == (shown-1)/perRow {
				body.line(x+fSpineW/2, sy+fSpineH, x+fSpineW/2, sy+fSpineH+10, "class", "bus")
			}
		}
		rows := (shown + perRow - 1) / perRow
		y += rows*(fSpineH+fSpineGap) - fSpineGap
		if shown < nSpines {
			body.text(fmt.Sprintf("… and %d more spines", nSpines-shown), "x", itoa(fMargin), "y", itoa(y+14), "class", "note")
			y += 16
		}
		busY = y + 10
		y = busY + 14
	} else {
		y += 8
	}

	// Leaf groups, fCols a row, each row hanging off its own bus.
	rowTop := y
	var rowBuses []int
	for r := 0; r*fCols < len(m.groups); r++ {
		row := m.groups[r*fCols : min((r+1)*fCols, len(m.groups))]
		rowBus := rowTop - 12
		rowBuses = append(rowBuses, rowBus)
		lastX := fMargin + (len(row)-1)*(fCardW+fCardGap) + fCardW/2
		if nSpines > 0 {
			body.line(fMargin/2, rowBus, lastX, rowBus, "class", "bus")
		}
		rowH := 0
		for c, g := range row {
			x := fMargin + c*(fCardW+fCardGap)
			var card svg
			h := m.drawGroup(&card, g, x, rowTop, t)
			rowH = max(rowH, h)
			if nSpines > 0 && g.key != "" {
				cls, what := "up", fmt.Sprintf("%d uplinks up", g.up)
				switch {
				case g.up+g.degraded == 0 && g.down > 0:
					cls, what = "down", fmt.Sprintf("all %d uplinks down", g.down)
				case g.down > 0 || g.degraded > 0:
					cls, what = "deg", fmt.Sprintf("%d uplinks up, %d down, %d slower", g.up, g.down, g.degraded)
				}
				body.open("g", "data-link", g.label+"/uplinks", "class", "ul "+cls)
				body.line(x+fCardW/2, rowBus, x+fCardW/2, rowTop, "class", "link "+cls)
				body.rect(x+fCardW/2-4, rowBus, 8, rowTop-rowBus, g.label+": "+what, "class", "hit")
				body.close("g")
				if cls != "up" {
					body.text(what, "x", itoa(x+fCardW/2+6), "y", itoa(rowTop-2), "class", "lbad")
				}
			}
			body.b.Write(card.b.Bytes())
		}
		rowTop += rowH + 2*fCardGap
	}
	if nSpines > 0 && len(rowBuses) > 0 {
		right := fMargin + (min(len(m.groups), fCols)-1)*(fCardW+fCardGap) + fCardW/2
		perRow := (fWidth - 2*fMargin + fSpineGap) / (fSpineW + fSpineGap)
		right = max(right, fMargin+(min(nSpines, maxSpines, perRow)-1)*(fSpineW+fSpineGap)+fSpineW/2)
		body.line(fMargin/2, busY, right, busY, "class", "bus")
		body.line(fMargin/2, busY, fMargin/2, rowBuses[len(rowBuses)-1], "class", "bus")
	}
	y = rowTop

	// Other fabrics.
	y += 4
	if len(m.others) == 0 {
		msg := "No other fabric in the imported scan: storage and management networks are not drawn."
		if in.Fabric == nil {
			msg = "No fabric scan imported: nodes are grouped by the leaf their inventories name."
		}
		body.text(msg, "x", itoa(fMargin), "y", itoa(y), "class", "note")
		y += 20
	} else {
		body.text(fmt.Sprintf("Other fabrics (no compute port reaches them): %d", len(m.others)), "x", itoa(fMargin), "y", itoa(y), "class", "h")
		y += 10
		for i, o := range m.others {
			x := fMargin + (i%fCols)*(fCardW+fCardGap)
			oy := y + (i/fCols)*56
			names := o.switches
			more := ""
			if len(names) > maxOtherSwitches {
				more = fmt.Sprintf(" and %d more", len(names)-maxOtherSwitches)
				names = names[:maxOtherSwitches]
			}
			body.open("g", "data-fabric", o.switches[0], "class", "other")
			body.rect(x, oy, fCardW, 44, strings.Join(names, ", ")+more, "class", "card other")
			body.text(fmt.Sprintf("%d switches, %d nodes cabled", len(o.switches), o.nodes), "x", itoa(x+fPad), "y", itoa(oy+16), "class", "gl")
			body.text(short(strings.Join(names, ", ")+more, 40), "x", itoa(x+fPad), "y", itoa(oy+32), "class", "gs")
			body.close("g")
		}
		y += ((len(m.others)+fCols-1)/fCols)*56 + 8
	}

	// Legend.
	y += 4
	x := fMargin
	legend := []struct{ cls, word string }{{"n pass", "pass"}, {"n warn", "warn"}, {"n fail", "fail"}, {"n down", "down"},
		{"n draining", "draining"}, {"n unknown", "no verdict"}, {"n pass job", "job's node"}}
	if len(in.Marked) > 0 {
		legend = append(legend, struct{ cls, word string }{"n pass job suspect", "suspect"})
	}
	for _, l := range legend {
		body.rect(x, y-10, 12, 12, "", "class", l.cls)
		if strings.HasSuffix(l.cls, " suspect") {
			body.rect(x-2, y-12, 16, 16, "", "class", "sus")
		}
		body.text(l.word, "x", itoa(x+16), "y", itoa(y), "class", "lg")
		x += 16 + 8*len(l.word) + 12
	}
	body.line(x, y-4, x+20, y-4, "class", "link down")
	body.text("cable down", "x", itoa(x+24), "y", itoa(y), "class", "lg")
	x += 24 + 90
	body.line(x, y-4, x+20, y-4, "class", "link deg")
	body.text("some down or slower", "x", itoa(x+24), "y", itoa(y), "class", "lg")
	y += 12

	var out svg
	out.start(fWidth, y+fMargin/2, "fabric", fmt.Sprintf("fabric of %d nodes", len(in.Nodes)))
	out.b.Write(body.b.Bytes())
	out.close("svg")
	_, err := w.Write(out.b.Bytes())
	return err
}

// drawGroup draws one leaf group's card at x, y and returns its height.
func (m *fabricModel) drawGroup(w *svg, g *group, x, y int, t tile) int {
	var inner svg
	cy := y + fHeadH
	if g.expanded {
		cy = m.drawTiles(&inner, g.nodes, x+fPad, cy, t, true)
		if m.collape {
			inner.open("a", "href", m.in.ExpandHref(""))
			inner.text("collapse", "x", itoa(x+fCardW-fPad), "y", itoa(cy+10), "class", "act")
			inner.close("a")
			cy += 14
		}
	} else {
		// A bar of the group's levels, the counts, then its notable nodes.
		bw := fCardW - 2*fPad
		bx := x + fPad
		for lv := range levels {
			n := g.counts[lv]
			if n == 0 {
				continue
			}
			segW := max(2, n*bw/len(g.nodes))
			segW = min(segW, x+fPad+bw-bx)
			inner.rect(bx, cy, segW, 10, fmt.Sprintf("%d %s", n, levelWord[lv]), "class", "n "+levelWord[lv])
			bx += segW
		}
		cy += 24
		inner.text(countWords(g.counts), "x", itoa(x+fPad), "y", itoa(cy), "class", "gs")
		cy += 8
		var notable []*fnode
		for _, n := range g.nodes {
			if n.notable() {
				notable = append(notable, n)
			}
		}
		shown := notable[:min(len(notable), maxCollapsedShown)]
		if len(shown) > 0 {
			cy = m.drawTiles(&inner, shown, x+fPad, cy, smallTile, false)
		}
		if len(notable) > len(shown) {
			inner.text(fmt.Sprintf("… %d more faulty or highlighted", len(notable)-len(shown)), "x", itoa(x+fPad), "y", itoa(cy+10), "class", "gs")
			cy += 14
		}
		if g.key != "" {
			inner.open("a", "href", m.in.ExpandHref(g.key))
			inner.text("expand ▸", "x", itoa(x+fCardW-fPad), "y", itoa(cy+10), "class", "act")
			inner.close("a")
			cy += 14
		}
	}
	h := cy - y + fPad
	w.open("g", "class", "group", "data-group", g.label, "id", GroupAnchor(g.key))
	w.rect(x, y, fCardW, h, "", "class", "card")
	w.text(short(g.label, 30), "x", itoa(x+fPad), "y", itoa(y+16), "class", "gl")
	w.text(fmt.Sprintf("%d nodes", len(g.nodes)), "x", itoa(x+fCardW-fPad), "y", itoa(y+16), "class", "gn")
	sub := "no uplink known"
	if n := g.up + g.down + g.degraded; n > 0 {
		sub = fmt.Sprintf("uplinks %d/%d up", g.up, n)
	}
	if len(g.leaves) > 1 {
		sub = fmt.Sprintf("%d rail leaves, %s", len(g.leaves), sub)
	}
	w.text(sub, "x", itoa(x+fPad), "y", itoa(y+31), "class", "gs")
	w.b.Write(inner.b.Bytes())
	w.close("g")
	return h
}

// drawTiles draws nodes as tiles from x, y, each NVLink domain starting a
// new row inside an outline when domains is set; it returns the y below.
func (m *fabricModel) drawTiles(w *svg, nodes []*fnode, x, y int, t tile, domains bool) int {
	for i := 0; i < len(nodes); {
		dom := ""
		j := len(nodes)
		if domains {
			dom = nodes[i].s.GetNvlinkDomain()
			for j = i; j < len(nodes) && nodes[j].s.GetNvlinkDomain() == dom; j++ {
			}
		}
		run := nodes[i:j]
		rows := (len(run) + t.perRow - 1) / t.perRow
		if dom != "" {
			w.open("g", "class", "domain", "data-domain", dom)
			w.rect(x-3, y, t.perRow*t.pitchX+3, rows*t.pitchY+17, "NVLink domain "+dom, "class", "dom")
			w.text("NVLink domain "+short(dom, maxDomainLabelRune), "x", itoa(x), "y", itoa(y+12), "class", "dl")
			y += 17
		}
		for k, n := range run {
			nx, ny := x+(k%t.perRow)*t.pitchX, y+(k/t.perRow)*t.pitchY
			m.drawNode(w, n, nx, ny, t)
		}
		y += rows * t.pitchY
		if dom != "" {
			w.close("g")
			y += 4
		}
		i = j
	}
	return y
}

func (m *fabricModel) drawNode(w *svg, n *fnode, x, y int, t tile) {
	name := n.s.GetName()
	cls := "n " + levelWord[n.level]
	if n.job {
		cls += " job"
	}
	if n.mark != "" {
		cls += " suspect"
	}
	tip := name + ": " + stateWord(n.s.GetState())
	if n.verdict.Level != LevelUnknown {
		tip += ", verdict " + n.verdict.Level.String()
	}
	for _, f := range n.verdict.Findings {
		tip += "; " + f.Text
	}
	if n.s.GetNvlinkDomain() != "" {
		tip += "; NVLink domain " + n.s.GetNvlinkDomain()
	}
	if n.mark != "" {
		tip = "suspect: " + n.mark + "; " + tip
	}
	w.open("a", "href", m.in.NodeHref(name))
	w.rect(x, y, t.w, t.h, tip, "class", cls, "data-node", name, "data-state", levelWord[n.level], "data-suspect", n.mark)
	if t.w > 20 {
		w.text(short(name, 8), "x", itoa(x+t.w/2), "y", itoa(y+t.h/2+4), "class", "nl")
	}
	if n.mark != "" {
		// Outside the tile, so that it shows on a red one too.
		w.rect(x-2, y-2, t.w+4, t.h+4, "", "class", "sus")
	}
	w.close("a")
	marks := min(len(n.badLink), 4) // four marks fill the tile's width
	for i, l := range n.badLink[:marks] {
		seg := t.w / marks
		w.open("g", "data-link", l, "class", "cable down")
		w.rect(x+i*seg, y+t.h+1, seg-1, 3, l+": cable down or port not active", "class", "bad")
		w.close("g")
	}
}

// GroupAnchor is the id of a leaf group's card (a URL fragment), for
// the group key that ExpandHref is given.
func GroupAnchor(key string) string { return "g-" + anchorID(key) }

// anchorID makes a group key usable as a fragment.
func anchorID(key string) string {
	if key == "" {
		return "unknown"
	}
	var b strings.Builder
	for _, r := range key {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func countWords(c [levels]int) string {
	var parts []string
	for lv := range levels {
		if c[lv] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c[lv], levelWord[lv]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func stateWord(s ginv1.NodeState) string {
	switch s {
	case ginv1.NodeState_NODE_STATE_UP:
		return "up"
	case ginv1.NodeState_NODE_STATE_DOWN:
		return "down"
	case ginv1.NodeState_NODE_STATE_DRAINING:
		return "draining"
	}
	return "unknown state"
}

// short cuts s to n runes with an ellipsis (the full text is in a title).
func short(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
