package e2e

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestCheckOnDevCluster runs the real binaries: a dev cluster with an
// NVLink down on node002, a compute port down on node003 and an XID 94 on
// node004's GPU2; ginctl check fails node002 and node003, each for its
// fault, warns node004 and passes the rest. A fail exits 1 (after the
// output); --exit-zero keeps 0.
func TestCheckOnDevCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	bin := binaries(t)
	addr, _, _ := startDev(t, bin, "--dev-fault", "node002/GPU3/nvlink7=down", "--dev-fault", "node003/mlx5_0=down", "--dev-fault", "node004/GPU2/xid=94")
	out, err := runTool(t, bin, "ginctl", "--master", addr, "check", "-o", "json", "--exit-zero")
	if err != nil {
		t.Fatalf("ginctl check: %v\n%s", err, out)
	}
	var resp struct {
		Nodes []struct {
			Node     string `json:"node"`
			Verdict  string `json:"verdict"`
			Reason   string `json:"reason"`
			Findings []struct {
				Check    string `json:"check"`
				Severity string `json:"severity"`
				Subject  string `json:"subject"`
				Impact   string `json:"impact"`
				Fix      string `json:"fix"`
			} `json:"findings"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(resp.Nodes) < 4 {
		t.Fatalf("%d verdicts: %s", len(resp.Nodes), out)
	}
	want := map[string]string{"node002": "nvlink-down GPU3/nvlink7", "node003": "ib-port-down mlx5_0:1"}
	for _, n := range resp.Nodes {
		w, faulty := want[n.Node]
		switch {
		case n.Node == "node004":
			if n.Verdict != "warn" || n.Reason != "xid GPU2/xid94" {
				t.Errorf("node004: %s, reason %q; want warn for its XID", n.Verdict, n.Reason)
			}
		case !faulty && (n.Verdict != "pass" || len(n.Findings) != 0):
			t.Errorf("%s: %s %v, want pass", n.Node, n.Verdict, n.Findings)
		case faulty && (n.Verdict != "fail" || len(n.Findings) != 1 || n.Reason != w || n.Findings[0].Impact == "" || n.Findings[0].Fix == ""):
			t.Errorf("%s: %s, reason %q, findings %+v; want fail for %q", n.Node, n.Verdict, n.Reason, n.Findings, w)
		}
	}
	// node002 fails: the table and the findings, then exit 1 naming it.
	out, err = runTool(t, bin, "ginctl", "--master", addr, "check", "--nodes", "node002")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out, "node002  fail     nvlink-down  GPU3/nvlink7") || !strings.Contains(out, "impact: GPU3 lost") ||
		!strings.Contains(out, "1 node(s): 0 pass, 0 warn, 1 fail") || !strings.HasSuffix(out, "ginctl: 1 of 1 node(s) fail their health check: node002 (--exit-zero exits 0 on failures)\n") {
		t.Errorf("ginctl check --nodes node002: %v\n%s\nwant the table, then exit 1 naming node002", err, out)
	}
	// A warning is not a fail.
	if out, err := runTool(t, bin, "ginctl", "--master", addr, "check", "--nodes", "node[001,004]"); err != nil {
		t.Errorf("ginctl check --nodes node[001,004] (pass, warn): %v\n%s\nwant exit 0", err, out)
	}
}
