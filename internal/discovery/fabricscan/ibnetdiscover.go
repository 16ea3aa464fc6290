package fabricscan

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// Bounds of ParseIBNetDiscover. A real 2,000-switch fabric is a few MiB of
// text; these only stop a runaway or hostile input.
const (
	// MaxInputBytes is the most ParseIBNetDiscover reads.
	MaxInputBytes = 64 << 20
	// MaxNodes is the most node blocks (switches, CAs, routers) accepted.
	MaxNodes = 200_000
	// MaxLinks is the most port lines accepted (each cable is two lines).
	MaxLinks = 4_000_000
	// maxLineBytes bounds one line; real lines are under 300 bytes.
	maxLineBytes = 64 << 10
)

// SourceIBNetDiscover is FabricTopology.source for a parsed ibnetdiscover dump.
const SourceIBNetDiscover = "ibnetdiscover"

// ParseError is a line of ibnetdiscover output that could not be used.
type ParseError struct {
	Line int    // 1-based line number; 0 when the error is about the whole input
	Kind string // "node", "port", "attribute", "input"
	Text string // the line, cut to 120 bytes
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("ibnetdiscover: %s", e.Msg)
	}
	return fmt.Sprintf("ibnetdiscover:%d: %s line %q: %s", e.Line, e.Kind, e.Text, e.Msg)
}

// ErrInputTooLarge is returned (wrapped in a *ParseError) when the input is
// over MaxInputBytes.
var ErrInputTooLarge = errors.New("input larger than 64 MiB")

type nodeKind uint8

const (
	kindSwitch nodeKind = iota + 1
	kindCA
	kindRouter
)

func (k nodeKind) letter() byte { return " SHR"[k] }

// ibNode is one node block.
type ibNode struct {
	kind   nodeKind
	guid   uint64
	nports int
	desc   string
	lid    uint32
	line   int
	text   string
	ports  map[int]*ibPort
	order  []*ibPort // ports in line order
	sharp  bool
	hasHCA bool // switch with a non-SHARP CA neighbour
}

// ibPort is one port line of a node block.
type ibPort struct {
	local     int
	localGUID uint64 // CA/router lines: the local port GUID; 0 otherwise
	peerKind  nodeKind
	peerGUID  uint64
	peerPort  int
	peerPGUID uint64 // port GUID printed after a CA/router peer; 0 otherwise
	rate      uint32
	line      int
	text      string
}

// limitReader fails once more than n bytes have been read, instead of
// silently stopping as io.LimitReader does.
type limitReader struct {
	r io.Reader
	n int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n < 0 {
		return 0, ErrInputTooLarge
	}
	if int64(len(p)) > l.n+1 {
		p = p[:l.n+1]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	if l.n < 0 {
		return n, ErrInputTooLarge
	}
	return n, err
}

type ibParser struct {
	maxNodes, maxLinks int
	nodes              []*ibNode
	byGUID             map[uint64]*ibNode
	cur                *ibNode // block being read; nil between blocks
	links              int
}

// ParseIBNetDiscover reads the topology file that `ibnetdiscover` prints and
// returns the fabric it describes: every switch, and every cable between two
// switch ports or between a switch port and an HCA port, each once.
//
// SHARP aggregation nodes (the CA behind a Quantum switch's internal port,
// described "Mellanox Technologies Aggregation Node") and their links are
// left out, and so are routers. HCA endpoints are named by their port GUID;
// NodeName and Hca are filled when the CA's NodeDescription has the usual
// "<hostname> <device>" shape. Switch tiers count cable hops from the hosts:
// 1 for switches with an HCA, 2 for switches one hop above those, and so on;
// 0 for a switch no HCA reaches.
//
// The dump must be whole and consistent: every cable must appear from both
// ends and every node named in a port line must have its own block. Any
// malformed or truncated input gives a *ParseError naming the line, and no
// topology.
func ParseIBNetDiscover(r io.Reader) (*ginv1.FabricTopology, error) {
	return parseIBNetDiscover(r, MaxInputBytes, MaxNodes, MaxLinks)
}

func parseIBNetDiscover(r io.Reader, maxBytes int64, maxNodes, maxLinks int) (*ginv1.FabricTopology, error) {
	p := &ibParser{maxNodes: maxNodes, maxLinks: maxLinks, byGUID: make(map[uint64]*ibNode)}
	sc := bufio.NewScanner(&limitReader{r: r, n: maxBytes})
	sc.Buffer(make([]byte, 0, 4096), maxLineBytes)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimRight(sc.Text(), "\r")
		if err := p.line(lineNo, line); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		switch {
		case errors.Is(err, ErrInputTooLarge):
			return nil, &ParseError{Kind: "input", Msg: ErrInputTooLarge.Error()}
		case errors.Is(err, bufio.ErrTooLong):
			return nil, &ParseError{Line: lineNo + 1, Kind: "input", Msg: fmt.Sprintf("line longer than %d bytes", maxLineBytes)}
		default:
			return nil, &ParseError{Line: lineNo + 1, Kind: "input", Msg: "read: " + err.Error()}
		}
	}
	if err := p.endBlock(); err != nil {
		return nil, err
	}
	if len(p.nodes) == 0 {
		return nil, &ParseError{Kind: "input", Msg: "no Switch or Ca node in the input"}
	}
	return p.build()
}

