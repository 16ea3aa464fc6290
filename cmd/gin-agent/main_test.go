package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/buildinfo"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/testkit"
)

const testInventory = "file:testdata/inventory.json"

// env returns a getenv over m.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// runArgs runs the command line with the environment m.
func runArgs(t *testing.T, m map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runContext(context.Background(), args, &out, &errb, env(m))
	return code, out.String(), errb.String()
}

func TestBadFlagsExitUsage(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{"unknown flag", []string{"--bogus"}, nil, "unknown flag: --bogus"},
		{"positional argument", []string{"run"}, nil, `unexpected argument "run"`},
		{"bad output", []string{"--once", "-o", "xml"}, nil, `--output "xml": want table, json or yaml`},
		{"output without once", []string{"-o", "json", "--source", testInventory}, nil, "--once only"},
		{"bad heartbeat flag", []string{"--heartbeat-interval", "soon"}, nil, "heartbeat-interval"},
		{"zero heartbeat flag", []string{"--heartbeat-interval", "0s"}, nil, "must be positive"},
		{"bad heartbeat env", nil, map[string]string{"GIN_HEARTBEAT_INTERVAL": "often"}, "GIN_HEARTBEAT_INTERVAL"},
		{"negative heartbeat env", nil, map[string]string{"GIN_HEARTBEAT_INTERVAL": "-5"}, "must be positive"},
		{"negative collect interval", []string{"--collect-interval", "-1s"}, nil, "--collect-interval"},
		{"negative home probe interval", []string{"--home-probe-interval", "-1s"}, nil, "--home-probe-interval"},
		{"home probe interval below 1s", []string{"--home-probe-interval", "100ms"}, nil, "at least 1s"},
		{"fabric scan interval below 1s", []string{"--fabric-scan-interval", "500ms"}, nil, "--fabric-scan-interval 500ms: must be at least 1s"},
		{"zero link error threshold", []string{"--link-error-threshold", "0"}, nil, "--link-error-threshold"},
		{"metrics bind without port", []string{"--metrics-bind", "localhost"}, nil, `--metrics-bind "localhost"`},
		{"unknown source kind", []string{"--source", "dcgm"}, nil, `--source "dcgm"`},
		{"sim without profile", []string{"--source", "sim:"}, nil, "sim:<profile>"},
		{"file without path", []string{"--source", "file:"}, nil, "file:<path>"},
		{"bad log level", []string{"--log-level", "loud"}, nil, "--log-level"},
		{"bad master flag", []string{"--source", testInventory, "--master", "host:99999"}, nil, "--master"},
		{"bad master env", []string{"--source", testInventory}, map[string]string{"GIN_MASTER_HOST": "[::1"}, "GIN_MASTER_HOST"},
		{"empty node name", []string{"--node-name", " "}, nil, "--node-name"},
		{"--tls-ca alone", []string{"--source", testInventory, "--tls-ca", "ca.pem"}, nil, "missing [--tls-cert --tls-key]"},
		{"GIN_TLS_CERT alone", []string{"--source", testInventory}, map[string]string{"GIN_TLS_CERT": "c.pem"}, "missing [--tls-ca --tls-key]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, tc.env, tc.args...)
			if code != exitUsage {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
			if !strings.Contains(stderr, tc.wantErr) || !strings.HasPrefix(stderr, "gin-agent: ") {
				t.Errorf("stderr = %q, want a gin-agent: line containing %q", stderr, tc.wantErr)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
		})
	}
}

func TestAutoWithoutDriverPrintsDiscoveryError(t *testing.T) {
	for _, args := range [][]string{{"--once"}, {"--source", "auto", "--master", "127.0.0.1:1"}} {
		code, _, stderr := runArgs(t, nil, args...)
		if code != exitError {
			t.Errorf("%v: exit code = %d, want %d", args, code, exitError)
		}
		if !strings.Contains(stderr, "no NVIDIA driver (libnvidia-ml.so.1 not found)") || strings.Contains(stderr, "--help") {
			t.Errorf("%v: stderr = %q, want the discovery error alone", args, stderr)
		}
	}
}

