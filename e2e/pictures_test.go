package e2e

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestPicturesInChromium opens the drawn web view of a dev cluster whose
// node002 has GPU3's NVLink 7 down (--dev-fault node002/GPU3/nvlink7=down)
// in headless Chromium: the fabric has one data-node element per node and
// marks node002 (and only it) as the health check fails it; a click on node002 opens its page, whose
// GPU × NVLink grid marks GPU3's link 7 down (and no other) and whose
// findings name it; the job's page highlights its two nodes and charts the
// plan with GIN's choices; the estimate page charts the placement classes.
// The fabric and node pictures are in the HTML the server sends (no
// JavaScript needed), the browser logs no console error, exception or
// blocked resource, and each page's screenshot is kept in GIN_ARTIFACT_DIR.
func TestPicturesInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries and a browser")
	}
	needChromium(t)
	bin := binaries(t)
	addr, _, stderr := startDev(t, bin, "--http-bind", "127.0.0.1:0", "--dev-fault", "node002/GPU3/nvlink7=down")
	if out, err := runTool(t, bin, "ginctl", "--master", addr, "plan", "--job", "4242", "--nodes", "node[001-002]"); err != nil {
		t.Fatalf("ginctl plan: %v\n%s", err, out)
	}
	base := "http://" + devHTTPAddr(t, stderr) + "/ui/"

	// Server-rendered: the pictures are in the HTML itself.
	for page, want := range map[string]string{"": `data-node="node004"`, "node?name=node002": `data-link="node002/GPU3/nvlink7"`} {
		resp, err := http.Get(base + page)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("GET /ui/%s = %d without %s: the picture is not drawn by the server", page, resp.StatusCode, want)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Fatalf("GET /ui/%s without the CSP (%q)", page, csp)
		}
	}

	br := newBrowser(t, 1280, 900)
	br.step("open the fabric", chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="true"]`)),
		chromedp.WaitVisible(chromedp.CSS(`svg.fabric`)))
	if n := evalIn[int](br, `document.querySelectorAll("svg.fabric [data-node]").length`); n != 4 {
		t.Errorf("the fabric draws %d data-node elements, want one per node (4)", n)
	}
	states := evalIn[string](br, `[...document.querySelectorAll("svg.fabric [data-node]")].map(e => e.dataset.node + "=" + e.dataset.state).sort().join(" ")`)
	if want := "node001=pass node002=fail node003=pass node004=pass"; states != want {
		t.Errorf("fabric node states %q, want %q (node002 marked)", states, want)
	}
	if s := evalIn[string](br, `document.querySelector("svg.fabric").textContent`); !strings.Contains(s, "4 nodes: 3 pass, 1 fail") {
		t.Errorf("fabric headline %q, want 4 nodes: 3 pass, 1 fail", s)
	}
	br.screenshot("webui-fabric.png")

	br.step("click node002 on the fabric", chromedp.Click(chromedp.CSS(`svg.fabric [data-node="node002"]`)),
		chromedp.WaitVisible(chromedp.CSS(`svg.nvlinks`)))
	if loc := evalIn[string](br, `location.search`); loc != "?name=node002" {
		t.Fatalf("the click opened %q, want node002's page", loc)
	}
	if s := evalIn[string](br, `document.querySelector('svg.nvlinks [data-link="node002/GPU3/nvlink7"]').dataset.state`); s != "down" {
		t.Errorf("GPU3 NVLink 7 drawn %q, want down", s)
	}
	down := evalIn[string](br, `[...document.querySelectorAll('svg.nvlinks [data-link][data-state="down"]')].map(e => e.dataset.link).join(" ")`)
	if down != "node002/GPU3/nvlink7" {
		t.Errorf("NVLinks drawn down: %q, want node002/GPU3/nvlink7 only", down)
	}
	if n := evalIn[int](br, `document.querySelectorAll("svg.nvlinks [data-link]").length`); n != 8*18 {
		t.Errorf("%d NVLinks drawn, want 8 × 18", n)
	}
	if s := br.text(`#findings`); !strings.Contains(s, "GPU3/nvlink7") || !strings.Contains(s, "nvlink-down") || !strings.Contains(s, "Fix:") {
		t.Errorf("findings %q, want the health check's nvlink-down on GPU3/nvlink7 with its fix", s)
	}
	if s := evalIn[string](br, `document.querySelector("svg.matrix").textContent`); !strings.Contains(s, "NV17") || !strings.Contains(s, "NV18") {
		t.Errorf("topo -m picture %q, want NV17 (GPU3, one link down) and NV18", s)
	}
	if n := evalIn[int](br, `document.querySelectorAll("svg.hcas [data-link]").length`); n < 8 {
		t.Errorf("%d HCA ports drawn, want the DGX H100's compute and storage ports", n)
	}
	br.screenshot("webui-node002.png")

	br.step("open job 4242 from node002", chromedp.Click(chromedp.CSS(`#jobs a[href="job?id=4242"]`)),
		chromedp.WaitVisible(chromedp.CSS(`svg.chart`)))
	job := evalIn[string](br, `[...document.querySelectorAll("svg.fabric [data-node].job")].map(e => e.dataset.node).sort().join(" ")`)
	if job != "node001 node002" {
		t.Errorf("job 4242 highlights %q, want node001 node002", job)
	}
	if n := evalIn[int](br, `document.querySelectorAll("svg.chart [data-choice]").length`); n == 0 {
		t.Error("the plan chart marks none of GIN's choices")
	}
	series := evalIn[string](br, `[...document.querySelectorAll("svg.chart [data-series]")].map(e => e.dataset.series).join(" ")`)
	if !strings.Contains(series, "ring") || !strings.Contains(series, "tree") {
		t.Errorf("plan chart series %q, want ring and tree among them", series)
	}
	br.screenshot("webui-job4242.png")

	br.step("open the estimate", chromedp.Navigate(base+"estimate?gpus=16"), chromedp.WaitVisible(chromedp.CSS(`svg.chart`)))
	classes := evalIn[string](br, `[...document.querySelectorAll("svg.chart [data-series]")].map(e => e.dataset.series).join(" ")`)
	if ok, _ := regexp.MatchString(`nvlink-domain.*one-leaf.*spine`, classes); !ok {
		t.Errorf("estimate chart series %q, want the placement classes", classes)
	}
	br.screenshot("webui-estimate.png")
	br.checkProblems()
}