func cut(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

func (p *ibParser) line(n int, line string) error {
	t := strings.TrimSpace(line)
	switch {
	case t == "":
		return p.endBlock()
	case t[0] == '#':
		return nil
	case t[0] == '[':
		return p.portLine(n, t)
	case strings.HasPrefix(t, "Switch") || strings.HasPrefix(t, "Ca") || strings.HasPrefix(t, "Rt"):
		return p.nodeLine(n, t)
	}
	if k, v, ok := strings.Cut(t, "="); ok && isAttrKey(k) {
		if p.cur != nil {
			return &ParseError{Line: n, Kind: "attribute", Text: cut(t), Msg: "attribute after the node line of the same block"}
		}
		if err := checkAttrValue(k, v); err != nil {
			return &ParseError{Line: n, Kind: "attribute", Text: cut(t), Msg: err.Error()}
		}
		return nil
	}
	return &ParseError{Line: n, Kind: "unknown", Text: cut(t), Msg: "not a node, port, attribute or comment line"}
}

func isAttrKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// checkAttrValue checks the GUID-valued attribute lines
// ("sysimgguid=0x...", "switchguid=0x...(...)", "caguid=0x...").
func checkAttrValue(k, v string) error {
	switch k {
	case "vendid", "devid", "sysimgguid", "switchguid", "caguid", "routerguid":
	default:
		return nil // other attributes are ignored
	}
	if i := strings.IndexByte(v, '('); i >= 0 {
		if !strings.HasSuffix(v, ")") {
			return errors.New("unbalanced parenthesis")
		}
		if _, err := parseHex(v[i+1 : len(v)-1]); err != nil {
			return fmt.Errorf("bad port GUID: %v", err)
		}
		v = v[:i]
	}
	if !strings.HasPrefix(v, "0x") && !strings.HasPrefix(v, "0X") {
		return errors.New("value is not 0x-prefixed hex")
	}
	if _, err := parseHex(v[2:]); err != nil {
		return fmt.Errorf("bad value: %v", err)
	}
	return nil
}

func parseHex(s string) (uint64, error) {
	if s == "" || len(s) > 16 {
		return 0, fmt.Errorf("%q is not a 64-bit hex number", s)
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a 64-bit hex number", s)
	}
	return v, nil
}

// endBlock closes the current node block.
func (p *ibParser) endBlock() error {
	n := p.cur
	p.cur = nil
	if n == nil {
		return nil
	}
	if len(n.ports) == 0 {
		return &ParseError{Line: n.line, Kind: "node", Text: cut(n.text), Msg: "node has no port lines (truncated output?)"}
	}
	return nil
}

// scanner is a cursor over one line.
type scanner struct {
	s string
	i int
}

func (c *scanner) skipSpace() {
	for c.i < len(c.s) && (c.s[c.i] == ' ' || c.s[c.i] == '\t') {
		c.i++
	}
}

func (c *scanner) peek() byte {
	if c.i < len(c.s) {
		return c.s[c.i]
	}
	return 0
}

func (c *scanner) accept(prefix string) bool {
	if strings.HasPrefix(c.s[c.i:], prefix) {
		c.i += len(prefix)
		return true
	}
	return false
}

// until returns the text up to the next b and moves past b.
func (c *scanner) until(b byte) (string, bool) {
	j := strings.IndexByte(c.s[c.i:], b)
	if j < 0 {
		return "", false
	}
	out := c.s[c.i : c.i+j]
	c.i += j + 1
	return out, true
}

// bracketNum reads "[N]" and returns N; ok false when the brackets are missing.
func (c *scanner) bracketNum() (n int, raw string, ok bool) {
	if !c.accept("[") {
		return 0, "", false
	}
	raw, ok = c.until(']')
	if !ok {
		return 0, "", false
	}
	v, err := strconv.Atoi(raw)
	if err != nil || v < 0 || v > 255 || len(raw) > 3 {
		return -1, raw, true
	}
	return v, raw, true
}

// skipExt skips the "[ext N]" that -g (chassis grouping) adds after a port.
func (c *scanner) skipExt() {
	if strings.HasPrefix(c.s[c.i:], "[ext ") {
		if _, ok := c.until(']'); ok {
			return
		}
	}
}

// parenGUID reads an optional "(hex)".
func (c *scanner) parenGUID() (uint64, bool, error) {
	if !c.accept("(") {
		return 0, false, nil
	}
	raw, ok := c.until(')')
	if !ok {
		return 0, false, errors.New("unbalanced parenthesis")
	}
	g, err := parseHex(raw)
	if err != nil {
		return 0, false, fmt.Errorf("bad port GUID: %v", err)
	}
	return g, true, nil
}

// nodeID reads `"S-<guid>"`.
func (c *scanner) nodeID() (nodeKind, uint64, error) {
	if !c.accept(`"`) {
		return 0, 0, errors.New(`missing quoted node id ("S-<guid>")`)
	}
	raw, ok := c.until('"')
	if !ok {
		return 0, 0, errors.New("unterminated node id")
	}
	if len(raw) < 3 || raw[1] != '-' {
		return 0, 0, fmt.Errorf("bad node id %q", raw)
	}
	var k nodeKind
	switch raw[0] {
	case 'S':
		k = kindSwitch
	case 'H':
		k = kindCA
	case 'R':
		k = kindRouter
	default:
		return 0, 0, fmt.Errorf("bad node id %q: type is not S, H or R", raw)
	}
	g, err := parseHex(raw[2:])
	if err != nil {
		return 0, 0, fmt.Errorf("bad node id %q: %v", raw, err)
	}
	return k, g, nil
}

func (p *ibParser) nodeLine(n int, t string) error {
	if err := p.endBlock(); err != nil {
		return err
	}
	perr := func(msg string) error { return &ParseError{Line: n, Kind: "node", Text: cut(t), Msg: msg} }
	c := &scanner{s: t}
	var kind nodeKind
	switch {
	case c.accept("Switch"):
		kind = kindSwitch
	case c.accept("Ca"):
		kind = kindCA
	case c.accept("Rt"):
		kind = kindRouter
	}
	if c.peek() != ' ' && c.peek() != '\t' {
		return perr("unknown node type")
	}
	c.skipSpace()
	start := c.i
	for c.i < len(c.s) && c.s[c.i] >= '0' && c.s[c.i] <= '9' {
		c.i++
	}
	nports, err := strconv.Atoi(c.s[start:c.i])
	if err != nil || nports < 1 || nports > 255 {
		return perr("bad port count")
	}
	c.skipSpace()
	idKind, guid, err := c.nodeID()
	if err != nil {
		return perr(err.Error())
	}
	if idKind != kind {
		return perr(fmt.Sprintf("node id type %c does not match the node type", idKind.letter()))
	}
	c.skipSpace()
	if !c.accept("#") {
		return perr(`missing "#" before the description`)
	}
	c.skipSpace()
	rest := c.s[c.i:]
	if !strings.HasPrefix(rest, `"`) {
		return perr("missing quoted description")
	}
	node := &ibNode{kind: kind, guid: guid, nports: nports, line: n, text: t, ports: make(map[int]*ibPort)}
	if kind == kindSwitch {
		// `"desc" enhanced port 0 lid 73 lmc 0` (or "base port 0").
		q := strings.LastIndexByte(rest, '"')
		if q <= 0 {
			return perr("unterminated description")
		}
		node.desc = rest[1:q]
		f := strings.Fields(rest[q+1:])
		if len(f) < 6 || (f[0] != "enhanced" && f[0] != "base") || f[1] != "port" || f[3] != "lid" || f[5] != "lmc" {
			return perr(`switch line lacks "enhanced|base port 0 lid <lid> lmc <lmc>"`)
		}
		lid, err := strconv.ParseUint(f[4], 10, 16)
		if err != nil {
			return perr("bad lid")
		}
		node.lid = uint32(lid)
	} else {
		q := strings.LastIndexByte(rest, '"')
		if q <= 0 {
			return perr("unterminated description")
		}
		node.desc = rest[1:q]
		if strings.TrimSpace(rest[q+1:]) != "" {
			return perr("unexpected text after the description")
		}
	}
	if len(p.nodes) >= p.maxNodes {
		return perr(fmt.Sprintf("more than %d nodes", p.maxNodes))
	}
	if prev, dup := p.byGUID[guid]; dup {
		return perr(fmt.Sprintf("node GUID repeated (first at line %d)", prev.line))
	}
	node.sharp = kind == kindCA && isSHARP(node.desc)
	p.byGUID[guid] = node
	p.nodes = append(p.nodes, node)
	p.cur = node
	return nil
}

// isSHARP reports whether a CA NodeDescription is a SHARP aggregation node
// ("Mellanox Technologies Aggregation Node", or one that names SHARP).
func isSHARP(desc string) bool {
	if strings.Contains(strings.ToLower(desc), "aggregation node") {
		return true
	}
	return slices.Contains(strings.FieldsFunc(desc, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }), "SHARP")
}

