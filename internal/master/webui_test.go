package master

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The web view (/ui/ on --http-bind) answers on a follower from its own
// replica, serves the embedded page with a strict CSP, and refuses writes.
func TestWebViewOnFollower(t *testing.T) {
	ms := startClusterWith(t, 3, func(c *Config) { c.HTTPBind = "127.0.0.1:0" })
	var leader *member
	waitUntil(t, "a leader", func() bool { leader = leaderOf(ms); return leader != nil })
	for _, n := range []string{"node001", "node002"} {
		i := simInventory(t, "dgx-h100", n)
		i.Generation = 1
		if _, err := leader.s.putInventory(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	f := followerOf(ms, leader)
	base := "http://" + f.s.HTTPAddr()
	get := func(path string) (int, http.Header, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	var nodes struct {
		Nodes []struct {
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"nodes"`
	}
	waitUntil(t, "the follower lists both nodes", func() bool {
		code, _, body := get("/ui/api/nodes")
		nodes.Nodes = nil
		return code == 200 && json.Unmarshal([]byte(body), &nodes) == nil && len(nodes.Nodes) == 2
	})
	if nodes.Nodes[0].Name != "node001" || nodes.Nodes[0].State != "up" {
		t.Errorf("nodes %+v: want node001 up first", nodes.Nodes)
	}

	tests := []struct {
		path, want string
		code       int
	}{
		{"/ui/", `<script src="app.js" defer></script>`, 200},
		{"/ui/app.js", "api/nodes", 200},
		{"/ui/style.css", "font-family", 200},
		{"/ui/api/cluster", `"leader_id":"` + leader.s.cfg.ID + `"`, 200},
		{"/ui/api/node?name=node002", `"name":"node002"`, 200},
		{"/ui/api/matrix?node=node001", `"label":"GPU7"`, 200},
		{"/ui/api/plans", `"total":0`, 200},
		{"/ui/api/node?name=nope", "", 404},
		{"/ui/api/node?name=..%2Fx", "node name", 400},
		{"/ui/api/matrix", "node name", 400},
		{"/ui/missing.js", "", 404},
		// The pictures, drawn by this follower from its own replica.
		{"/ui/", `data-node="node002"`, 200},
		{"/ui/node?name=node002", `data-link="node002/GPU0/nvlink0"`, 200},
		{"/ui/node?name=nope", "", 404},
		{"/ui/estimate?gpus=8", `data-series="nvlink-domain"`, 200},
		{"/ui/job?id=none", "no plan pinned", 404},
	}
	for _, tc := range tests {
		code, h, body := get(tc.path)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s = %d %.300q, want %d containing %q", tc.path, code, body, tc.code, tc.want)
		}
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: CSP %q", tc.path, csp)
		}
	}
	// Read-only: no other method reaches the API.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/ui/api/nodes", strings.NewReader("{}"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/api/nodes = %d, want 405", resp.StatusCode)
	}
}
