package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/testkit"
)

// TestPinnedPlanPushedToAgents: real gin-agent processes for nodes pa1 and
// pa2 hold a job's plan as soon as it is pinned (as PrologSlurmctld does
// once for the whole job, with ginctl), without asking for it, and serve it
// on their plan sockets after the master is killed.
func TestPinnedPlanPushedToAgents(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gin-master and gin-agent processes")
	}
	bin := binaries(t)
	addr, master, _ := startDev(t, bin, "--dev-nodes", "devsim1", "--heartbeat-interval", "1s")
	dir, err := os.MkdirTemp("", "gpp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	logs := map[string]*lockedBuffer{}
	for _, n := range []string{"pa1", "pa2"} {
		logb := &lockedBuffer{}
		cmd := exec.Command(filepath.Join(bin, "gin-agent"), "--source", "sim:dgx-h100", "--node-name", n, "--master", addr,
			"--metrics-bind", "", "--plan-socket", filepath.Join(dir, n+".sock"), "--plan-dir", filepath.Join(dir, n+"-plans"))
		cmd.Stderr = logb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		logs[n] = logb
	}
	waitLog := func(n, what string) {
		t.Helper()
		re := regexp.MustCompile(what)
		testkit.WaitFor(t, 60*time.Second, fmt.Sprintf("%q in agent %s's log", what, n),
			func() bool { return re.MatchString(logs[n].String()) }, logs[n].String)
	}
	for _, n := range []string{"pa1", "pa2"} {
		waitLog(n, "inventory acknowledged")
	}
	// Nodes are up after their first inventory; pin the job's plan once.
	var pinned string
	testkit.WaitUntilEvery(30*time.Second, 200*time.Millisecond, func() bool {
		pinned, err = runTool(t, bin, "ginctl", "--master", addr, "plan", "--job", "777", "--nodes", "pa[1-2]", "-o", "json")
		return err == nil
	})
	if err != nil {
		t.Fatalf("ginctl plan: %v\n%s", err, pinned)
	}
	m := regexp.MustCompile(`"content_hash":\s*"([0-9a-f]{64})"`).FindStringSubmatch(pinned)
	if m == nil {
		t.Fatalf("no content hash in\n%s", pinned)
	}
	for _, n := range []string{"pa1", "pa2"} {
		waitLog(n, `msg="pushed plan kept" .*job=777 hash=`+m[1])
	}
	if err := master.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = master.Wait()
	for _, n := range []string{"pa1", "pa2"} {
		out, err := runTool(t, bin, "gin-agent", "plan", "--job", "777", "--plan-socket", filepath.Join(dir, n+".sock"))
		if err != nil || out != "plan "+m[1]+" for job 777\n" {
			t.Fatalf("agent %s with the master down: %v %q", n, err, out)
		}
		if strings.Contains(logs[n].String(), `msg="plan fetched"`) || strings.Contains(logs[n].String(), `msg="plan fetch failed"`) {
			t.Fatalf("agent %s asked the masters although the plan was pushed:\n%s", n, logs[n])
		}
	}
}
