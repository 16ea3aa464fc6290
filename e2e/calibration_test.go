package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCalibrationOnDevCluster runs the real binaries: a published 2-node ×
// 1-GPU H100 nccl-tests log (NCCL's default) is imported on a dev cluster
// whose node[001-002] have that shape, and the estimate stands on it; a
// second log, derived from the same one with every time × 0.8 and
// NCCL_ALGO=Tree set by environment (what a cluster whose tree is 20%
// faster would have printed), makes a new plan override NCCL with tree and
// name both measurements. A gin-master --dev-fault makes the modelled
// estimate slower and say why.
func TestCalibrationOnDevCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	bin := binaries(t)
	addr, _, _ := startDev(t, bin)
	ctl := func(args ...string) string {
		t.Helper()
		out, err := runTool(t, bin, "ginctl", append([]string{"--master", addr}, args...)...)
		if err != nil {
			t.Fatalf("ginctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	ctlErr := func(args ...string) (string, error) {
		t.Helper()
		return runTool(t, bin, "ginctl", append([]string{"--master", addr}, args...)...)
	}
	estimate := func(ctl func(...string) string) (basis, evidence string, us float64) {
		t.Helper()
		var p struct {
			Basis    string  `json:"basis"`
			Evidence string  `json:"evidence"`
			TimeUs   float64 `json:"time_us"`
		}
		out := ctl("estimate", "--nodes", "node[001-002]", "--gpus-per-node", "1", "--collective", "all_reduce", "--size", "64M", "-o", "json")
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("estimate -o json: %v\n%s", err, out)
		}
		return p.Basis, p.Evidence, p.TimeUs
	}
	if b, _, _ := estimate(ctl); b != "modelled" {
		t.Fatalf("before any import the estimate is %q, want modelled", b)
	}

	published := filepath.Join("..", "internal", "nccltests", "testdata", "xxrjun_smoke_N2_G1.log")
	// The published log ran on other hosts (cnode3-002, cnode3-003): the
	// import refuses it naming the lines, and --force keeps it.
	if out, err := ctlErr("calibrate", "import", "--nccl-tests", published, "--nodes", "node[001-002]"); err == nil ||
		!strings.Contains(out, "line 6: rank 0 ran on host cnode3-002, not on node001") {
		t.Fatalf("a log of other hosts imported: %v\n%s", err, out)
	}
	out := ctl("calibrate", "import", "--nccl-tests", published, "--nodes", "node[001-002]", "--force")
	if !strings.Contains(out, "stored ") {
		t.Fatalf("import: %s", out)
	}
	if b, ev, us := estimate(ctl); b != "measured" || us != 1581.1 || !strings.Contains(ev, "NCCL's default") {
		t.Fatalf("after the import: %s %.1f µs (%s), want measured 1581.1 µs", b, us, ev)
	}

	raw, err := os.ReadFile(published)
	if err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(t.TempDir(), "tree.log")
	if err := os.WriteFile(tree, []byte(fasterTree(t, string(raw), 0.8)), 0o644); err != nil {
		t.Fatal(err)
	}
	out = ctl("calibrate", "import", "--nccl-tests", tree, "--nodes", "node[001-002]", "--force")
	if !strings.Contains(out, "tree/* (forced by log)") {
		t.Fatalf("import of the tree log: %s", out)
	}
	out = ctl("plan", "--job", "e2e-calibrated", "--nodes", "node[001-002]", "--gpus-per-node", "1")
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "all_reduce") && strings.Contains(l, "measured") {
			line = l
		}
	}
	if !strings.Contains(line, "tree/") || !strings.Contains(line, "measured 20% faster than NCCL's default") || strings.Count(line, "measurement ") != 2 {
		t.Fatalf("the plan does not override NCCL with the measured tree:\n%s", out)
	}

	// A NIC retrained at 200 Gb/s on another dev cluster.
	faddr, _, _ := startDev(t, bin, "--dev-fault", "node001/mlx5_0=200")
	fctl := func(args ...string) string {
		t.Helper()
		out, err := runTool(t, bin, "ginctl", append([]string{"--master", faddr}, args...)...)
		if err != nil {
			t.Fatalf("ginctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	_, ev, slow := estimate(fctl)
	clean, _ := runTool(t, bin, "ginctl", "--master", faddr, "estimate", "--nodes", "node[003-004]", "--gpus-per-node", "1", "--collective", "all_reduce", "--size", "64M", "-o", "json")
	var c struct {
		TimeUs float64 `json:"time_us"`
	}
	if err := json.Unmarshal([]byte(clean), &c); err != nil {
		t.Fatal(err)
	}
	if slow <= c.TimeUs || !strings.Contains(ev, "slowest 200 Gb/s") {
		t.Errorf("with node001/mlx5_0 at 200 Gb/s: %.1f µs (%s); node[003-004]: %.1f µs", slow, ev, c.TimeUs)
	}
}

// fasterTree derives from a log what NCCL_ALGO=Tree runs f times faster
// would print: times × f, algbw and busbw ÷ f, the ENV line NCCL prints
// added (rows are rejoined with single spaces, as pasted logs often are).
func fasterTree(t *testing.T, log string, f float64) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("node001:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Tree\n")
	for _, l := range strings.Split(log, "\n") {
		fs := strings.Fields(l)
		if len(fs) == 13 && !strings.HasPrefix(fs[0], "#") {
			for _, i := range []int{5, 6, 7, 9, 10, 11} {
				v, err := strconv.ParseFloat(fs[i], 64)
				if err != nil {
					t.Fatalf("row %q: %v", l, err)
				}
				if i == 5 || i == 9 {
					v *= f
				} else {
					v /= f
				}
				fs[i] = strconv.FormatFloat(v, 'f', 2, 64)
			}
			l = strings.Join(fs, " ")
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}