func (p *ibParser) portLine(n int, t string) error {
	perr := func(msg string) error { return &ParseError{Line: n, Kind: "port", Text: cut(t), Msg: msg} }
	node := p.cur
	if node == nil {
		return perr("port line outside a node block")
	}
	c := &scanner{s: t}
	local, _, ok := c.bracketNum()
	if !ok || local <= 0 {
		return perr("bad port number")
	}
	if local > node.nports {
		return perr(fmt.Sprintf("port %d beyond the node's %d ports", local, node.nports))
	}
	if prev, dup := node.ports[local]; dup {
		return perr(fmt.Sprintf("port %d repeated (first at line %d)", local, prev.line))
	}
	c.skipExt()
	pt := &ibPort{local: local, line: n, text: t}
	g, has, err := c.parenGUID()
	if err != nil {
		return perr(err.Error())
	}
	if has {
		if node.kind == kindSwitch {
			return perr("switch port line with a local port GUID")
		}
		pt.localGUID = g
	}
	c.skipSpace()
	pt.peerKind, pt.peerGUID, err = c.nodeID()
	if err != nil {
		return perr(err.Error())
	}
	peer, _, ok := c.bracketNum()
	if !ok || peer <= 0 {
		return perr("bad peer port number")
	}
	pt.peerPort = peer
	c.skipExt()
	if g, has, err = c.parenGUID(); err != nil {
		return perr(err.Error())
	} else if has {
		pt.peerPGUID = g
	}
	c.skipSpace()
	if !c.accept("#") {
		return perr(`missing "#" before the peer description`)
	}
	rest := c.s[c.i:]
	// The comment is `"<peer desc>" lid <peer lid> <rate>`, preceded on CA
	// lines by `lid <local lid> lmc <lmc>`. The description may hold
	// anything, so find its end from the right.
	q := strings.LastIndex(rest, `" lid `)
	if q < 0 {
		return perr("missing peer description and lid")
	}
	if !strings.Contains(rest[:q], `"`) {
		return perr("unterminated peer description")
	}
	f := strings.Fields(rest[q+len(`" lid `):])
	if len(f) == 0 {
		return perr("missing peer lid")
	}
	if _, err := strconv.ParseUint(f[0], 10, 16); err != nil {
		return perr("bad peer lid")
	}
	if len(f) > 1 {
		pt.rate, _ = RateGbps(f[1])
	}
	p.links++
	if p.links > p.maxLinks {
		return perr(fmt.Sprintf("more than %d port lines", p.maxLinks))
	}
	node.ports[local] = pt
	node.order = append(node.order, pt)
	return nil
}

