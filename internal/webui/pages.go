package webui

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/inventory"
	"github.com/gin-topology/gin/internal/webui/draw"
)

//go:embed templates
var templateFS embed.FS

// VerdictSource is what a Backend implements when it has the health
// check's verdicts (the master: CheckService's); without it the pictures
// colour nodes by draw.FromSummaries (state, NVLinks and compute ports
// from the inventory). The map is read only.
type VerdictSource interface {
	NodeVerdicts(ctx context.Context) (map[string]*ginv1.NodeVerdict, error)
}

// healthVerdicts are the health check's verdicts as the pictures read them.
type healthVerdicts map[string]*ginv1.NodeVerdict

func (h healthVerdicts) Verdict(node string) (draw.Verdict, bool) {
	nv, ok := h[node]
	if !ok {
		return draw.Verdict{}, false
	}
	v := draw.Verdict{Level: levelOf(nv.GetVerdict())}
	for _, f := range nv.GetFindings() {
		text := f.GetCheck() + ": " + f.GetSeen()
		if f.GetImpact() != "" {
			text += " (" + f.GetImpact() + ")"
		}
		v.Findings = append(v.Findings, draw.Finding{Level: levelOf(f.GetSeverity()), Subject: f.GetSubject(), Text: text, Fix: f.GetFix()})
	}
	return v, true
}

func levelOf(v ginv1.Verdict) draw.Level {
	switch v {
	case ginv1.Verdict_VERDICT_PASS:
		return draw.LevelPass
	case ginv1.Verdict_VERDICT_WARN:
		return draw.LevelWarn
	case ginv1.Verdict_VERDICT_FAIL:
		return draw.LevelFail
	}
	return draw.LevelUnknown
}

// Bounds of the page parameters.
const (
	maxJobIDLen = 128
	// MaxEstimateGPUs bounds /ui/estimate?gpus= (the sweep asks one
	// estimate per power of two up to it).
	MaxEstimateGPUs = 65536
	maxExpandGroups = 64
)

var jobIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

// pages holds the parsed templates (immutable after newPages).
type pages struct{ t *template.Template }

func newPages() *pages {
	return &pages{t: template.Must(template.ParseFS(templateFS, "templates/*.html"))}
}

// svgHTML marks a picture as HTML for the templates. Safe because draw
// escapes every string it writes into its SVG (draw.svg's invariant).
func svgHTML(b []byte) template.HTML { return template.HTML(b) } //nolint:gosec // see above

