package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gin-topology/gin/internal/devcluster"
	"github.com/gin-topology/gin/internal/jsonout"
	"github.com/gin-topology/gin/internal/jsonout/schematest"
)

// ctlResult is one ginctl invocation.
type ctlResult struct {
	code           int
	stdout, stderr string
}

// ctl runs ginctl's command tree in-process, as main does, against master.
func ctl(ctx context.Context, master, stdin string, args ...string) ctlResult {
	var out, errb bytes.Buffer
	env := func(string) string { return "" }
	if master != "" {
		args = append([]string{"--master", master}, args...)
	}
	code := run(ctx, args, strings.NewReader(stdin), &out, &errb, env)
	return ctlResult{code, out.String(), errb.String()}
}

// startDev starts an in-process dev cluster (4 simulated DGX H100 on the
// default fat tree) whose data lives in the test's temp dir.
func startDev(t *testing.T) *devcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cl, done, err := devcluster.Start(ctx, devcluster.Config{Bind: "127.0.0.1:0", HTTPBind: "127.0.0.1:0", DataDir: t.TempDir(), HeartbeatInterval: time.Hour})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev cluster: %v", err)
		}
	})
	return cl
}

// scrubbers replace what changes from run to run (ports, times, Raft
// indexes and terms) in table output and in stderr.
var scrubbers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:PORT"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "TIME"},
	{regexp.MustCompile(`(index|term|commit|applied|commit index) \d+`), "$1 N"},
	{regexp.MustCompile(`/tmp/\S+`), "TMPDIR"},
	{regexp.MustCompile(`cluster [0-9a-f]{32}`), "cluster ID"},
	{regexp.MustCompile(`(?m)^(\s*)(index|updated_index|created_index|commit_index|applied_index|term): \d+$`), "$1$2: N"},
}

// volatileKeys are the JSON fields whose values change from run to run;
// their values are replaced after the document was validated.
var volatileKeys = map[string]bool{
	"index": true, "updated_index": true, "created_index": true, "commit_index": true, "applied_index": true,
	"term": true, "state_changed_at": true, "created_at": true, "expires_at": true, "collected_at": true,
	"scanned_at": true, "staleness": true, "lag": true, "at": true, "address": true, "client_address": true, "raft_address": true, "http_address": true,
	"leader_address": true, "cluster_id": true, "imported_at": true, "denied_at": true,
}

func scrubText(s string) string {
	for _, sc := range scrubbers {
		s = sc.re.ReplaceAllString(s, sc.with)
	}
	return s
}

// volatileLine matches an indented JSON member whose value is a number or
// a string: its key, value and trailing comma.
var volatileLine = regexp.MustCompile(`^(\s*)"([a-z_]+)": (-?[0-9][0-9.e+-]*|"[^"]*")(,?)$`)

// scrubJSON indents each document (keeping its key order, which the golden
// files check too) and replaces the values of volatileKeys with <number>
// or <string>.
func scrubJSON(t *testing.T, doc string, lines bool) string {
	t.Helper()
	docs := []string{doc}
	if lines {
		docs = strings.Split(strings.TrimRight(doc, "\n"), "\n")
	}
	var out strings.Builder
	for _, d := range docs {
		var ind bytes.Buffer
		if err := json.Indent(&ind, []byte(d), "", "  "); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, d)
		}
		for _, l := range strings.Split(strings.TrimRight(ind.String(), "\n"), "\n") {
			if m := volatileLine.FindStringSubmatch(l); m != nil && volatileKeys[m[2]] && m[3] != `""` {
				kind := "<number>"
				if strings.HasPrefix(m[3], `"`) {
					kind = "<string>"
				}
				l = fmt.Sprintf(`%s"%s": "%s"%s`, m[1], m[2], kind, m[4])
			}
			out.WriteString(l)
			out.WriteByte('\n')
		}
	}
	return out.String()
}

// golden compares got with testdata/golden/<name>.golden (-update rewrites it).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/ginctl -run %s -update writes it)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("output of %s changed (go test ./cmd/ginctl -run '%s' -update, then review the diff):\n%s", name, t.Name(), diff(string(want), got))
	}
}

// diff shows the first differing lines.
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, wl, gl)
		}
	}
	return "(same lines, different bytes)"
}

// ctlCase is one command line and the golden file of its output.
type ctlCase struct {
	name  string
	args  []string
	stdin string
}