// laneGbps is the signalling rate of one lane, in tenths of Gb/s.
var laneGbps = map[string]uint64{
	"SDR": 25, "DDR": 50, "QDR": 100, "FDR10": 100, "FDR": 140,
	"EDR": 250, "HDR": 500, "NDR": 1000, "XDR": 2000,
}

// RateGbps converts an ibnetdiscover rate token ("4xNDR", "2xHDR", "1xSDR")
// to Gb/s: lanes × per-lane rate (SDR 2.5, DDR 5, QDR 10, FDR10 10, FDR 14,
// EDR 25, HDR 50, NDR 100, XDR 200), rounded to the nearest whole Gb/s
// (1xSDR is 3). ok is false for a token of another shape.
func RateGbps(tok string) (gbps uint32, ok bool) {
	w, speed, found := strings.Cut(tok, "x")
	if !found {
		return 0, false
	}
	width, err := strconv.Atoi(w)
	if err != nil || width < 1 || width > 32 || len(w) > 2 {
		return 0, false
	}
	lane, known := laneGbps[speed]
	if !known {
		return 0, false
	}
	return uint32((uint64(width)*lane + 5) / 10), true
}

func guidString(g uint64) string { return fmt.Sprintf("0x%016x", g) }

// splitHostHCA splits "a08-p1-dgx-04-c01 mlx5_5" into host and device. The
// default descriptions of unnamed HCAs ("MT4129 ConnectX7 Mellanox
// Technologies") have more than two words and give nothing.
func splitHostHCA(desc string) (host, hca string) {
	f := strings.Fields(desc)
	if len(f) != 2 {
		return "", ""
	}
	okHost := func(s string) bool {
		for _, r := range s {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
				return false
			}
		}
		return true
	}
	if !okHost(f[0]) || !okHost(f[1]) {
		return "", ""
	}
	return f[0], f[1]
}

