package master

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// uiGet GETs path from the web view at base ("http://host:port").
func uiGet(t *testing.T, base, path string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// reportSlowJob reports six windows of job 77 (liveWindows, rank 1's sends
// slow) to the leader's detector, evaluating after each: a confirmed
// slow-link at node001 mlx5_3.
func reportSlowJob(t *testing.T, s *Server) {
	t.Helper()
	ctx := context.Background()
	for i := range 6 {
		for node, ws := range liveWindows(i, 1) {
			if _, err := s.liveJobs.ReportRanks(ctx, &ginv1.ReportRanksRequest{NodeName: node, Windows: ws}); err != nil {
				t.Fatalf("ReportRanks %s: %v", node, err)
			}
		}
		s.liveJobs.det.Evaluate(time.Now())
	}
}

// The page of a live job with no plan pinned (job 77): what the leader's
// detector holds, its suspect marked on the fabric.
var liveJobPage = []string{
	"<h2>While it runs</h2>",
	"4 ranks reporting (0 missing), last report ",
	`<tr data-suspect="slow-link" class="confirmed">`,
	`<a href="node?name=node001">node001</a>`,
	"<td>mlx5_3",
	"<td>yes</td>",
	`suspect" data-node="node001"`,
	`data-suspect="slow-link mlx5_3"`,
	`id="no-plan"`,
}

// On the leader the job page reads the live state from its own detector;
// a job neither live nor pinned is still not found.
func TestWebUILiveOnLeader(t *testing.T) {
	s := startServerWith(t, func(c *Config) { c.HTTPBind = "127.0.0.1:0" })
	registerNodes(t, s, "dgx-h100", "node001", "node002")
	reportSlowJob(t, s)
	base := "http://" + s.HTTPAddr()
	code, body := uiGet(t, base, "/ui/job?id=77")
	if code != 200 {
		t.Fatalf("GET /ui/job?id=77 = %d %.300s", code, body)
	}
	for _, want := range liveJobPage {
		if !strings.Contains(body, want) {
			t.Errorf("job page lacks %q", want)
		}
	}
	// node002 runs ranks of the job but is no suspect: ringed, not marked.
	if !strings.Contains(body, `job" data-node="node002"`) {
		t.Error("node002 not drawn as the job's node")
	}
	if code, body := uiGet(t, base, "/ui/job?id=78"); code != 404 || !strings.Contains(body, "no plan pinned") {
		t.Errorf("GET /ui/job?id=78 = %d %q, want 404", code, body)
	}
}

// A follower asks the leader for the live state (it holds none itself);
// without a leader to ask, the page says the state is unavailable.
func TestWebUILiveOnFollower(t *testing.T) {
	ms := startClusterWith(t, 3, func(c *Config) { c.HTTPBind = "127.0.0.1:0" })
	var leader *member
	waitUntil(t, "a leader", func() bool { leader = leaderOf(ms); return leader != nil })
	registerNodes(t, leader.s, "dgx-h100", "node001", "node002")
	reportSlowJob(t, leader.s)
	f := followerOf(ms, leader)
	if _, ok := f.s.liveJobs.det.Job("77", time.Now()); ok {
		t.Fatal("the follower holds live state of its own")
	}
	base := "http://" + f.s.HTTPAddr()
	var body string
	waitUntil(t, "the follower's job page shows the leader's suspect", func() bool {
		var code int
		code, body = uiGet(t, base, "/ui/job?id=77")
		return code == 200 && strings.Contains(body, `data-node="node002"`) && strings.Contains(body, `data-suspect="slow-link mlx5_3"`)
	})
	for _, want := range liveJobPage {
		if !strings.Contains(body, want) {
			t.Errorf("follower's job page lacks %q", want)
		}
	}
	if code, _ := uiGet(t, base, "/ui/job?id=78"); code != 404 {
		t.Errorf("GET /ui/job?id=78 on the follower = %d, want 404 (the leader answered NOT_FOUND)", code)
	}

	// No leader known: an error the page shows.
	w := webLive{live: f.s.liveJobs, leader: func() (*grpc.ClientConn, error) { return nil, errNoLeader }}
	resp, err := w.JobLive(context.Background(), "77")
	if resp != nil || err == nil || !strings.Contains(err.Error(), "no leader known") {
		t.Fatalf("JobLive without a leader = %v, %v; want an error naming it", resp, err)
	}
}