// check runs one case: the exit status and stderr are part of the golden
// file; with -o json the output (also of a command that printed it and
// then exits 1, as check and diagnose do on a fail) is validated against
// the command's schema before volatile values are scrubbed.
func check(t *testing.T, master string, tc ctlCase) ctlResult {
	t.Helper()
	r := ctl(context.Background(), master, tc.stdin, tc.args...)
	stdout := r.stdout
	if isJSON(tc.args) && (r.code == 0 || r.stdout != "") {
		o := schemaFor(t, tc.args)
		s := compileSchema(t, o)
		if err := schematest.Validate(s, []byte(r.stdout), o.lines); err != nil {
			t.Fatalf("ginctl %s: output does not conform to docs/json-schema/%s.json: %v", strings.Join(tc.args, " "), o.file, err)
		}
		stdout = scrubJSON(t, r.stdout, o.lines)
	} else {
		stdout = scrubText(stdout)
	}
	got := fmt.Sprintf("$ ginctl %s\nexit %d\n--- stdout\n%s--- stderr\n%s", scrubText(strings.Join(tc.args, " ")), r.code, stdout, scrubText(r.stderr))
	golden(t, tc.name, got)
	return r
}

func isJSON(args []string) bool {
	for i, a := range args {
		if a == "-ojson" || a == "--output=json" || ((a == "-o" || a == "--output") && i+1 < len(args) && args[i+1] == "json") {
			return true
		}
	}
	return false
}

// schemaFor finds the jsonOutputs entry of a command line: the longest
// command whose words (and flag, for "estimate --nodes") all appear.
func schemaFor(t *testing.T, args []string) jsonOutput {
	t.Helper()
	line := " " + strings.Join(args, " ") + " "
	var best jsonOutput
	for _, o := range jsonOutputs() {
		words := strings.Fields(o.command)
		ok := strings.HasPrefix(line, " "+words[0]+" ")
		for _, w := range words[1:] {
			ok = ok && strings.Contains(line, " "+w+" ")
		}
		if ok && len(o.command) > len(best.command) {
			best = o
		}
	}
	if best.command == "" {
		t.Fatalf("no JSON schema for ginctl %v", args)
	}
	return best
}

