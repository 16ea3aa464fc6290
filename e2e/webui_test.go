package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// needChromium returns Debian's chromium: skipped when missing, failed when
// REQUIRE_BROWSER=1 (CI installs it and sets it) or CI=true.
func needChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("REQUIRE_BROWSER") == "1" {
		t.Fatal("chromium is required (REQUIRE_BROWSER=1): apt-get install chromium fonts-liberation")
	}
	ciSkipf(t, "chromium not installed (apt-get install chromium fonts-liberation)")
	return ""
}

// TestWebViewInChromium opens the master's /ui/ of a dev cluster in
// headless Chromium (driven by chromedp): the page shows the four nodes up
// under their leaf switches, the Raft member and a pinned plan, a click on a node shows its
// GPUs' NVLink health and its topo -m (NV18 between GPUs), and the browser
// logs no console error, exception or blocked resource (the page runs under
// its CSP). The screenshot is kept in $GIN_ARTIFACT_DIR (CI) or the test's
// temp dir.
func TestWebViewInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries and a browser")
	}
	needChromium(t)
	bin := binaries(t)
	addr, _, stderr := startDev(t, bin, "--http-bind", "127.0.0.1:0")
	if out, err := runTool(t, bin, "ginctl", "--master", addr, "plan", "--job", "4242", "--nodes", "node[001-002]"); err != nil {
		t.Fatalf("ginctl plan: %v\n%s", err, out)
	}
	httpAddr := devHTTPAddr(t, stderr)
	br := newBrowser(t, 1280, 1000)
	step, text := br.step, br.text

	url := "http://" + httpAddr + "/ui/"
	step("open "+url, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="true"]`)))
	if s := text("#status"); !strings.Contains(s, "4 nodes, 1 master,") {
		t.Errorf("status line %q, want 4 nodes and 1 master", s)
	}
	leaves := text("#leaves")
	for _, n := range []string{"node001", "node002", "node003", "node004"} {
		if !strings.Contains(leaves, n) {
			t.Errorf("the page does not show %s:\n%s", n, leaves)
		}
	}
	if !strings.Contains(leaves, "up") || !strings.Contains(leaves, "leaf ") {
		t.Errorf("nodes without state or leaf:\n%s", leaves)
	}
	if s := text("#members"); !strings.Contains(s, "dev-master") || !strings.Contains(s, "leader") {
		t.Errorf("Raft members table %q, want the dev master as leader", s)
	}
	// The leader answered: it says it reaches itself, last heard 0 s ago.
	if got := evalIn[string](br, `[...document.querySelectorAll("#members tbody tr td")].slice(5).map(c => c.textContent).join("|")`); got != "yes|0.0 s" {
		t.Errorf("the dev master's reachable and last contact cells %q, want yes|0.0 s", got)
	}
	step("open the plan", chromedp.Click(chromedp.CSS(`details[data-job="4242"] summary`)),
		chromedp.WaitVisible(chromedp.CSS(`details[data-job="4242"] td`)))
	if s := text("#plans"); !strings.Contains(s, "job 4242: 2 nodes (node001, node002)") || !strings.Contains(s, "all_reduce") ||
		!strings.Contains(s, "reason") {
		t.Errorf("pinned plans %q, want job 4242 on node001, node002 with its rules and reasons", s)
	}
	if s := text("#plans-note"); s != "1 plan pinned." {
		t.Errorf("plans note %q", s)
	}
	step("open node001", chromedp.Click(chromedp.CSS(`button[data-node="node001"]`)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-node="node001"] #matrix td`)))
	if s := text("#gpus"); !strings.Contains(s, "GPU7") || !strings.Contains(s, "18/18") {
		t.Errorf("node001 GPU table %q, want GPU0..GPU7 with 18/18 NVLinks up", s)
	}
	if s := text("#matrix"); !strings.Contains(s, "NV18") || !strings.Contains(s, "X") {
		t.Errorf("node001 topo -m %q, want NV18 between GPUs", s)
	}

	br.screenshot("webui-node001.png")
	br.checkProblems()
}

var httpAddrRE = regexp.MustCompile(`msg="serving /metrics and /healthz".* addr=(\S+)`)

// devHTTPAddr waits for the dev master to log its --http-bind address.
func devHTTPAddr(t *testing.T, stderr *lockedBuffer) string {
	t.Helper()
	var addr string
	waitFor(t, "the dev master's HTTP address", 30*time.Second, func() bool {
		m := httpAddrRE.FindStringSubmatch(stderr.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})
	return addr
}
