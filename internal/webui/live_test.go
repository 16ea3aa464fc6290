package webui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
)

// liveAnswer is a GetJobLive answer: ranks on nodes, the given suspects.
func liveAnswer(job string, nodes []string, missing uint32, sus ...*ginv1.Suspect) *ginv1.GetJobLiveResponse {
	at := timestamppb.New(time.Date(2026, 3, 4, 14, 2, 31, 0, time.UTC))
	r := &ginv1.GetJobLiveResponse{JobId: job, LastReport: at, MissingRanks: missing, Suspects: sus}
	for i, n := range nodes {
		r.Ranks = append(r.Ranks, &ginv1.LiveRank{CommId: 9, Rank: uint32(i), Node: n, LastReport: at})
	}
	return r
}

func slowLink(node, nic string, confirmed bool, evidence ...string) *ginv1.Suspect {
	return &ginv1.Suspect{Kind: "slow-link", Node: node, Component: nic, Nic: nic, SwitchPort: "leaf07 (0x1), from port 1 of the NIC",
		Slowdown: 1.523, Since: timestamppb.New(time.Date(2026, 3, 4, 14, 2, 9, 0, time.UTC)), Confirmed: confirmed, Evidence: evidence}
}

func TestJobPageLive(t *testing.T) {
	ev := []string{"rank 5 (n1 gpu1 mlx5_3) sends at 1.52x the network time per byte of the job's median rank",
		"rank 7 <script>alert(1)</script> receiving from it waits 1.49x the median receive", "third line"}
	b := &fakeBackend{live: map[string]*ginv1.GetJobLiveResponse{
		// j0003 has a plan pinned (fakeBackend's plans are j0000…j0204).
		"j0003": liveAnswer("j0003", []string{"n1", "n1", "n1"}, 1, slowLink("n1", "mlx5_3", true, ev...)),
		// running has none.
		"running": liveAnswer("running", []string{"n1"}, 0, &ginv1.Suspect{Kind: "hang", Node: "n1", Component: "gpu0", Slowdown: 12}),
		"calm":    liveAnswer("calm", []string{"n1", "n1"}, 0),
	}}
	code, body := get(t, b, "/ui/job?id=j0003")
	if code != 200 {
		t.Fatalf("job page = %d %.300s", code, body)
	}
	for _, want := range []string{
		"<h2>While it runs</h2>",
		"3 ranks reporting (1 missing), last report 14:02:31Z",
		`<table class="suspects" id="suspects">`,
		`<tr data-suspect="slow-link" class="confirmed">`,
		`<a href="node?name=n1">n1</a>`,
		"<td>mlx5_3<br>", "leaf07 (0x1), from port 1 of the NIC",
		"<td>1.52×</td>", "<td>14:02:09Z</td>", "<td>yes</td>",
		"<td>rank 5 (n1 gpu1 mlx5_3) sends at 1.52x",
		`<details class="evidence"><summary>2 more lines</summary>`,
		"rank 7 &lt;script&gt;alert(1)&lt;/script&gt; receiving",
		// On the fabric: the job's node ringed, marked a suspect.
		`class="n down job suspect" data-node="n1"`, `data-suspect="slow-link mlx5_3"`, `class="sus"`,
		// The plan is still charted.
		"The plan, predicted", "Bus bandwidth GIN's cost model predicts",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("job page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script>alert") {
		t.Error("evidence not escaped")
	}
	if strings.Index(body, "While it runs") > strings.Index(body, "The plan, predicted") {
		t.Error("the live section is not above the plan")
	}

	// Live without a plan: drawn, its nodes ringed and marked.
	code, body = get(t, b, "/ui/job?id=running")
	if code != 200 {
		t.Fatalf("live job without a plan = %d %.300s", code, body)
	}
	for _, want := range []string{"job running: no plan pinned; its ranks run on 1 nodes (n1)", "1 rank reporting (0 missing)",
		`<tr data-suspect="hang">`, "<td>gpu0</td>", "<td>12.00×</td>", "<td>—</td>", "<td>no</td>",
		`class="n down job suspect" data-node="n1"`, `data-suspect="hang gpu0"`, `id="no-plan"`} {
		if !strings.Contains(body, want) {
			t.Errorf("live job without a plan lacks %q", want)
		}
	}
	if strings.Contains(body, "Bus bandwidth GIN's cost model predicts") {
		t.Error("plan charted without a plan")
	}

	// Live, no suspect: no table, no mark.
	_, body = get(t, b, "/ui/job?id=calm")
	if !strings.Contains(body, "No suspect") || strings.Contains(body, `id="suspects"`) || strings.Contains(body, "suspect\" data-node") ||
		!strings.Contains(body, `class="n down job" data-node="n1"`) {
		t.Errorf("calm job: %.2000s", body)
	}

	// Not live: no section.
	if _, body = get(t, b, "/ui/job?id=j0004"); strings.Contains(body, "While it runs") {
		t.Error("live section on a job that is not live")
	}
	// Neither pinned nor live.
	if code, body = get(t, b, "/ui/job?id=gone"); code != 404 || !strings.Contains(body, "no plan pinned") {
		t.Errorf("unknown job = %d %q", code, body)
	}
}

// At most MaxSuspectRows suspects are tabled; the page says how many more.
func TestJobPageLiveBounded(t *testing.T) {
	var sus []*ginv1.Suspect
	for i := range MaxSuspectRows + 7 {
		s := slowLink("n1", fmt.Sprintf("mlx5_%d", i), i >= MaxSuspectRows, "line")
		sus = append(sus, s)
	}
	b := &fakeBackend{live: map[string]*ginv1.GetJobLiveResponse{"big": liveAnswer("big", []string{"n1"}, 0, sus...)}}
	code, body := get(t, b, "/ui/job?id=big")
	if code != 200 {
		t.Fatalf("= %d", code)
	}
	if n := strings.Count(body, "<tr data-suspect="); n != MaxSuspectRows {
		t.Errorf("%d suspects tabled, want %d", n, MaxSuspectRows)
	}
	if !strings.Contains(body, "7 more suspects not shown") {
		t.Error("the page does not say how many suspects are left out")
	}
	// Confirmed first: the 7 confirmed ones are among those shown.
	if n := strings.Count(body, `class="confirmed"`); n != 7 {
		t.Errorf("%d confirmed suspects shown, want all 7", n)
	}
	// The node's label names the first few.
	if !strings.Contains(body, `data-suspect="slow-link mlx5_50, slow-link mlx5_51, slow-link mlx5_52 and 54 more"`) {
		t.Errorf("node label: %s", body[strings.Index(body, "data-suspect=\"slow-link mlx5_5"):][:120])
	}
}

// A backend that cannot say (no leader) is said on the page, which still
// draws the plan; a job without a plan is then not found, with the reason.
func TestJobPageLiveUnavailable(t *testing.T) {
	b := &fakeBackend{liveErr: status.Error(codes.Unavailable, "no leader known")}
	code, body := get(t, b, "/ui/job?id=j0003")
	if code != 200 || !strings.Contains(body, "live state unavailable: no leader known") || !strings.Contains(body, "Bus bandwidth GIN's cost model predicts") {
		t.Errorf("job page with the live state unavailable = %d %.3000s", code, body)
	}
	code, body = get(t, b, "/ui/job?id=gone")
	if code != 404 || !strings.Contains(body, "no plan pinned") || !strings.Contains(body, "live state unavailable: no leader known") {
		t.Errorf("unknown job with the live state unavailable = %d %q", code, body)
	}
}

// On a simulated cluster: a live job's suspect node is marked apart from
// its other node on the fabric.
func TestJobPageLiveOnSimCluster(t *testing.T) {
	b := newSimBackend(t, "dgx-h100", 4, sim.DefaultFabricSpec(), nil, nil, nil)
	b.live = map[string]*ginv1.GetJobLiveResponse{"77": liveAnswer("77", []string{"node001", "node001", "node002", "node002"}, 0,
		slowLink("node002", "mlx5_1", true, "rank 3 sends at 1.6x"))}
	code, body := get(t, b, "/ui/job?id=77")
	if code != 200 {
		t.Fatalf("= %d %.300s", code, body)
	}
	for _, want := range []string{`class="n pass job" data-node="node001"`, `class="n pass job suspect" data-node="node002"`,
		`data-suspect="slow-link mlx5_1"`, "<title>suspect: slow-link mlx5_1; node002: up", ">suspect</text>"} {
		if !strings.Contains(body, want) {
			t.Errorf("fabric lacks %q", want)
		}
	}
	if strings.Contains(body, `data-node="node003" data-state="pass" data-suspect`) {
		t.Error("a node outside the job is marked")
	}
}