func TestOnceJSON(t *testing.T) {
	code, stdout, stderr := runArgs(t, nil, "--once", "-o", "json", "--source", testInventory, "--node-name", "gpu-node-17")
	if code != exitOK {
		t.Fatalf("exit code = %d; stderr:\n%s", code, stderr)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout)
	}
	if gpus, ok := doc["gpus"].([]any); !ok || len(gpus) != 2 {
		t.Errorf(".gpus = %v, want 2 GPUs", doc["gpus"])
	}
	if doc["node_name"] != "gpu-node-17" {
		t.Errorf(".node_name = %v, want the --node-name", doc["node_name"])
	}
	if g, ok := doc["generation"]; !ok || g != float64(0) {
		t.Errorf(".generation = %v, want 0: the agent leaves it unassigned, and zero values are present (docs/JSON.md)", g)
	}
	// Enum words as the table prints them, not protojson's names.
	if !strings.Contains(stdout, `"state": "up"`) || strings.Contains(stdout, "LINK_STATE_") {
		t.Error("enum values are not the lowercase words of docs/JSON.md")
	}
	// Proto field names, not lowerCamelCase.
	if !strings.Contains(stdout, `"pci_bus_id"`) || strings.Contains(stdout, `"pciBusId"`) {
		t.Error("output does not use the .proto field names")
	}
	if !strings.Contains(stdout, "\n  \"") {
		t.Error("output is not multi-line")
	}
	// The file holds sysfs's GUIDs ("a088:c203:0045:2e10"); the agent
	// prints and sends the canonical form (internal/inventory.Canonical).
	if !strings.Contains(stdout, `"node_guid": "0xa088c20300452e10"`) || strings.Contains(stdout, `"a088:c203:0045:2e10"`) {
		t.Error("GUIDs are not in their canonical form")
	}

	// Stable output, and a saved inventory can be replayed through file:.
	code2, stdout2, _ := runArgs(t, nil, "--once", "-o", "json", "--source", testInventory, "--node-name", "gpu-node-17")
	if code2 != exitOK || stdout2 != stdout {
		t.Error("two runs printed different JSON")
	}
}

