package e2e

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

const dashboardFile = "../deploy/grafana/gin.json"

type gPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ X, Y, W, H int } `json:"gridPos"`
	Targets []struct {
		RefID      string `json:"refId"`
		Expr       string `json:"expr"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
	Panels []gPanel `json:"panels"`
}

type gDashboard struct {
	UID           string   `json:"uid"`
	Title         string   `json:"title"`
	SchemaVersion int      `json:"schemaVersion"`
	Panels        []gPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

func loadDashboard(t *testing.T) (gDashboard, []byte) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d gDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d, b
}

func allPanels(ps []gPanel) []gPanel {
	var out []gPanel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// grafanaMacros replaces Grafana's variables the way Grafana would for one
// dashboard view, so the expression can go to Prometheus as it is.
var grafanaMacros = strings.NewReplacer(
	"$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h",
	`"$node"`, `".*"`, "${node}", ".*", "$node", ".*")

// dashboardQueries returns every panel's expression, macros replaced.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	d, _ := loadDashboard(t)
	out := map[string]string{}
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			q := grafanaMacros.Replace(tg.Expr)
			if strings.Contains(q, "$") {
				t.Fatalf("panel %q: %q keeps a variable this test does not know", p.Title, tg.Expr)
			}
			out[p.Title+" / "+tg.RefID] = q
		}
	}
	return out
}

// TestGrafanaDashboardStructure checks what Grafana's provisioning relies
// on, without a Grafana: a stable uid, unique panel ids, every datasource
// the ${datasource} variable (file provisioning does not fill
// ${DS_PROMETHEUS}), panels inside the 24-column grid, every panel with a
// query.
func TestGrafanaDashboardStructure(t *testing.T) {
	d, raw := loadDashboard(t)
	if d.UID == "" || len(d.UID) > 40 || !regexp.MustCompile(`^[a-zA-Z0-9_-]+$`).MatchString(d.UID) {
		t.Errorf("uid %q: want 1..40 of [a-zA-Z0-9_-]", d.UID)
	}
	if d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("title %q, schemaVersion %d: want a title and schemaVersion >= 36 (object datasource refs)", d.Title, d.SchemaVersion)
	}
	if strings.Contains(string(raw), "DS_PROMETHEUS") {
		t.Error("the dashboard uses ${DS_PROMETHEUS}, which file provisioning leaves literal; use ${datasource}")
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["node"] != "query" {
		t.Errorf("template variables %v: want datasource (datasource) and node (query)", vars)
	}
	ids := map[int]string{}
	queries := 0
	for _, p := range allPanels(d.Panels) {
		if prev, dup := ids[p.ID]; dup || p.ID <= 0 {
			t.Errorf("panel %q: id %d (also %q)", p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		if p.GridPos.X < 0 || p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H <= 0 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || p.Datasource.Type != "prometheus" {
			t.Errorf("panel %q: datasource %+v, want prometheus ${datasource}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" {
				t.Errorf("panel %q: target %+v without expr or refId", p.Title, tg)
			}
			if tg.Datasource != nil && tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: target datasource %q", p.Title, tg.Datasource.UID)
			}
			queries++
		}
	}
	if queries < 10 {
		t.Errorf("%d queries: the dashboard lost its panels?", queries)
	}
	if n := len(dashboardQueries(t)); n != queries {
		t.Errorf("dashboardQueries found %d of %d queries", n, queries)
	}
}
