package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/testkit"
)

// logAddr waits until the process log at path has a line matching re and
// returns its first group.
func logAddr(t *testing.T, p *testkit.Proc, re *regexp.Regexp) string {
	t.Helper()
	var addr string
	waitFor(t, p.Name+" "+re.String(), 60*time.Second, func() bool {
		b, _ := os.ReadFile(p.Log)
		if m := re.FindSubmatch(b); m != nil {
			addr = string(m[1])
			return true
		}
		if !p.Alive() {
			t.Fatalf("%s exited:\n%s", p.Name, b)
		}
		return false
	})
	return addr
}

// promAPI GETs a Prometheus API path and decodes its data field into v.
func promAPI(base, path string, q url.Values, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := base + path
	if q != nil {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	var env struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("%s: %w (%.200s)", path, err, b)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s: %s", path, env.Status, env.Error)
	}
	return json.Unmarshal(env.Data, v)
}

// TestPrometheusScrapesGINAndAlerts starts Debian's real prometheus with the
// shipped prometheus.yml and gin-rules.yml (intervals cut to 1 s), targets
// from `ginctl export prometheus-sd`, against a real gin-master and a real
// gin-agent process (simulated DGX H100 replayed from a file). Both targets
// come up, every rule evaluates without error, and an NVLink taken down in
// the agent's hardware makes GinNVLinkDown fire (every for: cut to 3 s, the
// shipped durations are checked by promtool's unit tests) with the link's
// labels. Then every query
// of deploy/grafana/gin.json returns series.
func TestPrometheusScrapesGINAndAlerts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries and Prometheus")
	}
	prom := needTool(t, "prometheus", "prometheus")
	bin := binaries(t)
	dir := t.TempDir()

	master := &testkit.Proc{Name: "gin-master", Log: filepath.Join(dir, "master.log"), Argv: []string{
		filepath.Join(bin, "gin-master"), "--node-id", "m1", "--bind", "127.0.0.1:0", "--raft-bind", "127.0.0.1:0",
		"--http-bind", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "m1"), "--heartbeat-interval", "1s", "--insecure"}}
	if err := master.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Kill(10 * time.Second) })
	grpcAddr := logAddr(t, master, regexp.MustCompile(`msg="gin-master serving".* grpc=(\S+)`))
	httpAddr := logAddr(t, master, regexp.MustCompile(`msg="serving /metrics and /healthz".* addr=(\S+)`))

	// The agent's hardware: a simulated DGX H100 saved once, replayed by
	// --source file: at every collection (so the test can break a link).
	inv := filepath.Join(dir, "inventory.json")
	out, err := runTool(t, bin, "gin-agent", "--once", "-o", "json", "--source", "sim:dgx-h100", "--node-name", "localhost")
	if err != nil {
		t.Fatalf("gin-agent --once: %v\n%s", err, out)
	}
	if err := os.WriteFile(inv, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := &testkit.Proc{Name: "gin-agent", Log: filepath.Join(dir, "agent.log"), Argv: []string{
		filepath.Join(bin, "gin-agent"), "--source", "file:" + inv, "--node-name", "localhost", "--master", grpcAddr,
		"--metrics-bind", "127.0.0.1:0", "--heartbeat-interval", "1s", "--collect-interval", "1s",
		"--plan-socket", filepath.Join(dir, "agent.sock"), "--plan-dir", ""}}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Kill(10 * time.Second) })
	agentAddr := logAddr(t, agent, regexp.MustCompile(`msg="serving Prometheus metrics" addr=(\S+)`))
	_, agentPort, _ := net.SplitHostPort(agentAddr)
	// A second node, live simulated hardware (its counters move), on the
	// same port of another loopback address: file_sd targets are
	// node:agent-port, and the node is named by its address.
	sim := &testkit.Proc{Name: "gin-agent-sim", Log: filepath.Join(dir, "agent-sim.log"), Argv: []string{
		filepath.Join(bin, "gin-agent"), "--source", "sim:dgx-h100", "--node-name", "127.0.0.2", "--master", grpcAddr,
		"--metrics-bind", "127.0.0.2:" + agentPort, "--heartbeat-interval", "1s", "--collect-interval", "1s",
		"--plan-socket", ""}}
	if err := sim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Kill(10 * time.Second) })
	logAddr(t, sim, regexp.MustCompile(`msg="serving Prometheus metrics" addr=(\S+)`))
	waitFor(t, "nodes localhost and 127.0.0.2 registered", 60*time.Second, func() bool {
		out, err := runTool(t, bin, "ginctl", "--master", grpcAddr, "nodes", "-o", "json")
		return err == nil && strings.Contains(out, `"localhost"`) && strings.Contains(out, `"127.0.0.2"`)
	})
	// One plan request on the agent's socket, as the Slurm prolog makes:
	// the plan panels and gin_agent_plan_*_total count it. As root the
	// master pins a plan (exit 0); otherwise the socket drops the node
	// list and the master has none to give (NOT_FOUND): a request and a
	// fetch either way.
	sock := logAddr(t, agent, regexp.MustCompile(`msg="serving plans" socket=(\S+)`))
	if out, err := runTool(t, bin, "gin-agent", "plan", "--job", "5", "--nodes", "localhost", "--plan-socket", sock); err != nil && !strings.Contains(out, "NOT_FOUND") {
		t.Fatalf("gin-agent plan: %v\n%s", err, out)
	}

	// Prometheus, configured as shipped but scraping and evaluating every second.
	pdir := filepath.Join(dir, "prometheus")
	if err := os.MkdirAll(filepath.Join(pdir, "gin"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(promDir, "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	fast := strings.NewReplacer("scrape_interval: 15s", "scrape_interval: 1s", "evaluation_interval: 15s", "evaluation_interval: 1s",
		"refresh_interval: 1m", "refresh_interval: 1s").Replace(string(cfg))
	if fast == string(cfg) || strings.Contains(fast, "15s") {
		t.Fatalf("prometheus.yml no longer has the intervals this test shortens:\n%s", cfg)
	}
	shipped, err := os.ReadFile(filepath.Join(promDir, "gin-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	// Every alert's for: cut to 3 s like the intervals, so the injected
	// fault is seen firing (the shipped durations are promtool's tests').
	forClause := regexp.MustCompile(`(?m)^(\s+for:\s*)\S+\s*$`)
	rules := forClause.ReplaceAll(shipped, []byte("${1}3s"))
	if !forClause.Match(shipped) || bytes.Equal(rules, shipped) {
		t.Fatalf("gin-rules.yml no longer has the for: clauses this test shortens")
	}
	for name, b := range map[string][]byte{"prometheus.yml": []byte(fast), "gin-rules.yml": rules} {
		if err := os.WriteFile(filepath.Join(pdir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, masterPort, _ := net.SplitHostPort(httpAddr)
	if out, err := runTool(t, bin, "ginctl", "--master", grpcAddr, "export", "prometheus-sd",
		"--agent-port", agentPort, "--master-port", masterPort, "--out", filepath.Join(pdir, "gin", "targets.json")); err != nil {
		t.Fatalf("ginctl export prometheus-sd: %v\n%s", err, out)
	}
	// Prometheus cannot report the port of --web.listen-address :0; a port
	// taken in between makes it exit, and the test says so.
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	pp := &testkit.Proc{Name: "prometheus", Log: filepath.Join(dir, "prometheus.log"), Argv: []string{
		prom, "--config.file=" + filepath.Join(pdir, "prometheus.yml"), "--storage.tsdb.path=" + filepath.Join(pdir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port)}}
	if err := pp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pp.Kill(10 * time.Second)
		if t.Failed() {
			for _, p := range []*testkit.Proc{master, agent, sim, pp} {
				b, _ := os.ReadFile(p.Log)
				t.Logf("%s log:\n%s", p.Name, b)
			}
		}
	})

	type target struct {
		Labels    map[string]string `json:"labels"`
		Health    string            `json:"health"`
		LastError string            `json:"lastError"`
		ScrapeURL string            `json:"scrapeUrl"`
	}
	var targets struct {
		Active []target `json:"activeTargets"`
	}
	waitFor(t, "all three GIN targets up in Prometheus", 90*time.Second, func() bool {
		if !pp.Alive() {
			b, _ := os.ReadFile(pp.Log)
			t.Fatalf("prometheus exited:\n%s", b)
		}
		targets.Active = nil // decode afresh: json would merge into old maps
		if promAPI(base, "/api/v1/targets", nil, &targets) != nil {
			return false
		}
		up := map[string]int{}
		for _, tg := range targets.Active {
			if tg.Health == "up" {
				up[tg.Labels["job"]]++
			}
		}
		return up["gin-agent"] == 2 && up["gin-master"] == 1
	})
	t.Logf("targets: %+v", targets.Active)

	// Every rule evaluates (no PromQL error against real series).
	var rules2 struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Name      string `json:"name"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	waitFor(t, "every rule evaluated ok", 30*time.Second, func() bool {
		rules2.Groups = nil
		if promAPI(base, "/api/v1/rules", nil, &rules2) != nil || len(rules2.Groups) == 0 {
			return false
		}
		for _, g := range rules2.Groups {
			for _, r := range g.Rules {
				if r.Health != "ok" {
					return false
				}
			}
		}
		return true
	})

	// The fault: NVLink 3 of GPU 0 goes down in the node's hardware.
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	link := doc["gpus"].([]any)[0].(map[string]any)["nvlinks"].([]any)[3].(map[string]any)
	if link["state"] != "up" {
		t.Fatalf("GPU 0 NVLink 3 is %v before the fault, want up", link["state"])
	}
	link["state"] = "down"
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(inv+".tmp", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(inv+".tmp", inv); err != nil {
		t.Fatal(err)
	}

	type alert struct {
		Labels map[string]string `json:"labels"`
		State  string            `json:"state"`
	}
	var alerts struct {
		Alerts []alert `json:"alerts"`
	}
	var got alert
	waitFor(t, "GinNVLinkDown firing for GPU 0 NVLink 3", 60*time.Second, func() bool {
		alerts.Alerts = nil
		if promAPI(base, "/api/v1/alerts", nil, &alerts) != nil {
			return false
		}
		for _, a := range alerts.Alerts {
			if a.Labels["alertname"] == "GinNVLinkDown" && a.Labels["gpu"] == "0" && a.Labels["nvlink"] == "3" {
				got = a
				return a.State == "firing"
			}
		}
		return false
	})
	if got.Labels["severity"] != "critical" || got.Labels["hostname"] != "localhost" || got.Labels["job"] != "gin-agent" ||
		got.State != "firing" {
		t.Fatalf("GinNVLinkDown = %+v, want severity critical, hostname localhost, job gin-agent, firing", got)
	}
	for _, a := range alerts.Alerts {
		if a.Labels["alertname"] == "GinNVLinkDown" && !(a.Labels["gpu"] == "0" && a.Labels["nvlink"] == "3") {
			t.Errorf("GinNVLinkDown also for a healthy link: %+v", a)
		}
	}
	t.Logf("alert after the injected fault: %+v", got)

	// Every query of the Grafana dashboard runs without error and returns
	// series against this Prometheus (the node variable's query too).
	var hosts []string
	if err := promAPI(base, "/api/v1/label/hostname/values", url.Values{"match[]": {"gin_agent_build_info"}}, &hosts); err != nil || len(hosts) != 2 {
		t.Errorf("dashboard variable node = label_values(gin_agent_build_info, hostname) = %v, %v; want the two nodes", hosts, err)
	}
	// rate() needs two scrapes of a series in its window: poll (bounded)
	// until every query has series, then report the ones that never did.
	waitFor(t, "the plan request and its fetch scraped", 30*time.Second, func() bool {
		for _, q := range []string{`sum(gin_agent_plan_requests_total{hostname="localhost"}) >= 1`, `sum(gin_agent_plan_fetches_total{hostname="localhost"}) >= 1`} {
			var res struct {
				Result []json.RawMessage `json:"result"`
			}
			if promAPI(base, "/api/v1/query", url.Values{"query": {q}}, &res) != nil || len(res.Result) == 0 {
				return false
			}
		}
		return true
	})
	pending := dashboardQueries(t)
	problems := map[string]string{}
	testkit.WaitUntilEvery(45*time.Second, 500*time.Millisecond, func() bool { // 500 ms: the next scrape
		for name, q := range pending {
			var res struct {
				Result []json.RawMessage `json:"result"`
			}
			if err := promAPI(base, "/api/v1/query", url.Values{"query": {q}}, &res); err != nil {
				problems[name] = fmt.Sprintf("%s: %v", q, err)
				continue
			}
			if len(res.Result) == 0 {
				problems[name] = q + " returned no series"
				continue
			}
			delete(pending, name)
			delete(problems, name)
		}
		return len(pending) == 0
	})
	for name := range pending {
		t.Errorf("dashboard panel %s: %s", name, problems[name])
	}
}
