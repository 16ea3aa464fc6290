package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/testkit"
)

// TestSlurmScriptsWithTLS runs deploy/slurm's prolog and epilog (without
// Slurm: the variables slurmd sets) against a master serving mutual TLS.
// The prolog asks the node's agent over its socket, which pins the plan with
// its own agent certificate; the epilog expires it with the scheduler
// certificate its defaults file names; without a certificate the epilog is
// refused, logs why and still exits 0 (it never fails a job).
func TestSlurmScriptsWithTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	if os.Geteuid() != 0 {
		ciSkipf(t, "the agent creates plans only for root (the prolog runs as root)")
	}
	bin := binaries(t)
	dir := t.TempDir()
	tdir := filepath.Join(dir, "tls")
	if out, err := runTool(t, bin, "ginctl", "tls", "init", "--dir", tdir, "--cert", "master/m1", "--cert", "agent/node001",
		"--cert", "scheduler", "--cert", "reader"); err != nil {
		t.Fatalf("ginctl tls init: %v\n%s", err, out)
	}
	certs := testkit.CertDir(tdir)
	flags := certs.Flags
	_, addr := startTLSMaster(t, bin, dir, certs, "m1")
	sdir, err := os.MkdirTemp("", "gst") // a socket path fits 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sdir) })
	sock := filepath.Join(sdir, "agent.sock")
	agent := &testkit.Proc{Name: "gin-agent", Log: filepath.Join(dir, "agent.log"), Argv: append([]string{
		filepath.Join(bin, "gin-agent"), "--source", "sim:dgx-h100", "--node-name", "node001", "--master", addr,
		"--metrics-bind", "", "--plan-socket", sock, "--plan-dir", filepath.Join(dir, "plans"), "--heartbeat-interval", "1s"}, flags("agent-node001")...)}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Kill(10 * time.Second) })
	reader := append([]string{"--master", addr}, flags("reader")...)
	waitFor(t, "node001 registered and its agent serving plans", 60*time.Second, func() bool {
		out, err := runTool(t, bin, "ginctl", append(reader, "nodes", "-o", "json")...)
		b, _ := os.ReadFile(agent.Log)
		return err == nil && strings.Contains(out, `"node001"`) && strings.Contains(string(b), "serving plans")
	})

	defaults := func(name string, tls []string) string {
		lines := []string{"GIN_MASTER_HOST=" + addr, "GIN_PLAN_SOCKET=" + sock, "GIN_PROLOG_STRICT=1"}
		if tls != nil {
			lines = append(lines, "GIN_TLS_CA="+tls[1], "GIN_TLS_CERT="+tls[3], "GIN_TLS_KEY="+tls[5])
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	script := func(name, defaultsFile string) (string, error) {
		t.Helper()
		path, _ := filepath.Abs(filepath.Join("../deploy/slurm", name))
		cmd := exec.Command("bash", path)
		// slurmd's environment: no GIN_TLS_* of the test's own.
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "SLURM_JOB_ID=7001", "SLURM_JOB_NODELIST=node001", "SLURM_GPUS_ON_NODE=8",
			"GIN_AGENT=" + filepath.Join(bin, "gin-agent"), "GINCTL=" + filepath.Join(bin, "ginctl"), "GIN_SLURM_DEFAULTS=" + defaultsFile}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	pinned := func() bool {
		out, err := runTool(t, bin, "ginctl", append(reader, "plan", "--job", "7001", "-o", "json")...)
		return err == nil && strings.Contains(out, `"7001"`)
	}

	if out, err := script("gin-prolog.sh", defaults("gin-slurm-none", nil)); err != nil {
		t.Fatalf("prolog (strict): %v\n%s", err, out)
	}
	if !pinned() {
		t.Fatal("after the prolog the master holds no plan for job 7001")
	}
	// The epilog without a certificate: refused, logged, exit 0, plan kept.
	out, err := script("gin-epilog.sh", defaults("gin-slurm-none", nil))
	if err != nil || !strings.Contains(out, "gin-epilog: job 7001: plan not expired") || !strings.Contains(out, "serves mutual TLS") {
		t.Fatalf("epilog without a certificate: %v\n%s\nwant exit 0 and the refusal logged", err, out)
	}
	if !pinned() {
		t.Fatal("an epilog without a certificate expired the plan")
	}
	// With the scheduler certificate of its defaults file: expired.
	if out, err := script("gin-epilog.sh", defaults("gin-slurm", flags("scheduler"))); err != nil || strings.Contains(out, "not expired") {
		t.Fatalf("epilog with the scheduler certificate: %v\n%s", err, out)
	}
	if pinned() {
		t.Fatal("the epilog with the scheduler certificate did not expire the plan")
	}
}