func TestOnceTable(t *testing.T) {
	code, stdout, stderr := runArgs(t, nil, "--once", "--source", testInventory, "--node-name", "gpu-node-17")
	if code != exitOK {
		t.Fatalf("exit code = %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"gpu-node-17", "GPUs: 2", "NVIDIA H100 80GB HBM3", "0000:18:00.0", "1/2", "2/2",
		"HCAs: 1", "mlx5_0", "active", "link_up", "400 Gb/s", "infiniband",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
}

func TestOnceMissingFileExits1(t *testing.T) {
	code, _, stderr := runArgs(t, nil, "--once", "--source", "file:testdata/nope.json")
	if code != exitError || !strings.Contains(stderr, "nope.json") {
		t.Errorf("exit code %d, stderr %q; want 1 naming the file", code, stderr)
	}
}

func TestHelpTellsEveryFlagAndEnv(t *testing.T) {
	code, stdout, _ := runArgs(t, nil, "--help")
	if code != exitOK {
		t.Fatalf("exit code = %d", code)
	}
	for _, want := range []string{
		"--source", "auto", "sim:<profile>", "file:<path>", "--master", "GIN_MASTER_HOST", "127.0.0.1:5000",
		"--node-name", "--heartbeat-interval", "GIN_HEARTBEAT_INTERVAL", "5s", "--collect-interval",
		"--once", "-o, --output", "table, json or yaml", "--log-level", "--version", "not encrypted",
		"--tls-ca", "--tls-cert", "--tls-key", "GIN_TLS_CA",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestVersion(t *testing.T) {
	code, stdout, _ := runArgs(t, nil, "--version")
	if code != exitOK || stdout != buildinfo.Line("gin-agent")+"\n" {
		t.Errorf("exit %d, stdout %q; want the line every GIN binary prints, %q", code, stdout, buildinfo.Line("gin-agent"))
	}
}

func TestSettingsFromFlagsAndEnv(t *testing.T) {
	tests := []struct {
		name          string
		args          []string
		env           map[string]string
		wantHeartbeat time.Duration
		wantCollect   time.Duration
		wantMasters   []string
	}{
		{"defaults", nil, nil, 5 * time.Second, 0, []string{"127.0.0.1:5000"}},
		{"env seconds", nil, map[string]string{"GIN_HEARTBEAT_INTERVAL": "10"}, 10 * time.Second, 0, []string{"127.0.0.1:5000"}},
		{"env fractional seconds", nil, map[string]string{"GIN_HEARTBEAT_INTERVAL": "2.5"}, 2500 * time.Millisecond, 0, []string{"127.0.0.1:5000"}},
		{"env duration", nil, map[string]string{"GIN_HEARTBEAT_INTERVAL": "1m"}, time.Minute, 0, []string{"127.0.0.1:5000"}},
		{"flag beats env", []string{"--heartbeat-interval", "3s"}, map[string]string{"GIN_HEARTBEAT_INTERVAL": "10"}, 3 * time.Second, 0, []string{"127.0.0.1:5000"}},
		{"collect interval", []string{"--collect-interval", "1s"}, nil, 5 * time.Second, time.Second, []string{"127.0.0.1:5000"}},
		{"master env", nil, map[string]string{"GIN_MASTER_HOST": "m1,[fd00::2]:6000"}, 5 * time.Second, 0, []string{"m1:5000", "[fd00::2]:6000"}},
		{"master flag beats env", []string{"--master", "m9"}, map[string]string{"GIN_MASTER_HOST": "m1"}, 5 * time.Second, 0, []string{"m9:5000"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got settings
			exec := func(_ context.Context, s settings, _, _ io.Writer) error { got = s; return nil }
			var out, errb bytes.Buffer
			cmd := newCommand(env(tc.env), &out, &errb, exec)
			cmd.SetArgs(append([]string{"--source", testInventory}, tc.args...))
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			a := got.Agent
			if a.HeartbeatInterval != tc.wantHeartbeat || a.CollectInterval != tc.wantCollect ||
				strings.Join(a.Masters, ",") != strings.Join(tc.wantMasters, ",") {
				t.Errorf("heartbeat %s collect %s masters %v; want %s %s %v",
					a.HeartbeatInterval, a.CollectInterval, a.Masters, tc.wantHeartbeat, tc.wantCollect, tc.wantMasters)
			}
		})
	}
}

// master is a minimal AgentService: it acknowledges the hello (holding
// nothing) and the first inventory, and reports it.
type master struct {
	ginv1.UnimplementedAgentServiceServer
	got chan *ginv1.NodeInventory
}

func (m *master) Session(stream ginv1.AgentService_SessionServer) error {
	if _, err := stream.Recv(); err != nil {
		return err
	}
	if err := stream.Send(&ginv1.SessionResponse{Msg: &ginv1.SessionResponse_HelloAck{HelloAck: &ginv1.HelloAck{}}}); err != nil {
		return err
	}
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		if inv := req.GetInventory(); inv != nil {
			select {
			case m.got <- inv:
			default:
			}
			if err := stream.Send(&ginv1.SessionResponse{Msg: &ginv1.SessionResponse_InventoryAck{
				InventoryAck: &ginv1.InventoryAck{AcceptedGeneration: inv.GetGeneration()},
			}}); err != nil {
				return err
			}
		}
	}
}

func TestAgentReportsToMasterAndStopsOnCancel(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &master{got: make(chan *ginv1.NodeInventory, 1)}
	srv := grpc.NewServer()
	ginv1.RegisterAgentServiceServer(srv, m)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runContext(ctx, []string{"--source", testInventory, "--node-name", "gpu-node-17", "--heartbeat-interval", "50ms", "--metrics-bind", "127.0.0.1:0",
			"--plan-socket", "", "--plan-dir", ""},
			&out, &errb, env(map[string]string{"GIN_MASTER_HOST": lis.Addr().String()}))
	}()
	select {
	case inv := <-m.got:
		if inv.GetNodeName() != "gpu-node-17" || inv.GetGeneration() != 1 || len(inv.GetGpus()) != 2 {
			t.Errorf("master got node %q generation %d with %d GPUs", inv.GetNodeName(), inv.GetGeneration(), len(inv.GetGpus()))
		}
	case code := <-done:
		t.Fatalf("gin-agent exited %d before reporting; stderr:\n%s", code, errb.String())
	case <-time.After(15 * time.Second):
		t.Fatalf("master received no inventory; stderr:\n%s", errb.String())
	}
	// The metrics endpoint serves the agent's state on its own registry.
	m2 := regexp.MustCompile(`serving Prometheus metrics" addr=(\S+)`).FindStringSubmatch(errb.String())
	if m2 == nil {
		t.Fatalf("no metrics address in the logs:\n%s", errb.String())
	}
	resp, err := http.Get("http://" + m2[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`gin_agent_build_info{hostname="gpu-node-17"`, "gin_gpu_info{", "gin_agent_master_connected{", "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit code after cancel = %d, want 0", code)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("gin-agent did not stop after cancel")
	}
	if !strings.Contains(errb.String(), "NOT encrypted") {
		t.Errorf("no insecure-transport warning in the logs:\n%s", errb.String())
	}
}

// syncBuffer is a goroutine-safe bytes.Buffer.
type syncBuffer = testkit.LogBuffer

// TestAddressInUseHint: a --metrics-bind port already taken is said in words.
func TestAddressInUseHint(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := runContext(ctx, []string{"--source", testInventory, "--master", "127.0.0.1:1", "--metrics-bind", l.Addr().String(),
		"--plan-socket", filepath.Join(t.TempDir(), "agent.sock"), "--plan-dir", ""}, &out, &errb, env(nil))
	if code == exitOK || !strings.Contains(errb.String(), "address already in use (another gin-agent, or another program, uses that port") {
		t.Fatalf("exit %d, stderr %q; want the address-in-use hint", code, errb.String())
	}
}

// TestOnceYAML: -o yaml is the JSON document in YAML, and file: reads it
// back through the JSON form (the same document).
func TestOnceYAML(t *testing.T) {
	code, stdout, stderr := runArgs(t, nil, "--once", "-o", "yaml", "--source", testInventory, "--node-name", "gpu-node-17")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"node_name: gpu-node-17\n", "gpus:\n  - ", "    index: 0\n", "state: up\n", "generation: 0\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("-o yaml lacks %q:\n%s", want, stdout)
		}
	}
}