func mustSchema(t *testing.T, o jsonOutput) []byte {
	t.Helper()
	b, err := jsonout.Schema("ginctl "+o.command+" -o json", o.sample)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCommands drives every ginctl command through its cobra command
// against an in-process dev cluster and compares table and JSON output
// with golden files (testdata/golden; -update rewrites them). The cases
// run in order: the read-only ones first, then the ones that change the
// cluster (plans, fabric import, membership).
func TestCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dev cluster")
	}
	cl := startDev(t)
	addr := cl.Master.Addr()
	dump, err := os.ReadFile("../../internal/discovery/fabricscan/testdata/ibnetdiscover/fat-tree-123-hosts.out")
	if err != nil {
		t.Fatal(err)
	}
	ibDisabled, err := os.ReadFile("../../internal/nccllog/testdata/ib-disabled-by-env.log")
	if err != nil {
		t.Fatal(err)
	}
	shm, err := os.ReadFile("../../internal/nccllog/testdata/p2p-disabled-shm.log")
	if err != nil {
		t.Fatal(err)
	}
	smoke, err := os.ReadFile("../../internal/nccltests/testdata/xxrjun_smoke_N2_G1.log")
	if err != nil {
		t.Fatal(err)
	}
	// The smoke log's all_reduce on node[001-002] × 1 GPU: its id is derived
	// from the dev cluster's shape, so it is the same on every run.
	const smokeID = "24e0d501f10f3ddb"
	// The smoke log as if it had run on the dev cluster's nodes.
	onDev := strings.NewReplacer("cnode3-002", "node001", "cnode3-003", "node002").Replace(string(smoke))
	badLog := string(smoke[:strings.Index(string(smoke), "    67108864")]) + "    67108864       8388608    double     sum      -1  1581.10   4x.44   42.44       0  1587.93   42.26   42.26       0\n"
	cases := []ctlCase{
		{"nodes", []string{"nodes"}, ""},
		{"nodes-json", []string{"nodes", "-o", "json"}, ""},
		{"nodes-selected", []string{"nodes", "--nodes", "node[001-002]"}, ""},
		{"nodes-no-headers", []string{"nodes", "--no-headers"}, ""},
		{"node", []string{"node", "node001"}, ""},
		{"node-json", []string{"node", "node001", "-o", "json"}, ""},
		{"topo", []string{"topo", "-m"}, ""},
		{"topo-bw", []string{"topo", "-m", "--bw", "--nodes", "node[001-002]", "--no-nics"}, ""},
		{"topo-json", []string{"topo", "-m", "--nodes", "node001", "-o", "json"}, ""},
		{"path", []string{"path", "node001/GPU0", "node004/GPU3"}, ""},
		{"path-json", []string{"path", "node001/GPU0", "node001/GPU1", "-o", "json"}, ""},
		{"cluster", []string{"cluster"}, ""},
		{"cluster-json", []string{"cluster", "-o", "json"}, ""},
		{"members", []string{"members"}, ""},
		{"members-json", []string{"members", "-o", "json"}, ""},
		{"members-yaml", []string{"members", "-o", "yaml"}, ""},
		{"estimate-gpus", []string{"estimate", "--gpus", "16", "--workload", "dp"}, ""},
		{"estimate-gpus-json", []string{"estimate", "--gpus", "16", "--workload", "dp", "-o", "json"}, ""},
		{"estimate-nodes", []string{"estimate", "--nodes", "node[001-002]", "--collective", "all_reduce", "--size", "1G"}, ""},
		{"estimate-nodes-json", []string{"estimate", "--nodes", "node[001-002]", "--collective", "all_reduce", "--size", "1G", "-o", "json"}, ""},
		{"order", []string{"order", "--nodes", "node[004,001,003,002]"}, ""},
		{"order-json", []string{"order", "--nodes", "node[004,001,003,002]", "-o", "json"}, ""},
		{"order-yaml", []string{"order", "--nodes", "node[004,001,003,002]", "-o", "yaml"}, ""},
		{"check", []string{"check"}, ""},
		{"check-json", []string{"check", "--nodes", "node001", "-o", "json"}, ""},
		{"diagnose", []string{"diagnose", "--nccl-log", "-"}, string(ibDisabled)},
		{"diagnose-json", []string{"diagnose", "--nccl-log", "-", "--nodes", "node001", "-o", "json"}, string(shm)},
		{"export-slurm", []string{"export", "slurm"}, ""},
		{"export-slurm-block", []string{"export", "slurm-block"}, ""},
		{"export-dot", []string{"export", "dot"}, ""},
		{"export-nccl-topo", []string{"export", "nccl-topo", "--node", "node001"}, ""},
		{"export-prometheus-sd", []string{"export", "prometheus-sd", "--agent-port", "9100"}, ""},
		{"export-kueue", []string{"export", "kueue"}, ""},
		{"plan-create", []string{"plan", "--job", "42", "--nodes", "node[001-002]"}, ""},
		{"plan-json", []string{"plan", "--job", "42", "-o", "json"}, ""},
		{"plan-delete", []string{"plan", "delete", "--job", "42"}, ""},
		{"plan-delete-json", []string{"plan", "delete", "--job", "42", "-o", "json"}, ""},
		{"calibrate-import", []string{"calibrate", "import", "--nccl-tests", "-", "--nodes", "node[001-002]"}, onDev},
		{"calibrate-import-json", []string{"calibrate", "import", "--nccl-tests", "-", "--nodes", "node[001-002]", "--algo", "tree", "-o", "json"}, onDev},
		{"calibrate-import-bad", []string{"calibrate", "import", "--nccl-tests", "-", "--nodes", "node[001-002]"}, badLog},
		// The published log ran on other hosts; the same log on B300s is
		// not the dev cluster's H100s: both refused, naming the line;
		// --force keeps the first, flagged.
		{"calibrate-import-other-hosts", []string{"calibrate", "import", "--nccl-tests", "-", "--nodes", "node[001-002]"}, string(smoke)},
		{"calibrate-import-other-gpu", []string{"calibrate", "import", "--nccl-tests", "-", "--nodes", "node[001-002]"},
			strings.ReplaceAll(onDev, "NVIDIA H100 80GB HBM3", "NVIDIA B300 SXM6 AC")},
		{"calibrate-import-force", []string{"calibrate", "import", "--nccl-tests", "-", "--nodes", "node[001-002]", "--algo", "ring", "--force"}, string(smoke)},
		// The imports match the dev cluster's shape (2 nodes × 1 H100, one
		// 400 Gb/s NIC each): the one-GPU-per-node rules of a new plan and
		// the estimate now stand on the measurements.
		{"plan-calibrated", []string{"plan", "--job", "43", "--nodes", "node[001-002]"}, ""},
		{"estimate-calibrated", []string{"estimate", "--nodes", "node[001-002]", "--gpus-per-node", "1", "--collective", "all_reduce", "--size", "64M"}, ""},
		{"estimate-calibrated-between", []string{"estimate", "--nodes", "node[001-002]", "--gpus-per-node", "1", "--collective", "all_reduce", "--size", "100M"}, ""},
		{"calibrate-list", []string{"calibrate", "list"}, ""},
		{"calibrate-list-json", []string{"calibrate", "list", "-o", "json"}, ""},
		{"calibrate-show", []string{"calibrate", "show", smokeID}, ""},
		{"calibrate-show-json", []string{"calibrate", "show", smokeID, "-o", "json"}, ""},
		{"calibrate-delete", []string{"calibrate", "delete", smokeID}, ""},
		{"calibrate-delete-json", []string{"calibrate", "delete", smokeID, "-o", "json"}, ""},
		// A job's NCCL Inspector dump (one file per rank, as the Inspector
		// names them), on the dev cluster's node001-002: stored as
		// production measurements of NCCL's choice; then a dump whose ranks
		// ran on a host the cluster does not have is refused.
		{"calibrate-import-inspector", []string{"calibrate", "import", "--nccl-inspector", inspectorDump(t, "node001", "node002")}, ""},
		{"calibrate-import-inspector-json", []string{"calibrate", "import", "--nccl-inspector", inspectorDump(t, "node001", "node002"), "-o", "json"}, ""},
		{"calibrate-import-inspector-job", []string{"calibrate", "import", "--nccl-inspector", inspectorDump(t, "node001", "node002"), "--job", "77"}, ""},
		{"job-report", []string{"job", "report", "--job", "77"}, ""},
		{"job-report-json", []string{"job", "report", "--job", "77", "-o", "json"}, ""},
		{"job-report-none", []string{"job", "report", "--job", "78"}, ""},
		{"calibrate-import-inspector-other-host", []string{"calibrate", "import", "--nccl-inspector", inspectorDump(t, "node001", "gpu-x9"), "--nodes", "node[001-002]"}, ""},
		{"fabric-import-json", []string{"fabric", "import", "--ibnetdiscover", "-", "-o", "json"}, string(dump)},
		{"fabric-import", []string{"fabric", "import", "--ibnetdiscover", "-"}, string(dump)},
		// The deny list (the dev cluster runs without TLS: the list is kept
		// and replicated all the same).
		{"tls-deny", []string{"tls", "deny", "3f:2a:9c:01", "--reason", "laptop stolen"}, ""},
		{"tls-deny-json", []string{"tls", "deny", "serial=0B", "-o", "json"}, ""},
		{"tls-deny-again", []string{"tls", "deny", "3F2A9C01"}, ""},
		{"tls-denied", []string{"tls", "denied"}, ""},
		{"tls-denied-json", []string{"tls", "denied", "-o", "json"}, ""},
		{"tls-allow", []string{"tls", "allow", "3F2A9C01"}, ""},
		{"tls-allow-json", []string{"tls", "allow", "0b", "-o", "json"}, ""},
		// Admissions: a master that is not a member joins only once admitted;
		// members remove takes back an admission not used.
		{"members-add", []string{"members", "add", "m4", "--address", "127.0.0.1:7001"}, ""},
		{"members-add-json", []string{"members", "add", "m5", "-o", "json"}, ""},
		{"members-pending", []string{"members", "--pending"}, ""},
		{"members-pending-json", []string{"members", "--pending", "-o", "json"}, ""},
		{"members-remove-admitted", []string{"members", "remove", "m4"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { check(t, addr, tc) })
	}
}

