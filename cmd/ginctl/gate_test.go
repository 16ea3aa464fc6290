package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/devcluster"
)

// fakeScontrol writes an scontrol that appends its arguments (one call a
// line) to calls and answers "show node" with show.
func fakeScontrol(t *testing.T, show string) (path, calls string) {
	t.Helper()
	dir := t.TempDir()
	path, calls = filepath.Join(dir, "scontrol"), filepath.Join(dir, "calls")
	script := "#!/bin/sh\necho \"$*\" >> " + calls + "\nif [ \"$1\" = show ]; then echo '" + show + "'; fi\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, calls
}

func readCalls(t *testing.T, calls string) string {
	t.Helper()
	b, err := os.ReadFile(calls)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestGate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dev cluster")
	}
	f, err := devcluster.ParseFault("node002/GPU3/nvlink7=down")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cl, done, err := devcluster.Start(ctx, devcluster.Config{Bind: "127.0.0.1:0", DataDir: t.TempDir(), HeartbeatInterval: time.Hour, Faults: []devcluster.Fault{f}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-done })
	addr := cl.Master.Addr()
	const drainedByGIN = "NodeName=node001 Arch=x86_64 State=IDLE+DRAIN ThreadsPerCore=1 Reason=GIN: nvlink-down GPU0/nvlink1 [root@2026-12-01T20:00:00]"
	const drainedByOperator = "NodeName=node001 State=IDLE+DRAIN Reason=bad fan [alice@2026-12-01T19:00:00]"
	for _, tc := range []struct {
		name      string
		show      string
		args      []string
		master    string
		code      int
		calls     string // scontrol calls, one a line
		stderrHas string
	}{
		{"strict drains a failing node", "", []string{"gate", "--node", "node002"}, addr, exitErr,
			"update NodeName=node002 State=DRAIN Reason=GIN: nvlink-down GPU3/nvlink7", "node002 fails its health check; drained: GIN: nvlink-down GPU3/nvlink7"},
		{"advisory only says so", "", []string{"gate", "--node", "node002", "--mode", "advisory"}, addr, 0,
			"", "fail (advisory, not drained): GIN: nvlink-down GPU3/nvlink7"},
		{"a passing node is left alone", "", []string{"gate", "--node", "node001"}, addr, 0, "", ""},
		{"auto-resume resumes what GIN drained", drainedByGIN, []string{"gate", "--node", "node001", "--auto-resume"}, addr, 0,
			"show node node001 -o\nupdate NodeName=node001 State=RESUME", "resumed (was drained: GIN: nvlink-down GPU0/nvlink1)"},
		{"auto-resume leaves an operator's drain", drainedByOperator, []string{"gate", "--node", "node001", "--auto-resume"}, addr, 0,
			"show node node001 -o", ""},
		{"auto-resume never resumes a failing node", drainedByGIN, []string{"gate", "--node", "node002", "--auto-resume"}, addr, exitErr,
			"update NodeName=node002 State=DRAIN Reason=GIN: nvlink-down GPU3/nvlink7", ""},
		// No verdict is never drained (a master outage is not the node's
		// fault), but strict means strict: the job does not start.
		{"no master, strict: the job does not start", "", []string{"--timeout", "2s", "gate", "--node", "node002"}, "127.0.0.1:1", exitErr, "",
			"ginctl: health gate: no verdict for node002: cannot reach a master: nothing listens at 127.0.0.1:1 (is gin-master running? set --master or GIN_MASTER_HOST); strict gate: the job does not start here (GIN_HEALTH_GATE=advisory lets it)\n"},
		{"no master, strict fail closed", "", []string{"--timeout", "2s", "gate", "--node", "node002", "--fail-closed"}, "127.0.0.1:1", exitErr, "", "cannot reach a master"},
		{"no master, advisory: the job starts", "", []string{"--timeout", "2s", "gate", "--node", "node002", "--mode", "advisory"}, "127.0.0.1:1", 0, "",
			"gin gate: node002: no verdict (cannot reach a master: nothing listens at 127.0.0.1:1"},
		{"no master, advisory fail closed", "", []string{"--timeout", "2s", "gate", "--node", "node002", "--mode", "advisory", "--fail-closed"}, "127.0.0.1:1", exitErr, "",
			"; --fail-closed: the job does not start here\n"},
		// A name GIN does not know (short name vs FQDN, a typo) is an error
		// naming the near matches; not drained.
		{"unknown node, strict", "", []string{"gate", "--node", "node099"}, addr, exitErr, "",
			"ginctl: health gate: no verdict for node099: GIN knows no node node099; did you mean node001, node002, node003? (gin-agent --node-name must match Slurm's NodeName); strict gate: the job does not start here (GIN_HEALTH_GATE=advisory lets it)\n"},
		{"unknown node, FQDN", "", []string{"gate", "--node", "node001.cluster.local"}, addr, exitErr, "",
			"GIN knows no node node001.cluster.local; did you mean node001? "},
		{"unknown node, advisory", "", []string{"gate", "--node", "node001.cluster.local", "--mode", "advisory"}, addr, 0, "",
			"gin gate: warning: no verdict for node001.cluster.local: GIN knows no node node001.cluster.local; did you mean node001? (gin-agent --node-name must match Slurm's NodeName); letting the job start\n"},
		{"unknown node, advisory fail closed", "", []string{"gate", "--node", "gpu-x9", "--mode", "advisory", "--fail-closed"}, addr, exitErr, "",
			"no verdict for gpu-x9: GIN knows no node gpu-x9 (no agent registered it: gin-agent --node-name must match Slurm's NodeName; ginctl nodes lists the nodes); --fail-closed: the job does not start here"},
		{"no node", "", []string{"gate"}, addr, exitUsage, "", "--node is required"},
		{"bad mode", "", []string{"gate", "--node", "node001", "--mode", "maybe"}, addr, exitUsage, "", "--mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, calls := fakeScontrol(t, tc.show)
			r := ctl(context.Background(), tc.master, "", append(tc.args, "--scontrol", sc)...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", r.code, tc.code, r.stdout, r.stderr)
			}
			if got := readCalls(t, calls); got != tc.calls {
				t.Errorf("scontrol calls:\n%s\nwant:\n%s", got, tc.calls)
			}
			if !strings.Contains(r.stderr, tc.stderrHas) {
				t.Errorf("stderr %q lacks %q", r.stderr, tc.stderrHas)
			}
		})
	}
	if s, r := nodeStateReason(drainedByGIN); s != "IDLE+DRAIN" || r != "GIN: nvlink-down GPU0/nvlink1" {
		t.Errorf("nodeStateReason = %q, %q", s, r)
	}
}

