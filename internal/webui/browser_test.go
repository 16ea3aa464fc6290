package webui

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestMembersTableInChromium renders the Raft members table in headless
// Chromium (chromedp) from the leader's answer and from a follower's: the
// REACHABLE and LAST CONTACT columns as ginctl members shows them, a
// master the leader does not hear from marked UNREACHABLE, and "-" where
// the answer does not say (a follower's, or never heard from). It skips
// without Chromium unless REQUIRE_BROWSER=1.
func TestMembersTableInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a browser")
	}
	exe, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("REQUIRE_BROWSER") == "1" {
			t.Fatal("chromium is required (REQUIRE_BROWSER=1): apt-get install chromium fonts-liberation")
		}
		t.Skip("chromium not installed (apt-get install chromium fonts-liberation)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	rows := func(follower bool) []string {
		t.Helper()
		mux := http.NewServeMux()
		Register(mux, &fakeBackend{follower: follower}, slog.New(slog.DiscardHandler))
		srv := httptest.NewServer(mux)
		defer srv.Close()
		ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
		defer cancel()
		var text []string
		err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="true"]`)))
		if err == nil {
			text, err = chromedp.Run(ctx, chromedp.Evaluate[[]string](
				`[...document.querySelectorAll("#members tbody tr")].map(r => [...r.cells].map(c => c.textContent + (c.className ? "[" + c.className + "]" : "")).join("|"))`))
		}
		if err != nil {
			t.Fatalf("load the page: %v", err)
		}
		return text
	}
	tests := []struct {
		name     string
		follower bool
		want     []string
	}{
		{"the leader's answer", false, []string{
			"m1||—|leader|yes|yes|0.0 s",
			"m2||—|follower|yes|yes|0.8 s",
			"m3||—|follower|yes|UNREACHABLE[unreachable]|12.3 s",
			"m4||—|follower|yes|UNREACHABLE[unreachable]|-",
		}},
		{"a follower's answer", true, []string{
			"m1||—|leader|yes|-|-",
			"m2||—|follower|yes|-|-",
			"m3||—|follower|yes|-|-",
			"m4||—|follower|yes|-|-",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := rows(tc.follower)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("members table:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