// TestErrors: each error is one sentence that names what was wrong and
// what to do, with exit 2 for what the user typed and 1 for the rest.
func TestErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dev cluster")
	}
	cl := startDev(t)
	addr := cl.Master.Addr()
	malformed, err := os.ReadFile("../../internal/discovery/fabricscan/testdata/ibnetdiscover/malformed.out")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		ctlCase
		master   string
		wantCode int
	}{
		{ctlCase{"err-missing-arg", []string{"node"}, ""}, addr, exitUsage},
		{ctlCase{"err-missing-second-arg", []string{"path", "node001/GPU0"}, ""}, addr, exitUsage},
		{ctlCase{"err-extra-arg", []string{"nodes", "node001"}, ""}, addr, exitUsage},
		{ctlCase{"err-unknown-command", []string{"bogus"}, ""}, addr, exitUsage},
		{ctlCase{"err-unknown-flag", []string{"nodes", "--bogus"}, ""}, addr, exitUsage},
		{ctlCase{"err-flag-number", []string{"estimate", "--gpus", "x"}, ""}, addr, exitUsage},
		{ctlCase{"err-flag-duration", []string{"--timeout", "x", "nodes"}, ""}, addr, exitUsage},
		{ctlCase{"err-output", []string{"nodes", "-o", "xml"}, ""}, addr, exitUsage},
		{ctlCase{"err-log-level", []string{"--log-level", "loud", "nodes"}, ""}, addr, exitUsage},
		{ctlCase{"err-watch-since-zero", []string{"watch", "--since", "0"}, ""}, addr, exitUsage},
		{ctlCase{"err-export-format", []string{"export", "nope"}, ""}, addr, exitUsage},
		{ctlCase{"err-export-json-output", []string{"export", "slurm", "-o", "json"}, ""}, addr, exitUsage},
		{ctlCase{"err-fabric-no-file", []string{"fabric", "import", "--ibnetdiscover", "/nonexistent/dump"}, ""}, addr, exitUsage},
		{ctlCase{"err-diagnose-no-file", []string{"diagnose", "--nccl-log", "/nonexistent/nccl.log"}, ""}, addr, exitUsage},
		{ctlCase{"err-calibrate-no-file", []string{"calibrate", "import", "--nccl-tests", "/nonexistent/all_reduce.log", "--nodes", "node001"}, ""}, addr, exitUsage},
		{ctlCase{"err-bad-hostlist", []string{"nodes", "--nodes", "node[001-"}, ""}, addr, exitUsage},
		{ctlCase{"err-bad-hostlist-topo", []string{"topo", "-m", "--nodes", "node[3-1]"}, ""}, addr, exitUsage},
		{ctlCase{"err-unknown-node", []string{"node", "nodeX"}, ""}, addr, exitErr},
		{ctlCase{"err-unknown-gpu", []string{"path", "node001/GPU9", "node001/GPU0"}, ""}, addr, exitErr},
		{ctlCase{"err-no-plan", []string{"plan", "--job", "9"}, ""}, addr, exitErr},
		{ctlCase{"err-export-slurm-block", []string{"export", "slurm-block"}, ""}, addr, exitErr},
		{ctlCase{"err-fabric-malformed", []string{"fabric", "import", "--ibnetdiscover", "-"}, string(malformed)}, addr, exitErr},
		{ctlCase{"err-remove-unknown-master", []string{"members", "remove", "nope"}, ""}, addr, exitErr},
		{ctlCase{"err-remove-last-voter", []string{"members", "remove", "dev-master"}, ""}, addr, exitErr},
		{ctlCase{"err-add-member", []string{"members", "add", "dev-master"}, ""}, addr, exitErr},
		{ctlCase{"err-deny-bad-serial", []string{"tls", "deny", "12:xy"}, ""}, addr, exitUsage},
		{ctlCase{"err-allow-not-denied", []string{"tls", "allow", "0C"}, ""}, addr, exitErr},
		{ctlCase{"err-node-delete-live", []string{"node", "delete", "node001"}, ""}, addr, exitErr},
		{ctlCase{"err-node-delete-unknown", []string{"node", "delete", "nodeX"}, ""}, addr, exitErr},
		{ctlCase{"err-http-port", []string{"nodes"}, ""}, cl.Master.HTTPAddr(), exitErr},
		{ctlCase{"err-connection-refused", []string{"nodes"}, ""}, "127.0.0.1:1", exitErr},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := check(t, tc.master, tc.ctlCase)
			if r.code != tc.wantCode {
				t.Errorf("exit %d, want %d", r.code, tc.wantCode)
			}
			if r.stdout != "" {
				t.Errorf("an error printed on stdout: %q", r.stdout)
			}
			line := strings.TrimSuffix(r.stderr, "\n")
			if !strings.HasPrefix(line, "ginctl: ") || strings.Contains(line, "\n") {
				t.Errorf("stderr is not one line \"ginctl: ...\": %q", r.stderr)
			}
			for _, internal := range []string{"rpc error", "desc =", "strconv.", "(NotFound)", "(Internal)", "export: export", "raft:", "accepts 1 arg"} {
				if strings.Contains(line, internal) {
					t.Errorf("stderr leaks %q: %s", internal, line)
				}
			}
		})
	}
}