// TestBadTLSFilesExit78: TLS files that cannot serve (missing, another
// node's certificate, expired) are a configuration error the unit does
// not restart (RestartPreventExitStatus=64 78), not a failure it retries.
func TestBadTLSFilesExit78(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.CreateCA(dir, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	other, otherKey, err := ca.IssueToDir(mkdir(t, dir, "other"), pki.CertRequest{Identity: pki.Identity{Role: pki.RoleAgent, Name: "node999"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	old, oldKey, err := ca.IssueToDir(mkdir(t, dir, "old"), pki.CertRequest{Identity: pki.Identity{Role: pki.RoleAgent, Name: "gpu-node-17"}, Days: 1}, time.Now().Add(-72*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, pki.CAFile)
	for _, tc := range []struct {
		name       string
		cert, key  string
		wantStderr string
	}{
		{"missing files", filepath.Join(dir, "nope.pem"), filepath.Join(dir, "nope-key.pem"), "nope.pem"},
		{"another node's certificate", other, otherKey, `this agent needs an agent certificate for node "gpu-node-17"`},
		{"expired certificate", old, oldKey, "expired on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runArgs(t, nil, "--source", testInventory, "--node-name", "gpu-node-17", "--master", "127.0.0.1:1",
				"--metrics-bind", "", "--plan-socket", "", "--tls-ca", caFile, "--tls-cert", tc.cert, "--tls-key", tc.key)
			if code != exitConfig || !strings.Contains(stderr, tc.wantStderr) {
				t.Fatalf("exit %d, want %d; stderr %q, want %q", code, exitConfig, stderr, tc.wantStderr)
			}
		})
	}
}

func mkdir(t *testing.T, parent, name string) string {
	t.Helper()
	d := filepath.Join(parent, name)
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}