// TestLiveGate: the epilog's gate on a job's live report drains only a
// node that is a confirmed suspect, with the suspect as the reason.
func TestLiveGate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		node      string
		answer    liveAnswer
		mode      string
		code      int
		calls     string
		stderrHas string
	}{
		{"confirmed suspect drained", "node003", liveAnswer{resp: liveResp(slowLink(1.52, true))}, "strict", 1,
			"update NodeName=node003 State=DRAIN Reason=GIN: slow-link mlx5_2 1.52x in job 9", "drained: GIN: slow-link mlx5_2 1.52x in job 9"},
		{"advisory only says it", "node003", liveAnswer{resp: liveResp(slowLink(1.52, true))}, "advisory", 0, "", "not drained"},
		{"not yet confirmed", "node003", liveAnswer{resp: liveResp(slowLink(1.52, false))}, "strict", 0, "", ""},
		{"another node's suspect", "node004", liveAnswer{resp: liveResp(slowLink(1.52, true))}, "strict", 0, "", ""},
		{"job not live", "node003", liveAnswer{err: notFound}, "strict", 0, "", ""},
		{"no master", "node003", liveAnswer{err: noMasters}, "strict", 0, "", "no live report of job 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := serveLive(t, &fakeLiveMaster{script: []liveAnswer{tc.answer}})
			sc, calls := fakeScontrol(t, "")
			r := ctl(context.Background(), addr, "", "gate", "--node", tc.node, "--live-job", "9", "--mode", tc.mode, "--scontrol", sc)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", r.code, tc.code, r.stdout, r.stderr)
			}
			if got := readCalls(t, calls); got != tc.calls {
				t.Errorf("scontrol calls:\n%s\nwant:\n%s", got, tc.calls)
			}
			if !strings.Contains(r.stderr, tc.stderrHas) {
				t.Errorf("stderr %q lacks %q", r.stderr, tc.stderrHas)
			}
		})
	}
}

// TestNearNodeNames: the names an unknown --node is said to nearly match.
func TestNearNodeNames(t *testing.T) {
	fqdn := []string{"node001.cluster.local", "node002.cluster.local", "node0010.cluster.local", "node010.cluster.local"}
	short := []string{"node001", "node002", "node0010", "node010", "login1"}
	for _, tc := range []struct {
		given string
		names []string
		want  string
	}{
		{"node001", fqdn, "node001.cluster.local,node0010.cluster.local"}, // same first component first
		{"node001.cluster.local", short, "node001,node0010"},
		{"node001.other.net", fqdn, "node001.cluster.local,node0010.cluster.local"},
		{"NODE002", short, "node002"},
		{"node999", short, "node001,node002,node010"}, // 3 edits each, at most 3
		{"nod002", short, "node002"},
		{"gpu-x9", short, ""},
		{"node001", nil, ""},
		{"", short, ""},
	} {
		if got := strings.Join(nearNodeNames(tc.given, tc.names), ","); got != tc.want {
			t.Errorf("nearNodeNames(%q) = %q, want %q", tc.given, got, tc.want)
		}
	}
	if d := editDistance("kitten", "sitting"); d != 3 {
		t.Errorf("editDistance(kitten, sitting) = %d, want 3", d)
	}
}