func compileSchema(t *testing.T, o jsonOutput) *jsonschema.Schema {
	t.Helper()
	s, err := schematest.Compile(o.file, mustSchema(t, o))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validateLines(s *jsonschema.Schema, out string) error {
	return schematest.Validate(s, []byte(out), true)
}

// TestTablesSplitByAwk: with --no-headers, every line of these tables has
// as many white-space separated fields as the table has columns.
func TestTablesSplitByAwk(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dev cluster")
	}
	cl := startDev(t)
	for _, tc := range []struct {
		args    []string
		columns int
	}{
		{[]string{"nodes"}, 10},
		{[]string{"members"}, 7},
		{[]string{"cluster"}, 6},
	} {
		r := ctl(context.Background(), cl.Master.Addr(), "", append(tc.args, "--no-headers")...)
		if r.code != 0 || r.stdout == "" {
			t.Fatalf("%v: exit %d %s", tc.args, r.code, r.stderr)
		}
		for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
			if n := len(strings.Fields(l)); n != tc.columns {
				t.Errorf("ginctl %v --no-headers: %d fields, want %d: %q", tc.args, n, tc.columns, l)
			}
		}
	}
}

// TestCompletion: shell completion of node names, GPUs, export formats and
// --nodes values, through cobra's __complete as the shells call it.
func TestCompletion(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dev cluster")
	}
	cl := startDev(t)
	addr := cl.Master.Addr()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"complete-node", []string{"node", ""}},
		{"complete-node-prefix", []string{"node", "node00"}},
		{"complete-path-nodes", []string{"path", ""}},
		{"complete-path-gpus", []string{"path", "node003/"}},
		{"complete-path-second", []string{"path", "node001/GPU0", "node002/GPU1"}},
		{"complete-export", []string{"export", ""}},
		{"complete-nodes-flag", []string{"topo", "-m", "--nodes", "node00"}},
		{"complete-node-flag", []string{"export", "nccl-topo", "--node", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), append([]string{"__complete", "--master", addr}, tc.args...), strings.NewReader(""), &out, &errb, func(string) string { return "" })
			golden(t, tc.name, fmt.Sprintf("$ ginctl __complete %s\nexit %d\n%s", strings.Join(tc.args, " "), code, out.String()))
		})
	}
	// No master: completion offers nothing, quickly, and does not fail.
	var out, errb bytes.Buffer
	start := time.Now()
	code := run(context.Background(), []string{"__complete", "--master", "127.0.0.1:1", "node", ""}, strings.NewReader(""), &out, &errb, func(string) string { return "" })
	if code != 0 || strings.Contains(out.String(), "node0") || time.Since(start) > 10*time.Second {
		t.Errorf("completion without a master: exit %d after %s: %q", code, time.Since(start), out.String())
	}
}

