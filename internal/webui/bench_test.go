package webui

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gin-topology/gin/internal/discovery/sim"
)

// bench10k is the 10,000-node cluster of the benchmarks: DGX H100 nodes in
// 313 leaf groups of about 32 (8 rail leaves each) under 64 spines, 20 of
// them with an NVLink down, 5 DOWN, and a job on 64 of them.
func bench10k(b *testing.B) *simBackend {
	b.Helper()
	const n = 10000
	fault := func(c *sim.Cluster) error {
		for i := 0; i < 20; i++ {
			if err := c.Sources[i*487+3].SetNVLinkState(i%8, i%18, false); err != nil {
				return err
			}
		}
		return nil
	}
	var down, job []string
	for i := 0; i < 5; i++ {
		down = append(down, fmt.Sprintf("node%03d", 1000+i*1777))
	}
	for i := 0; i < 64; i++ {
		job = append(job, fmt.Sprintf("node%03d", 4000+i))
	}
	return newSimBackend(b, "dgx-h100", n, sim.FabricSpec{LeafGroups: 313, Spines: 64, Oversubscription: 1}, fault, down,
		map[string][]string{"bench": job})
}

// BenchmarkFabric10kServer is the server's side of /ui/ at 10,000 nodes:
// ListNodes' summaries to the HTML with the fabric drawn (collapsed, the
// default above draw.CollapseAbove nodes, and every group expanded).
func BenchmarkFabric10kServer(b *testing.B) {
	be := bench10k(b)
	mux := http.NewServeMux()
	Register(mux, be, slog.New(slog.DiscardHandler))
	for _, v := range []struct{ name, path string }{{"collapsed", "/ui/"}, {"expanded", "/ui/?expand=all"}} {
		b.Run(v.name, func(b *testing.B) {
			var size int
			for b.Loop() {
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, httptest.NewRequest("GET", v.path, nil))
				if rec.Code != 200 {
					b.Fatalf("GET %s = %d", v.path, rec.Code)
				}
				size = rec.Body.Len()
			}
			b.ReportMetric(float64(size), "page-bytes")
		})
	}
}

// BenchmarkFabric10kInChromium loads /ui/ of a 10,000-node cluster in
// headless Chromium (Debian's, via chromedp) and reports, as medians over
// the iterations: ms-to-response, from navigation start to the HTML's last
// byte (the server drawing it included); ms-to-frame, to the first frame
// painted after the load event (the server-drawn fabric on screen); and
// ms-to-ready, to the moment app.js has filled its tables (past 512 nodes
// it tables no node, only the Raft members and plans); page-bytes is the HTML's size (the
// assets are a few kB more). Collapsed is the default; expanded draws
// every node (?expand=all); baseline-blank is an empty page loaded the same
// way, so the others can be read as ratios to it on a loaded machine.
func BenchmarkFabric10kInChromium(b *testing.B) {
	exe, err := exec.LookPath("chromium")
	if err != nil {
		b.Skip("chromium not installed (apt-get install chromium fonts-liberation)")
	}
	be := bench10k(b)
	mux := http.NewServeMux()
	Register(mux, be, slog.New(slog.DiscardHandler))
	// The baseline: a page with nothing but an empty picture, loaded the
	// same way in the same run (what the browser and DevTools cost on this
	// machine under its load).
	mux.HandleFunc("GET /blank", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, `<!doctype html><html><head><link rel="icon" href="data:,"></head>`+
			`<body data-ready="true"><svg class="fabric" width="10" height="10"></svg></body></html>`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1280, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(ctx); err != nil {
		b.Fatalf("start chromium: %v", err)
	}
	for _, v := range []struct{ name, path string }{{"baseline-blank", "/blank"}, {"collapsed", "/ui/"}, {"expanded", "/ui/?expand=all"}} {
		b.Run(v.name, func(b *testing.B) {
			resp, err := http.Get(srv.URL + v.path)
			if err != nil {
				b.Fatal(err)
			}
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var response, frame, ready []float64
			for b.Loop() {
				sctx, scancel := context.WithTimeout(ctx, 120*time.Second)
				if err := chromedp.Do(sctx, chromedp.Navigate(srv.URL+v.path), chromedp.WaitVisible(chromedp.CSS(`svg.fabric`))); err != nil {
					scancel()
					b.Fatalf("load %s: %v", v.path, err)
				}
				f, err := chromedp.Run(sctx, chromedp.Evaluate[float64](
					`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))))`, chromedp.EvalAwaitPromise))
				if err != nil {
					scancel()
					b.Fatal(err)
				}
				rs, err := chromedp.Run(sctx, chromedp.Evaluate[float64](`performance.getEntriesByType("navigation")[0].responseEnd`))
				if err != nil {
					scancel()
					b.Fatal(err)
				}
				response = append(response, rs)
				if err := chromedp.Do(sctx, chromedp.WaitVisible(chromedp.CSS(`body[data-ready="true"]`))); err != nil {
					scancel()
					b.Fatal(err)
				}
				r, err := chromedp.Run(sctx, chromedp.Evaluate[float64](`performance.now()`))
				scancel()
				if err != nil {
					b.Fatal(err)
				}
				frame, ready = append(frame, f), append(ready, r)
			}
			b.ReportMetric(median(response), "ms-to-response")
			b.ReportMetric(median(frame), "ms-to-frame")
			b.ReportMetric(median(ready), "ms-to-ready")
			b.ReportMetric(float64(len(page)), "page-bytes")
		})
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
