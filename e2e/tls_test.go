package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/testkit"
)

// TestTLSCluster turns mTLS on with the real binaries as docs/SECURITY.md says:
// `ginctl tls ca create`, `ginctl tls cert create` per role, the three
// --tls-* flags (or GIN_TLS_*) on gin-master, gin-agent and ginctl. The
// agent registers over mTLS; ginctl without a certificate gets nothing;
// a reader cannot remove a master; an agent started with another node's
// certificate refuses to start.
func TestTLSCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	bin := binaries(t)
	dir := t.TempDir()
	tdir := filepath.Join(dir, "tls")
	ctl := func(env []string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "ginctl"), args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	mustCtl := func(args ...string) {
		t.Helper()
		if out, err := ctl(nil, args...); err != nil {
			t.Fatalf("ginctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	mustCtl("tls", "ca", "create", "--dir", tdir)
	mustCtl("tls", "cert", "create", "--dir", tdir, "--role", "master", "--name", "m1")
	mustCtl("tls", "cert", "create", "--dir", tdir, "--role", "agent", "--name", "node001")
	mustCtl("tls", "cert", "create", "--dir", tdir, "--role", "agent", "--name", "node002")
	mustCtl("tls", "cert", "create", "--dir", tdir, "--role", "admin")
	mustCtl("tls", "cert", "create", "--dir", tdir, "--role", "reader")
	flags := func(base string) []string {
		return []string{"--tls-ca", filepath.Join(tdir, "ca.pem"), "--tls-cert", filepath.Join(tdir, base+".pem"), "--tls-key", filepath.Join(tdir, base+"-key.pem")}
	}

	master, addr := startTLSMaster(t, bin, dir, testkit.CertDir(tdir), "m1")

	agent := &testkit.Proc{Name: "gin-agent", Log: filepath.Join(dir, "agent.log"), Argv: append([]string{
		filepath.Join(bin, "gin-agent"), "--source", "sim:dgx-h100", "--node-name", "node001", "--master", addr,
		"--metrics-bind", "", "--plan-socket", "", "--heartbeat-interval", "1s"}, flags("agent-node001")...)}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Kill(10 * time.Second) })
	admin := append([]string{"--master", addr}, flags("admin")...)
	waitFor(t, "node001 registered over mTLS", 60*time.Second, func() bool {
		out, err := ctl(nil, append(admin, "nodes", "-o", "json")...)
		return err == nil && strings.Contains(out, `"node001"`)
	})

	// The environment instead of flags (a reader reads).
	env := []string{"GIN_TLS_CA=" + filepath.Join(tdir, "ca.pem"), "GIN_TLS_CERT=" + filepath.Join(tdir, "reader.pem"), "GIN_TLS_KEY=" + filepath.Join(tdir, "reader-key.pem")}
	if out, err := ctl(env, "--master", addr, "nodes", "-o", "json"); err != nil || !strings.Contains(out, `"node001"`) {
		t.Fatalf("reader through GIN_TLS_*: %v\n%s", err, out)
	}
	// ... but does not write.
	if out, err := ctl(env, "--master", addr, "members", "remove", "m1"); err == nil || !strings.Contains(out, "PermissionDenied") && !strings.Contains(out, "may not call") {
		t.Fatalf("reader members remove: %v\n%s", err, out)
	}
	// Without a certificate: nothing.
	if out, err := ctl(nil, "--master", addr, "--timeout", "3s", "nodes"); err == nil {
		t.Fatalf("ginctl without a certificate read the nodes:\n%s", out)
	}
	// An agent given another node's certificate refuses to start.
	out, err := runTool(t, bin, "gin-agent", append([]string{"--source", "sim:dgx-h100", "--node-name", "node001", "--master", addr,
		"--metrics-bind", "", "--plan-socket", ""}, flags("agent-node002")...)...)
	if err == nil || !strings.Contains(out, "spiffe://gin/agent/node002") {
		t.Fatalf("gin-agent with node002's certificate as node001: %v\n%s", err, out)
	}
	// A master without certificates refuses to start unless --insecure is
	// given, naming both ways, with the configuration exit code the
	// systemd unit does not restart on; nothing is created.
	out, err = runTool(t, bin, "gin-master", "--node-id", "m1", "--bind", "127.0.0.1:0", "--raft-bind", "127.0.0.1:0",
		"--http-bind", "", "--data-dir", filepath.Join(dir, "m-bad"))
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 78 || !strings.Contains(out, "--tls-ca, --tls-cert and --tls-key") ||
		!strings.Contains(out, "ginctl tls ca create") || !strings.Contains(out, "--insecure") {
		t.Fatalf("gin-master without TLS: %v\n%s\nwant exit 78 naming the --tls-* flags, ginctl tls and --insecure", err, out)
	}
	// The master, given an agent's certificate, refuses to start.
	out, err = runTool(t, bin, "gin-master", append([]string{"--node-id", "m1", "--bind", "127.0.0.1:0", "--raft-bind", "127.0.0.1:0",
		"--http-bind", "", "--data-dir", filepath.Join(dir, "m-bad")}, flags("agent-node001")...)...)
	if err == nil || !strings.Contains(out, "needs a master certificate") {
		t.Fatalf("gin-master with an agent certificate: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "m-bad")); err == nil {
		t.Fatal("a refused master created its data dir")
	}
	// A master certificate that does not name the address clients are sent to.
	out, err = runTool(t, bin, "gin-master", append([]string{"--node-id", "m1", "--bind", "127.0.0.1:0", "--raft-bind", "127.0.0.1:0",
		"--advertise", "10.9.9.9:5000", "--http-bind", "", "--data-dir", filepath.Join(dir, "m-bad")}, flags("master-m1")...)...)
	if err == nil || !strings.Contains(out, "does not name 10.9.9.9") {
		t.Fatalf("gin-master whose certificate lacks its --advertise host: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(master.Log); !strings.Contains(string(b), "Raft over TLS") {
		t.Fatalf("master log does not say Raft runs over TLS:\n%s", b)
	}
	if b, _ := os.ReadFile(agent.Log); !strings.Contains(string(b), "mTLS to the masters") {
		t.Fatalf("agent log does not say it uses mTLS:\n%s", b)
	}
}

// startTLSMaster starts one gin-master on loopback ports serving mutual TLS
// with certs' master-<id> pair, its data and log in dir; it returns the
// process (killed at cleanup) and its gRPC address.
func startTLSMaster(t *testing.T, bin, dir string, certs testkit.CertDir, id string) (*testkit.Proc, string) {
	t.Helper()
	m := &testkit.Proc{Name: "gin-master " + id, Log: filepath.Join(dir, id+".log"), Argv: append([]string{
		filepath.Join(bin, "gin-master"), "--node-id", id, "--bind", "127.0.0.1:0", "--raft-bind", "127.0.0.1:0",
		"--http-bind", "", "--data-dir", filepath.Join(dir, id), "--heartbeat-interval", "1s"}, certs.Flags("master-"+id)...)}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Kill(10 * time.Second) })
	return m, logAddr(t, m, regexp.MustCompile(`msg="gin-master serving".* grpc=(\S+)`))
}