// build checks the graph and turns it into a FabricTopology.
func (p *ibParser) build() (*ginv1.FabricTopology, error) {
	// Every port line must name a node of the dump whose block points back.
	for _, n := range p.nodes {
		for _, pt := range n.order {
			perr := func(msg string) error { return &ParseError{Line: pt.line, Kind: "port", Text: cut(pt.text), Msg: msg} }
			peer := p.byGUID[pt.peerGUID]
			if peer == nil {
				return nil, perr(fmt.Sprintf("peer %c-%016x has no node block (truncated output?)", pt.peerKind.letter(), pt.peerGUID))
			}
			if peer.kind != pt.peerKind {
				return nil, perr(fmt.Sprintf("peer %016x is a %c node, not %c", pt.peerGUID, peer.kind.letter(), pt.peerKind.letter()))
			}
			back := peer.ports[pt.peerPort]
			if back == nil {
				return nil, perr(fmt.Sprintf("peer's port %d has no port line (line %d block)", pt.peerPort, peer.line))
			}
			if back.peerGUID != n.guid || back.peerPort != pt.local {
				return nil, perr(fmt.Sprintf("peer's port %d line (line %d) points elsewhere", pt.peerPort, back.line))
			}
			if pt.peerGUID == n.guid && pt.peerPort == pt.local {
				return nil, perr("port cabled to itself")
			}
		}
	}

	topo := &ginv1.FabricTopology{Source: SourceIBNetDiscover}
	switches := make(map[uint64]*ginv1.FabricSwitch)
	adj := make(map[uint64][]uint64) // switch graph
	for _, n := range p.nodes {
		if n.kind != kindSwitch {
			continue
		}
		sw := &ginv1.FabricSwitch{Guid: guidString(n.guid), Description: n.desc, PortCount: uint32(n.nports), Lid: n.lid}
		switches[n.guid] = sw
		topo.Switches = append(topo.Switches, sw)
	}

	// HCA port GUID: the CA's own line, else the switch's view, else the node GUID.
	caPortGUID := func(ca *ibNode, port int) uint64 {
		pt := ca.ports[port]
		if pt.localGUID != 0 {
			return pt.localGUID
		}
		if sp := p.byGUID[pt.peerGUID].ports[pt.peerPort]; sp.peerPGUID != 0 {
			return sp.peerPGUID
		}
		return ca.guid
	}

	for _, n := range p.nodes {
		if n.kind != kindSwitch {
			continue
		}
		for _, pt := range n.order {
			l := pt.local
			peer := p.byGUID[pt.peerGUID]
			rate := pt.rate
			if rate == 0 {
				rate = peer.ports[pt.peerPort].rate
			}
			swEnd := &ginv1.FabricEndpoint{Kind: ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH, Guid: guidString(n.guid), Port: uint32(l)}
			switch peer.kind {
			case kindSwitch:
				// Each switch-switch cable is seen from both ends; keep
				// the view from the lower (GUID, port).
				if n.guid > peer.guid || (n.guid == peer.guid && l > pt.peerPort) {
					continue
				}
				adj[n.guid] = append(adj[n.guid], peer.guid)
				adj[peer.guid] = append(adj[peer.guid], n.guid)
				topo.Links = append(topo.Links, &ginv1.FabricLink{
					A:        swEnd,
					B:        &ginv1.FabricEndpoint{Kind: ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH, Guid: guidString(peer.guid), Port: uint32(pt.peerPort)},
					RateGbps: rate,
					State:    ginv1.LinkState_LINK_STATE_UP,
				})
			case kindCA:
				if peer.sharp {
					continue
				}
				n.hasHCA = true
				host, hca := splitHostHCA(peer.desc)
				topo.Links = append(topo.Links, &ginv1.FabricLink{
					A: &ginv1.FabricEndpoint{
						Kind: ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_HCA, Guid: guidString(caPortGUID(peer, pt.peerPort)),
						Port: uint32(pt.peerPort), NodeName: host, Hca: hca,
					},
					B:        swEnd,
					RateGbps: rate,
					State:    ginv1.LinkState_LINK_STATE_UP,
				})
			}
			// Routers are left out.
		}
	}
	// CA-CA cables (back-to-back HCAs) have no switch and are left out.

	// Tiers: BFS from the switches that have HCAs.
	tier := make(map[uint64]uint32)
	var queue []uint64
	for _, n := range p.nodes {
		if n.kind == kindSwitch && n.hasHCA {
			tier[n.guid] = 1
			queue = append(queue, n.guid)
		}
	}
	for len(queue) > 0 {
		g := queue[0]
		queue = queue[1:]
		for _, nb := range adj[g] {
			if _, seen := tier[nb]; !seen {
				tier[nb] = tier[g] + 1
				queue = append(queue, nb)
			}
		}
	}
	for g, sw := range switches {
		sw.Tier = tier[g]
	}

	// Switch-switch links go from the lower tier up.
	for _, l := range topo.Links {
		if l.B.Kind != ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH || l.A.Kind != ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_SWITCH {
			continue
		}
		ta, tb := tierOf(switches, l.A.Guid), tierOf(switches, l.B.Guid)
		if ta > tb && tb != 0 || ta == 0 && tb != 0 {
			l.A, l.B = l.B, l.A
		}
	}
	slices.SortFunc(topo.Switches, func(a, b *ginv1.FabricSwitch) int {
		return cmp.Or(cmp.Compare(a.Tier, b.Tier), cmp.Compare(a.Guid, b.Guid))
	})
	slices.SortFunc(topo.Links, func(a, b *ginv1.FabricLink) int {
		return cmp.Or(cmp.Compare(a.A.Kind, b.A.Kind), cmp.Compare(a.A.Guid, b.A.Guid), cmp.Compare(a.A.Port, b.A.Port),
			cmp.Compare(a.B.Guid, b.B.Guid), cmp.Compare(a.B.Port, b.B.Port))
	})
	return topo, nil
}

func tierOf(m map[uint64]*ginv1.FabricSwitch, g string) uint32 {
	v, err := strconv.ParseUint(strings.TrimPrefix(g, "0x"), 16, 64)
	if err != nil {
		return 0
	}
	if sw := m[v]; sw != nil {
		return sw.Tier
	}
	return 0
}