func (h *handler) render(w http.ResponseWriter, name string, data any) {
	var b bytes.Buffer
	if err := h.pages.t.ExecuteTemplate(&b, name, data); err != nil {
		h.log.Error("web view: template", "page", name, "err", err)
		http.Error(w, "page failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// fail answers an error from the backend as write does.
func (h *handler) fail(w http.ResponseWriter, err error) { h.write(w, nil, err) }

// scene is what every fabric picture reads.
type scene struct {
	nodes    []*ginv1.NodeSummary
	g        *graph.Graph
	fabric   *ginv1.FabricTopology
	verdicts draw.Verdicts
	source   string // where the verdicts come from, in words
}

func (h *handler) scene(ctx context.Context) (scene, error) {
	ns, err := h.b.ListNodes(ctx, &ginv1.ListNodesRequest{})
	if err != nil {
		return scene{}, err
	}
	g, f, err := h.b.Topology(ctx)
	if err != nil {
		return scene{}, err
	}
	sc := scene{nodes: ns.GetNodes(), g: g, fabric: f}
	if vs, ok := h.b.(VerdictSource); ok {
		nv, err := vs.NodeVerdicts(ctx)
		if err != nil {
			return scene{}, err
		}
		sc.verdicts = healthVerdicts(nv)
		sc.source = "Verdicts of the health check (ginctl check)."
	} else {
		sc.verdicts = draw.FromSummaries(sc.nodes)
		sc.source = "Verdict from the inventory (node state, NVLinks and compute ports up); the health check's verdicts replace it when they exist."
	}
	return sc, nil
}

// expandSet reads ?expand= (repeatable; "all" for every group).
func expandSet(q url.Values) (map[string]bool, bool, error) {
	vs := q["expand"]
	if len(vs) > maxExpandGroups {
		return nil, false, fmt.Errorf("expand: at most %d groups", maxExpandGroups)
	}
	set := map[string]bool{}
	for _, v := range vs {
		if v == "all" {
			return nil, true, nil
		}
		if len(v) > 256 || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return nil, false, fmt.Errorf("expand: %q is not a leaf switch", v)
		}
		set[v] = true
	}
	return set, false, nil
}

// fabricSVG draws the fabric with links relative to page (with its query
// kept: a job page expands within itself), highlight's nodes ringed and
// marked's drawn as suspects (draw.FabricInput).
func fabricSVG(sc scene, expanded map[string]bool, all bool, highlight map[string]bool, marked map[string]string, base url.Values) ([]byte, error) {
	href := func(group string) string {
		q := url.Values{}
		for k, v := range base {
			if k != "expand" {
				q[k] = v
			}
		}
		anchor := ""
		if group != "" {
			q.Set("expand", group)
			anchor = "#" + draw.GroupAnchor(group)
		}
		if len(q) == 0 {
			return "?" + anchor
		}
		return "?" + q.Encode() + anchor
	}
	var b bytes.Buffer
	err := draw.Fabric(&b, draw.FabricInput{
		Nodes: sc.nodes, Graph: sc.g, Fabric: sc.fabric, Verdicts: sc.verdicts,
		Expanded: expanded, ExpandAll: all, Highlight: highlight, Marked: marked,
		NodeHref:   func(n string) string { return "node?name=" + url.QueryEscape(n) },
		ExpandHref: href,
	})
	return b.Bytes(), err
}

type pageHead struct {
	Title  string
	Script bool
}

// index is /ui/: the fabric drawn by the server, and the tables app.js fills.
func (h *handler) index(w http.ResponseWriter, r *http.Request) {
	expanded, all, err := expandSet(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	sc, err := h.scene(ctx)
	if err != nil {
		h.fail(w, err)
		return
	}
	svg, err := fabricSVG(sc, expanded, all, nil, nil, r.URL.Query())
	if err != nil {
		h.fail(w, err)
		return
	}
	h.render(w, "index.html", struct {
		pageHead
		Fabric    template.HTML
		Collapsed bool
	}{pageHead{"GIN cluster topology", true}, svgHTML(svg), len(sc.nodes) > draw.CollapseAbove && !all})
}

// node is /ui/node?name=N: a node's pictures.
func (h *handler) nodePage(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	if err := inventory.ValidNodeName(name); err != nil {
		http.Error(w, "name: node name "+err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	node, err := h.b.GetNode(ctx, &ginv1.GetNodeRequest{Name: name})
	if err != nil {
		h.fail(w, err)
		return
	}
	mx, err := h.b.GetMatrix(ctx, &ginv1.GetMatrixRequest{Nodes: name, IncludeNics: true})
	if err != nil {
		h.fail(w, err)
		return
	}
	plans, err := h.b.PinnedPlans(ctx)
	if err != nil {
		h.fail(w, err)
		return
	}
	inv := node.GetInventory()
	var nv, mb, hb, pb bytes.Buffer
	for _, d := range []struct {
		b  *bytes.Buffer
		fn func() error
	}{
		{&nv, func() error { return draw.NVLinks(&nv, inv) }},
		{&mb, func() error { return draw.Matrix(&mb, mx) }},
		{&hb, func() error { return draw.HCAs(&hb, inv) }},
		{&pb, func() error { return draw.PCIeTree(&pb, inv) }},
	} {
		if err := d.fn(); err != nil {
			// One picture refused (a bound): say so in its place.
			d.b.Reset()
			fmt.Fprintf(d.b, `<p class="note">%s</p>`, template.HTMLEscapeString(err.Error()))
		}
	}
	s := node.GetSummary()
	findings := draw.InventoryFindings(inv)
	source := "Findings from the inventory (links down, ports not active, error-counter verdicts); the health check's findings replace them when they exist."
	if vs, ok := h.b.(VerdictSource); ok {
		nv, err := vs.NodeVerdicts(ctx)
		if err != nil {
			h.fail(w, err)
			return
		}
		if vd, ok := healthVerdicts(nv).Verdict(name); ok {
			findings, source = vd.Findings, "Findings of the health check (ginctl check --nodes "+name+")."
		}
	}
	if _, health := h.b.(VerdictSource); !health && s.GetState() != ginv1.NodeState_NODE_STATE_UP {
		findings = append([]draw.Finding{{Level: draw.LevelWarn, Text: fmt.Sprintf("node %s: %s", strings.TrimPrefix(strings.ToLower(s.GetState().String()), "node_state_"), s.GetStateReason())}}, findings...)
	}
	var jobs []string
	for _, p := range plans {
		if slices.Contains(p.GetNodes(), name) {
			jobs = append(jobs, p.GetJobId())
		}
	}
	leaf := s.GetLeafSwitch()
	summary := fmt.Sprintf("%s: %s, %d × %s, %s; NVLinks %d/%d up, compute ports %d/%d active; leaf %s",
		name, strings.TrimPrefix(strings.ToLower(s.GetState().String()), "node_state_"), s.GetGpuCount(), orDash(s.GetGpuModel()), orDash(s.GetSystemModel()),
		s.GetNvlinksUp(), s.GetNvlinksTotal(), s.GetComputePortsUp(), s.GetComputePortsTotal(), orDash(leaf))
	if d := s.GetNvlinkDomain(); d != "" {
		summary += "; NVLink domain " + d
	}
	anchor := "fabric-section"
	if g, _, err := h.b.Topology(ctx); err == nil && g != nil {
		if k, ok := g.NodeLeaf(name); ok {
			anchor = draw.GroupAnchor(k)
		}
	}
	h.render(w, "node.html", struct {
		pageHead
		Summary, Anchor, VerdictSource string
		Findings                       []draw.Finding
		Jobs                           []string
		NVLinks, Matrix, HCAs, PCIe    template.HTML
	}{pageHead{"Node " + name, false}, summary, anchor, source, findings, jobs,
		svgHTML(nv.Bytes()), svgHTML(mb.Bytes()), svgHTML(hb.Bytes()), svgHTML(pb.Bytes())})
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// parseGPUs reads a positive count no larger than limit.
func parseGPUs(s string, def, limit int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > limit {
		return 0, fmt.Errorf("gpus: %q is not a count from 1 to %d", s, limit)
	}
	return n, nil
}
