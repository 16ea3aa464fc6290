package master

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/ratelog"
	"github.com/gin-topology/gin/internal/testkit"
)

// httpGet GETs url with client, returning the status and body (status -1
// and the error's text when no answer came).
func httpGet(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := client.Do(req)
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// tlsClient is an HTTPS client presenting id's certificate of p (none when
// id is zero) and not checking the server (what is tested is the master's
// gate).
func tlsClient(t *testing.T, p *testPKI, id pki.Identity) *http.Client {
	t.Helper()
	cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // the client under test is not the point
	if id.Role != "" {
		cfg.Certificates = []tls.Certificate{*p.source(t, id).Certificate()}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
}

// On a cluster with mutual TLS the web view (/ui/ and /ui/api/*) answers
// only over TLS to a client certificate of the cluster naming a reader or
// above (issue #21 point 5: it answered members, addresses, inventories and
// plans to anyone); /metrics and /healthz follow the web config as
// Prometheus' exporters do (here: TLS, a client certificate optional).
func TestWebViewNeedsACertificateOnATLSCluster(t *testing.T) {
	p := newTestPKI(t)
	t.Run("plain HTTP", func(t *testing.T) {
		s := startServerWith(t, func(c *Config) {
			c.TLS = p.source(t, pki.Identity{Role: pki.RoleMaster, Name: "m1"})
			c.HTTPBind = "127.0.0.1:0"
		})
		base := "http://" + s.HTTPAddr()
		for _, path := range []string{"/ui/", "/ui/api/cluster", "/ui/api/nodes", "/ui/api/plans", "/ui/node?name=node001", "/ui/job?id=1", "/ui/estimate"} {
			if code, body := httpGet(t, http.DefaultClient, base+path); code != http.StatusForbidden || !strings.Contains(body, "--web-config-file") {
				t.Errorf("GET %s over plain HTTP = %d %q, want 403 naming --web-config-file", path, code, body)
			}
		}
		if code, _ := httpGet(t, http.DefaultClient, base+"/metrics"); code != http.StatusOK {
			t.Errorf("GET /metrics = %d, want 200 (Prometheus' default: plain HTTP)", code)
		}
		if code, _ := httpGet(t, http.DefaultClient, base+"/healthz"); code != http.StatusOK {
			t.Errorf("GET /healthz = %d, want 200", code)
		}
		if _, body := httpGet(t, http.DefaultClient, base+"/metrics"); !strings.Contains(body, `gin_master_ui_requests_refused_total{reason="not_tls",server="m1"} 7`) {
			t.Errorf("/metrics does not count the 7 refusals as not_tls")
		}
	})
	t.Run("TLS from the web config", func(t *testing.T) {
		dir := t.TempDir()
		cert, key, err := p.ca.IssueToDir(dir, pki.CertRequest{Identity: pki.Identity{Role: pki.RoleMaster, Name: "m1"}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		webConfig := filepath.Join(dir, "web.yml")
		if err := os.WriteFile(webConfig, fmt.Appendf(nil, "tls_server_config:\n  cert_file: %s\n  key_file: %s\n  client_ca_file: %s\n  client_auth_type: VerifyClientCertIfGiven\n",
			cert, key, filepath.Join(p.dir, pki.CAFile)), 0o600); err != nil {
			t.Fatal(err)
		}
		src, err := pki.NewSource(pki.Files{CA: filepath.Join(p.dir, pki.CAFile), Cert: cert, Key: key}, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := startServerWith(t, func(c *Config) {
			c.TLS = src
			c.HTTPBind = "127.0.0.1:0"
			c.WebConfigFile = webConfig
		})
		base := "https://" + s.HTTPAddr()
		other := newTestPKI(t) // another CA
		tests := []struct {
			name     string
			client   *http.Client
			path     string
			want     int
			wantBody string
		}{
			{"a reader reads the view", tlsClient(t, p, pki.Identity{Role: pki.RoleReader}), "/ui/api/cluster", http.StatusOK, s.store.ClusterID()},
			{"an admin reads the view", tlsClient(t, p, pki.Identity{Role: pki.RoleAdmin}), "/ui/api/nodes", http.StatusOK, ""},
			{"no certificate", tlsClient(t, p, pki.Identity{}), "/ui/api/cluster", http.StatusUnauthorized, "needs a client certificate"},
			{"an agent's certificate", tlsClient(t, p, pki.Identity{Role: pki.RoleAgent, Name: "node001"}), "/ui/api/plans", http.StatusForbidden, "role agent"},
			{"another CA's reader: refused in the handshake", tlsClient(t, other, pki.Identity{Role: pki.RoleReader}), "/ui/api/cluster", -1, ""},
			{"metrics without a certificate", tlsClient(t, p, pki.Identity{}), "/metrics", http.StatusOK, "gin_master_request_names_limit"},
			{"plain HTTP to the TLS port", http.DefaultClient, "/metrics", http.StatusBadRequest, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				url := base + tt.path
				if tt.client == http.DefaultClient {
					url = "http://" + s.HTTPAddr() + tt.path
				}
				code, body := httpGet(t, tt.client, url)
				if code != tt.want || !strings.Contains(body, tt.wantBody) {
					t.Fatalf("GET %s = %d %.200q, want %d with %q", tt.path, code, body, tt.want, tt.wantBody)
				}
			})
		}
	})
}

// A web config file exporter-toolkit refuses stops the master before it
// starts, naming the flag.
func TestBadWebConfigIsRefused(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(bad, []byte("tls_server_config:\n  cert_file: /nonexistent.pem\n  key_file: /nonexistent-key.pem\nnot_a_key: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(Config{ID: "m1", Bind: "127.0.0.1:0", RaftBind: "127.0.0.1:0", HTTPBind: "127.0.0.1:0", WebConfigFile: bad, DataDir: filepath.Join(dir, "data"),
		Bootstrap: true, FastRaft: true, HeartbeatInterval: time.Second})
	if err == nil || !strings.Contains(err.Error(), "--web-config-file") {
		t.Fatalf("New with a bad web config = %v, want a refusal naming --web-config-file", err)
	}
}

// TestWebViewRefusalLogIsBounded: a flood of refused web view requests
// (plain HTTP to a TLS cluster, each with a long path) is counted in full
// but logged at most the burst, each line quoting at most
// ratelog.MaxEcho bytes of the path.
func TestWebViewRefusalLogIsBounded(t *testing.T) {
	p := newTestPKI(t)
	logs := &testkit.LogBuffer{}
	clk := newFakeClockAt(time.Unix(1_800_000_000, 0))
	s := startServerWith(t, func(c *Config) {
		c.TLS = p.source(t, pki.Identity{Role: pki.RoleMaster, Name: "m1"})
		c.HTTPBind = "127.0.0.1:0"
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		c.AgentLogClock = clk
	})
	base := "http://" + s.HTTPAddr()
	long := "/ui/" + strings.Repeat("x", 4000)
	const flood = 3 * rejectLogBurst
	for range flood {
		if code, _ := httpGet(t, http.DefaultClient, base+long); code != http.StatusForbidden {
			t.Fatalf("GET over plain HTTP = %d, want 403", code)
		}
	}
	if got := strings.Count(logs.String(), `msg="web view: request refused"`); got != rejectLogBurst {
		t.Fatalf("%d refusal lines for %d refusals, want the burst %d", got, flood, rejectLogBurst)
	}
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "request refused") && len(l) > ratelog.MaxEcho+1000 {
			t.Fatalf("a %d-byte refusal line for a 4 KB path", len(l))
		}
	}
	if _, body := httpGet(t, http.DefaultClient, base+"/metrics"); !strings.Contains(body, fmt.Sprintf(`gin_master_ui_requests_refused_total{reason="not_tls",server="m1"} %d`, flood)) {
		t.Errorf("/metrics does not count the %d refusals", flood)
	}
}
