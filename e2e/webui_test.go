package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
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
	browser := needChromium(t)
	bin := binaries(t)
	addr, _, stderr := startDev(t, bin, "--http-bind", "127.0.0.1:0")
	if out, err := runTool(t, bin, "ginctl", "--master", addr, "plan", "--job", "4242", "--nodes", "node[001-002]"); err != nil {
		t.Fatalf("ginctl plan: %v\n%s", err, out)
	}
	re := regexp.MustCompile(`msg="serving /metrics and /healthz".* addr=(\S+)`)
	var httpAddr string
	waitFor(t, "the dev master's HTTP address", 30*time.Second, func() bool {
		m := re.FindStringSubmatch(stderr.String())
		if m != nil {
			httpAddr = m[1]
		}
		return m != nil
	})

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1280, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancel()
	// Start the browser without a deadline (a timeout on the first call
	// would kill it).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	var mu sync.Mutex
	var problems []string
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value))
				}
				problems = append(problems, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			problems = append(problems, "exception: "+msg)
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError || ev.Entry.Level == cdplog.EntryLevelWarning {
				problems = append(problems, fmt.Sprintf("log %s/%s: %s %s", ev.Entry.Source, ev.Entry.Level, ev.Entry.Text, ev.Entry.URL))
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
		defer scancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
		defer scancel()
		s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}

	url := "http://" + httpAddr + "/ui/"
	step("open "+url, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="true"]`)))
	if s := text("#status"); !strings.Contains(s, "4 nodes, 1 masters") {
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
	step("open the plan", chromedp.Click(chromedp.CSS(`details[data-job="4242"] summary`)),
		chromedp.WaitVisible(chromedp.CSS(`details[data-job="4242"] td`)))
	if s := text("#plans"); !strings.Contains(s, "job 4242: 2 nodes (node001, node002)") || !strings.Contains(s, "all_reduce") ||
		!strings.Contains(s, "reason") {
		t.Errorf("pinned plans %q, want job 4242 on node001, node002 with its rules and reasons", s)
	}
	if s := text("#plans-note"); s != "1 plans pinned." {
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

	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	scancel()
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("GIN_ARTIFACT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "webui-node001.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))

	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("browser: %s", p)
	}
}