// inspectorDump writes an NCCL Inspector dump directory of a 2-rank
// all_reduce communicator over two hosts (one rank each), 32-512 MiB, as
// inspector_json.cc writes it (compact objects, one per line, a file per
// host and pid), and returns it.
func inspectorDump(t *testing.T, host0, host1 string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "nccl-inspector-77")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for rank, host := range []string{host0, host1} {
		var b strings.Builder
		for sn, size := 0, uint64(32<<20); size <= 512<<20; sn, size = sn+1, size*2 {
			us := 30 + float64(size)/42e3
			fmt.Fprintf(&b, `{"header":{"id":"0x5eed","comm_name":"","rank":%d,"n_ranks":2,"nnodes":2},"metadata":{"inspector_output_format_version":"v4.0","git_rev":"","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":1752867229276385,"hostname":"%s","pid":%d},"coll_perf":{"coll":"AllReduce","coll_sn":%d,"coll_msg_size_bytes":%d,"coll_exec_time_us":%d,"coll_timing_source":"kernel_gpu","coll_algobw_gbs":%.6f,"coll_busbw_gbs":%.6f}}`+"\n",
				rank, host, 100+rank, sn, size, int(us), float64(size)/us/1e3, float64(size)/us/1e3)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-pid%d.log", host, 100+rank)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