// TestPrologGateCertificate runs deploy/slurm/gin-prolog.sh (its /etc/gin
// made a temp dir) with a ginctl that records what it was given: the
// gate's certificate is the defaults file's, else the scheduler
// certificate of /etc/gin as the epilog's, else none; a strict gate that
// fails (no verdict included) fails the prolog, an advisory one not.
func TestPrologGateCertificate(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	src, err := os.ReadFile("../../deploy/slurm/gin-prolog.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	etc := filepath.Join(dir, "etc-gin")
	if err := os.Mkdir(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	prolog := filepath.Join(dir, "gin-prolog.sh")
	if err := os.WriteFile(prolog, []byte(strings.ReplaceAll(string(src), "/etc/gin/", etc+"/")), 0o755); err != nil {
		t.Fatal(err)
	}
	seen := filepath.Join(dir, "seen")
	ginctl := filepath.Join(dir, "ginctl")
	if err := os.WriteFile(ginctl, []byte("#!/bin/sh\necho \"CA=${GIN_TLS_CA:-} CERT=${GIN_TLS_CERT:-} KEY=${GIN_TLS_KEY:-} $*\" > "+seen+
		"\n[ -z \"${FAKE_FAIL:-}\" ] || { echo \"$FAKE_FAIL\" >&2; exit 1; }\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A logger that keeps the prolog's log lines off the host's syslog.
	if err := os.WriteFile(filepath.Join(dir, "logger"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const noVerdict = "ginctl: health gate: no verdict for node001: cannot reach a master: ...; strict gate: the job does not start here (GIN_HEALTH_GATE=advisory lets it)"
	for _, tc := range []struct {
		name      string
		defaults  string // the /etc/default/gin-slurm file
		scheduler bool   // /etc/gin/scheduler.pem is there
		gate      string
		fail      string // ginctl's error, "" none
		code      int
		seen      string
	}{
		{"strict, the scheduler certificate of /etc/gin", "GIN_MASTER_HOST=m1\n", true, "strict", "", 0,
			"CA=ETC/ca.pem CERT=ETC/scheduler.pem KEY=ETC/scheduler-key.pem --timeout 5s gate --node node001 --mode strict"},
		{"the defaults file's certificate first", "GIN_TLS_CA=/d/ca.pem\nGIN_TLS_CERT=/d/c.pem\nGIN_TLS_KEY=/d/k.pem\n", true, "strict", "", 0,
			"CA=/d/ca.pem CERT=/d/c.pem KEY=/d/k.pem --timeout 5s gate --node node001 --mode strict"},
		{"no certificate anywhere: plaintext", "", false, "strict", "", 0, "CA= CERT= KEY= --timeout 5s gate --node node001 --mode strict"},
		{"advisory, the same fallback", "", true, "advisory", "", 0,
			"CA=ETC/ca.pem CERT=ETC/scheduler.pem KEY=ETC/scheduler-key.pem --timeout 5s gate --node node001 --mode advisory"},
		{"strict, no verdict: the prolog fails", "", true, "strict", noVerdict, 1,
			"CA=ETC/ca.pem CERT=ETC/scheduler.pem KEY=ETC/scheduler-key.pem --timeout 5s gate --node node001 --mode strict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(seen)
			pem := filepath.Join(etc, "scheduler.pem")
			os.Remove(pem)
			if tc.scheduler {
				if err := os.WriteFile(pem, []byte("cert"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			defaults := filepath.Join(dir, "gin-slurm")
			if err := os.WriteFile(defaults, []byte(tc.defaults), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bash, prolog)
			cmd.Env = []string{"PATH=" + dir + ":" + os.Getenv("PATH"), "GIN_SLURM_DEFAULTS=" + defaults, "GIN_HEALTH_GATE=" + tc.gate,
				"SLURM_JOB_ID=7", "SLURMD_NODENAME=node001", "GINCTL=" + ginctl, "GIN_AGENT=/bin/true", "FAKE_FAIL=" + tc.fail}
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Errorf("prolog exit %d, want %d\n%s", code, tc.code, out)
			}
			if tc.fail != "" && !strings.Contains(string(out), "gin-prolog: job 7: "+tc.fail) {
				t.Errorf("prolog output %q lacks the gate's error", out)
			}
			b, _ := os.ReadFile(seen)
			if got := strings.ReplaceAll(strings.TrimSpace(string(b)), etc, "ETC"); got != tc.seen {
				t.Errorf("ginctl got\n%s\nwant\n%s", got, tc.seen)
			}
		})
	}
}
