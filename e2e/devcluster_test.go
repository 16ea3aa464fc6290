package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/testkit"
)

// binaries builds gin-master, gin-agent and ginctl once into a temp dir.
func binaries(t testing.TB) string {
	return testkit.BuildCommands(t, "gin-master", "gin-agent", "ginctl")
}

var upRE = regexp.MustCompile(`GIN dev cluster is up: master (\S+),`)

func startDev(t testing.TB, bin string, args ...string) (addr string, cmd *exec.Cmd, stderr *lockedBuffer) {
	t.Helper()
	cmd = exec.Command(filepath.Join(bin, "gin-master"), append([]string{"--dev", "--bind", "127.0.0.1:0", "--data-dir", t.TempDir()}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr = &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := upRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	select {
	case a, ok := <-found:
		if !ok {
			t.Fatalf("gin-master --dev exited before it was up:\n%s", stderr)
		}
		return a, cmd, stderr
	case <-time.After(120 * time.Second):
		t.Fatalf("gin-master --dev not up within 120 s:\n%s", stderr)
	}
	return "", nil, nil
}

func runTool(t *testing.T, bin, tool string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, tool), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String() + errb.String(), err
	}
	return out.String(), nil
}

type node struct {
	Name  string `json:"name"`
	State string `json:"state"`
	GPUs  int    `json:"gpu_count"`
}

func nodes(t *testing.T, bin, addr string) []node {
	t.Helper()
	out, err := runTool(t, bin, "ginctl", "--master", addr, "nodes", "-o", "json")
	if err != nil {
		t.Fatalf("ginctl nodes -o json: %v\n%s", err, out)
	}
	var ns []node
	if err := json.Unmarshal([]byte(out), &ns); err != nil {
		t.Fatalf("ginctl nodes -o json is not a JSON array: %v\n%s", err, out)
	}
	return ns
}

// readmeLine returns the first line of the file at path that starts with
// prefix, its trailing "# comment" cut, so the test runs what the docs say.
func readmeLine(t *testing.T, path, prefix string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			if i := strings.Index(l, " #"); i >= 0 {
				l = l[:i]
			}
			return strings.TrimSpace(l)
		}
	}
	t.Fatalf("%s has no line starting with %q", path, prefix)
	return ""
}

// shellWords splits a documented command line as sh does for the plain
// words and single-quoted arguments the docs use.
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in, quoted := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			quoted, in = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case !quoted && strings.ContainsRune("\"$`\\|&;<>()*?", r):
			return nil, fmt.Errorf("%q needs a shell", r)
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote")
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// waitFor polls cond every 100 ms (it runs ginctl) until it holds or the
// deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	testkit.WaitForEvery(t, d, 100*time.Millisecond, what, cond)
}

func TestDevClusterEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	bin := binaries(t)
	addr, master, stderr := startDev(t, bin, "--heartbeat-interval", "1s")

	ns := nodes(t, bin, addr)
	if len(ns) != 4 {
		t.Fatalf("ginctl nodes: %d nodes, want 4: %+v", len(ns), ns)
	}
	for _, n := range ns {
		if n.State != "up" || n.GPUs != 8 {
			t.Errorf("node %+v: want state up with 8 GPUs", n)
		}
	}

	out, err := runTool(t, bin, "ginctl", "--master", addr, "topo", "-m")
	if err != nil {
		t.Fatalf("ginctl topo -m: %v\n%s", err, out)
	}
	for _, want := range []string{"node001/GPU0", "NV18", "NET1", "NET3", "PXB", "SYS", "Legend:", "NIC Legend:"} {
		if !strings.Contains(out, want) {
			t.Errorf("ginctl topo -m lacks %q:\n%s", want, out)
		}
	}
	out, err = runTool(t, bin, "ginctl", "--master", addr, "topo", "-m", "--nodes", "node[001-002]", "--no-nics")
	if err != nil || strings.Contains(out, "node003") || strings.Contains(out, "NIC") {
		t.Errorf("topo -m --nodes node[001-002] --no-nics: err %v\n%s", err, out)
	}
	if out, err = runTool(t, bin, "ginctl", "--master", addr, "topo", "-m", "--nodes", "node[001-"); err == nil {
		t.Errorf("a bad hostlist was accepted:\n%s", out)
	} else if !strings.Contains(out, `ginctl: --nodes: hostlist: "node[001-": unmatched`) {
		t.Errorf("a bad hostlist: want the --nodes error in words, got:\n%s", out)
	}

	out, err = runTool(t, bin, "ginctl", "--master", addr, "path", "node001/GPU0", "node004/GPU0", "-o", "json")
	if err != nil {
		t.Fatalf("ginctl path: %v\n%s", err, out)
	}
	var path struct {
		Path struct {
			Class      string `json:"class"`
			SwitchHops int    `json:"switch_hops"`
		} `json:"path"`
	}
	if err := json.Unmarshal([]byte(out), &path); err != nil || path.Path.Class != "net" || path.Path.SwitchHops != 3 {
		t.Errorf("path node001/GPU0 -> node004/GPU0: want NET over 3 switches, got %s (%v)", out, err)
	}

	// The README's tour imports a published nccl-tests log, as written, and
	// calibrate list then shows what it stored.
	line := readmeLine(t, "../README.md", "./bin/ginctl calibrate import ")
	if ex := readmeLine(t, "../examples/nccl-tests/README.md", "./bin/ginctl calibrate import "); ex != line {
		t.Errorf("examples/nccl-tests/README.md gives %q, the README %q: the same import, one tested command", ex, line)
	}
	args, err := shellWords(strings.TrimPrefix(line, "./bin/ginctl "))
	if err != nil {
		t.Fatalf("README line %q: %v", line, err)
	}
	imp := exec.Command(filepath.Join(bin, "ginctl"), append([]string{"--master", addr}, args...)...)
	imp.Dir = ".." // the tour runs at the top of the repository
	if b, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("the README's %q: %v\n%s", line, err, b)
	}
	out, err = runTool(t, bin, "ginctl", "--master", addr, "calibrate", "list", "-o", "json")
	if err != nil {
		t.Fatalf("ginctl calibrate list: %v\n%s", err, out)
	}
	var list struct {
		Measurements []struct {
			Nodes  []string `json:"nodes"`
			Source string   `json:"source"`
		} `json:"measurements"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("calibrate list -o json: %v\n%s", err, out)
	}
	if len(list.Measurements) != 3 {
		t.Errorf("calibrate list after the README's import: %d measurements, want 3 (all_reduce, all_gather, reduce_scatter):\n%s", len(list.Measurements), out)
	}
	for _, m := range list.Measurements {
		if len(m.Nodes) != 1 || m.Nodes[0] != "node001" || !strings.Contains(m.Source, "dgx-h100-1x8.log") {
			t.Errorf("stored measurement %+v: want node001 from dgx-h100-1x8.log", m)
		}
	}

	out, err = runTool(t, bin, "gin-agent", "--once", "-o", "json", "--source", "sim:dgx-h100")
	if err != nil {
		t.Fatalf("gin-agent --once: %v\n%s", err, out)
	}
	var inv struct {
		GPUs []json.RawMessage `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(out), &inv); err != nil || len(inv.GPUs) != 8 {
		t.Errorf("gin-agent --once -o json: want .gpus | length == 8, got %d (%v)", len(inv.GPUs), err)
	}

	// A separate agent process joins, then dies: its node goes down.
	agent := exec.Command(filepath.Join(bin, "gin-agent"), "--source", "sim:pcie-8gpu", "--master", addr,
		"--node-name", "extra01", "--heartbeat-interval", "1s", "--metrics-bind", "127.0.0.1:0")
	var agentErr lockedBuffer
	agent.Stderr = &agentErr
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Process.Kill(); _ = agent.Wait() })
	state := func(name string) string {
		for _, n := range nodes(t, bin, addr) {
			if n.Name == name {
				return n.State
			}
		}
		return ""
	}
	waitFor(t, "extra01 to register", 60*time.Second, func() bool { return state("extra01") == "up" })
	// ginctl watch (the real binary) sees the node go down: old → new state.
	watch := exec.Command(filepath.Join(bin, "ginctl"), "--master", addr, "watch", "-o", "json")
	var watchOut, watchErr lockedBuffer
	watch.Stdout, watch.Stderr = &watchOut, &watchErr
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = watch.Process.Kill(); _ = watch.Wait() })
	waitFor(t, "the watch header", 30*time.Second, func() bool { return strings.Contains(watchErr.String(), "watching changes after index") })
	_ = agent.Process.Kill()
	_ = agent.Wait()
	waitFor(t, "extra01 to be marked down", 60*time.Second, func() bool { return state("extra01") == "down" })
	waitFor(t, "ginctl watch to print extra01 up → down", 30*time.Second, func() bool {
		for _, l := range strings.Split(watchOut.String(), "\n") {
			var ev struct {
				Kind     string `json:"kind"`
				OldState string `json:"old_state"`
				NewState string `json:"new_state"`
				Node     struct {
					Name string `json:"name"`
				} `json:"node"`
			}
			if json.Unmarshal([]byte(l), &ev) == nil && ev.Kind == "node_state" && ev.Node.Name == "extra01" && ev.OldState == "up" && ev.NewState == "down" {
				return true
			}
		}
		return false
	})

	// The three binaries print the same version line.
	var versions []string
	for _, b := range []string{"gin-master", "gin-agent", "ginctl"} {
		out, err := runTool(t, bin, b, "--version")
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", b, err, out)
		}
		versions = append(versions, strings.TrimPrefix(out, b+" "))
	}
	if versions[0] != versions[1] || versions[1] != versions[2] || !strings.Contains(versions[0], runtime.Version()) {
		t.Errorf("--version differs between the binaries: %q", versions)
	}
	if s := state("node001"); s != "up" {
		t.Errorf("node001 is %q after another node died, want up", s)
	}

	// A planned shutdown is clean.
	if err := master.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- master.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("gin-master --dev exit after SIGTERM: %v\n%s", err, stderr)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("gin-master --dev did not stop within 30 s of SIGTERM")
	}
}
