package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/testkit"
)

// TestTLSDenyAndNodeDelete runs docs/SECURITY.md's deny-list and node-removal
// lines on the real binaries: an agent registers node001 over mTLS; the
// node cannot be deleted under its live session; `ginctl tls deny --cert`
// (the serial `ginctl tls cert create` printed) ends the agent's session, whose
// reconnections are then refused naming the serial; the node is deleted
// and registered again by an agent with a renewed certificate.
func TestTLSDenyAndNodeDelete(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	bin := binaries(t)
	dir := t.TempDir()
	tdir := filepath.Join(dir, "tls")
	ctl := func(args ...string) (string, error) {
		t.Helper()
		out, err := exec.Command(filepath.Join(bin, "ginctl"), args...).CombinedOutput()
		return string(out), err
	}
	mustCtl := func(args ...string) string {
		t.Helper()
		out, err := ctl(args...)
		if err != nil {
			t.Fatalf("ginctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	// certSerial creates a certificate in d and returns the serial it prints.
	certSerial := func(d string, args ...string) string {
		t.Helper()
		var created struct{ Serial string }
		out := mustCtl(append([]string{"tls", "cert", "create", "--dir", d, "-o", "json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &created); err != nil || created.Serial == "" {
			t.Fatalf("tls cert create -o json: %v\n%s", err, out)
		}
		return created.Serial
	}
	mustCtl("tls", "ca", "create", "--dir", tdir)
	certSerial(tdir, "--role", "master", "--name", "m1")
	agentSerial := certSerial(tdir, "--role", "agent", "--name", "node001")
	certSerial(tdir, "--role", "admin")
	// A renewal: the same CA signs a new node001 certificate elsewhere.
	rdir := filepath.Join(dir, "renewed")
	if err := os.MkdirAll(rdir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.pem", "ca-key.pem"} {
		b, err := os.ReadFile(filepath.Join(tdir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(rdir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	renewedSerial := certSerial(rdir, "--role", "agent", "--name", "node001")
	flags := func(d, base string) []string {
		return []string{"--tls-ca", filepath.Join(tdir, "ca.pem"), "--tls-cert", filepath.Join(d, base+".pem"), "--tls-key", filepath.Join(d, base+"-key.pem")}
	}

	master := &testkit.Proc{Name: "gin-master", Log: filepath.Join(dir, "master.log"), Argv: append([]string{
		filepath.Join(bin, "gin-master"), "--node-id", "m1", "--bind", "127.0.0.1:0", "--raft-bind", "127.0.0.1:0",
		"--http-bind", "", "--data-dir", filepath.Join(dir, "m1"), "--heartbeat-interval", "1s"}, flags(tdir, "master-m1")...)}
	if err := master.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Kill(10 * time.Second) })
	addr := logAddr(t, master, regexp.MustCompile(`msg="gin-master serving".* grpc=(\S+)`))
	startAgent := func(name, d string) *testkit.Proc {
		a := &testkit.Proc{Name: name, Log: filepath.Join(dir, name+".log"), Argv: append([]string{
			filepath.Join(bin, "gin-agent"), "--source", "sim:dgx-h100", "--node-name", "node001", "--master", addr,
			"--metrics-bind", "", "--plan-socket", "", "--heartbeat-interval", "1s"}, flags(d, "agent-node001")...)}
		if err := a.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Kill(10 * time.Second) })
		return a
	}
	agent := startAgent("agent", tdir)
	admin := append([]string{"--master", addr}, flags(tdir, "admin")...)
	registered := func() bool {
		out, err := ctl(append(admin, "nodes", "-o", "json")...)
		return err == nil && strings.Contains(out, `"node001"`)
	}
	waitFor(t, "node001 registered over mTLS", 60*time.Second, registered)

	if out, err := ctl(append(admin, "node", "delete", "node001")...); err == nil || !strings.Contains(out, "live agent session") {
		t.Fatalf("node delete under a live session: %v\n%s", err, out)
	}
	// As docs/SECURITY.md does it: by the certificate file (its serial is the one
	// cert create printed).
	out := mustCtl(append(admin, "tls", "deny", "--cert", filepath.Join(tdir, "agent-node001.pem"), "--reason", "node stolen")...)
	if !strings.Contains(out, "denied serial "+agentSerial) {
		t.Fatalf("tls deny: %s", out)
	}
	want := "certificate serial " + agentSerial + " (spiffe://gin/agent/node001) is denied: node stolen"
	waitFor(t, "the agent's session ended and its reconnection refused", 60*time.Second, func() bool {
		b, _ := os.ReadFile(agent.Log)
		return strings.Contains(string(b), want)
	})
	// The session is gone: the node can be deleted now.
	waitFor(t, "node001 deleted", 30*time.Second, func() bool {
		_, err := ctl(append(admin, "node", "delete", "node001")...)
		return err == nil
	})
	if registered() {
		t.Fatal("node001 still listed after its deletion")
	}
	agent.Kill(10 * time.Second)
	// A renewed certificate registers the name again.
	startAgent("agent-renewed", rdir)
	waitFor(t, "node001 registered again with the renewed certificate", 60*time.Second, registered)
	out = mustCtl(append(admin, "tls", "denied", "-o", "json")...)
	if !strings.Contains(out, `"serial": "`+agentSerial+`"`) || !strings.Contains(out, `"identity": "spiffe://gin/agent/node001"`) || strings.Contains(out, renewedSerial) {
		t.Fatalf("deny list:\n%s", out)
	}
}
