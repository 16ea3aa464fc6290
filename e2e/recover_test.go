package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/testkit"
)

var contentHashRE = regexp.MustCompile(`"content_hash":\s*"([0-9a-f]{64})"`)

// TestRecoverLostQuorum follows docs/OPERATIONS.md's "Recovering from lost quorum"
// on real processes: three masters take acknowledged writes (an agent's
// registration, five pinned plans); two die by SIGKILL, so the survivor has
// no quorum and writes fail; the survivor is stopped and started again with
// --recover and becomes leader alone with every acknowledged write; the
// other two are admitted (ginctl members add) and come back with wiped
// data dirs and the same --join line,
// replicate, and keep the data when the recovered master is killed in turn.
// It runs twice: plaintext, and with mTLS on every process.
func TestRecoverLostQuorum(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := binaries(t)
	t.Run("plaintext", func(t *testing.T) { recoverLostQuorum(t, bin, false) })
	t.Run("mTLS", func(t *testing.T) { recoverLostQuorum(t, bin, true) })
}

// recoverLostQuorum is TestRecoverLostQuorum, with mTLS on every process
// (masters, agent, ginctl as admin) when useTLS is set.
func recoverLostQuorum(t *testing.T, bin string, useTLS bool) {
	tlsFlags := func(string) []string { return nil }
	if useTLS {
		tdir := filepath.Join(t.TempDir(), "tls")
		certs := [][]string{{"ca", "create", "--dir", tdir}, {"cert", "create", "--dir", tdir, "--role", "admin"},
			{"cert", "create", "--dir", tdir, "--role", "agent", "--name", "node001"}}
		for i := range 3 {
			certs = append(certs, []string{"cert", "create", "--dir", tdir, "--role", "master", "--name", fmt.Sprintf("m%d", i+1)})
		}
		for _, c := range certs {
			if out, err := runTool(t, bin, "ginctl", append([]string{"tls"}, c...)...); err != nil {
				t.Fatalf("ginctl tls %s: %v\n%s", strings.Join(c, " "), err, out)
			}
		}
		tlsFlags = func(base string) []string {
			return []string{"--tls-ca", filepath.Join(tdir, "ca.pem"), "--tls-cert", filepath.Join(tdir, base+".pem"), "--tls-key", filepath.Join(tdir, base+"-key.pem")}
		}
		// ginctl (runTool) calls as admin; the masters and the agent name
		// their own certificates, which win over the environment.
		t.Setenv("GIN_TLS_CA", filepath.Join(tdir, "ca.pem"))
		t.Setenv("GIN_TLS_CERT", filepath.Join(tdir, "admin.pem"))
		t.Setenv("GIN_TLS_KEY", filepath.Join(tdir, "admin-key.pem"))
	}
	ports := distinctPorts(t, 6)
	var clients []string
	for i := range 3 {
		clients = append(clients, "127.0.0.1:"+strconv.Itoa(ports[i]))
	}
	join := strings.Join(clients, ",")
	logDir := t.TempDir()
	dataDirs := make([]string, 3)
	masterArgv := func(i int, extra ...string) []string {
		argv := []string{filepath.Join(bin, "gin-master"), "--node-id", fmt.Sprintf("m%d", i+1),
			"--bind", clients[i], "--raft-bind", "127.0.0.1:" + strconv.Itoa(ports[3+i]), "--http-bind", "",
			"--data-dir", dataDirs[i], "--bootstrap-expect", "3", "--join", join, "--heartbeat-interval", "1s", "--log-level", "info"}
		if useTLS {
			argv = append(argv, tlsFlags(fmt.Sprintf("master-m%d", i+1))...)
		} else {
			argv = append(argv, "--insecure")
		}
		return append(argv, extra...)
	}
	procs := make([]*testkit.Proc, 3)
	for i := range 3 {
		dataDirs[i] = t.TempDir()
		procs[i] = &testkit.Proc{Name: fmt.Sprintf("m%d", i+1), Argv: masterArgv(i), Log: filepath.Join(logDir, fmt.Sprintf("m%d.log", i+1))}
		if err := procs[i].Start(); err != nil {
			t.Fatal(err)
		}
		p := procs[i]
		t.Cleanup(func() { p.Kill(10 * time.Second) })
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range procs {
				b, _ := os.ReadFile(p.Log)
				t.Logf("%s log:\n%s", p.Name, b)
			}
		}
	})
	members := func(via string) []memberOut {
		out, err := runTool(t, bin, "ginctl", "--master", via, "--timeout", "2s", "members", "-o", "json")
		if err != nil {
			return nil
		}
		var ms []memberOut
		if err := json.Unmarshal([]byte(out), &ms); err != nil {
			return nil
		}
		return ms
	}
	leaderOf := func(ms []memberOut) int {
		for _, m := range ms {
			if m.Leader {
				for i, c := range clients {
					if c == m.ClientAddress {
						return i
					}
				}
			}
		}
		return -1
	}
	waitFor(t, "3 members with a leader", 90*time.Second, func() bool {
		ms := members(clients[0])
		return len(ms) == 3 && leaderOf(ms) >= 0
	})
	agent := &testkit.Proc{Name: "agent", Log: filepath.Join(logDir, "agent.log"), Argv: []string{filepath.Join(bin, "gin-agent"),
		"--source", "sim:dgx-h100", "--master", join, "--node-name", "node001", "--heartbeat-interval", "1s", "--metrics-bind", "", "--plan-socket", ""}}
	agent.Argv = append(agent.Argv, tlsFlags("agent-node001")...)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Kill(10 * time.Second) })
	waitFor(t, "node001 to register", 60*time.Second, func() bool {
		ns := nodes(t, bin, join)
		return len(ns) == 1 && ns[0].State == "up"
	})
	// Acknowledged writes: ginctl exits 0 only once the plan is committed.
	hashes := map[int]string{}
	for job := 1; job <= 5; job++ {
		out, err := runTool(t, bin, "ginctl", "--master", join, "plan", "--job", strconv.Itoa(job), "--nodes", "node001", "-o", "json")
		if err != nil {
			t.Fatalf("plan %d: %v\n%s", job, err, out)
		}
		m := contentHashRE.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("plan %d: no content_hash in\n%s", job, out)
		}
		hashes[job] = m[1]
	}

	// Lose the quorum: SIGKILL both followers. The survivor is the last
	// leader, so it holds every acknowledged write (docs/OPERATIONS.md says to
	// recover the survivor with the longest log).
	survivor := leaderOf(members(clients[0]))
	if survivor < 0 {
		t.Fatal("no leader before the quorum loss")
	}
	for i := range 3 {
		if i != survivor && !procs[i].Kill(10*time.Second) {
			t.Fatalf("%s did not die", procs[i].Name)
		}
	}
	waitFor(t, "writes to fail without a quorum", 30*time.Second, func() bool {
		_, err := runTool(t, bin, "ginctl", "--master", clients[survivor], "--timeout", "3s", "plan", "--job", "90", "--nodes", "node001")
		return err != nil
	})
	if out, err := runTool(t, bin, "ginctl", "--master", clients[survivor], "--timeout", "3s", "plan", "--job", "91", "--nodes", "node001"); err == nil {
		t.Fatalf("a write succeeded without a quorum:\n%s", out)
	}

	// Stop the survivor (SIGTERM: a clean stop) and start it with --recover.
	if err := procs[survivor].Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := procs[survivor].Wait(30 * time.Second); err != nil {
		t.Fatalf("survivor did not stop on SIGTERM: %v", err)
	}
	procs[survivor].Argv = masterArgv(survivor, "--recover")
	if err := procs[survivor].Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the recovered master to lead alone", 60*time.Second, func() bool {
		ms := members(clients[survivor])
		return len(ms) == 1 && leaderOf(ms) == survivor
	})
	if b, _ := os.ReadFile(procs[survivor].Log); !strings.Contains(string(b), "RECOVERED") {
		t.Errorf("the --recover start did not log what it did")
	}
	checkPlans := func(via string) {
		t.Helper()
		for job, want := range hashes {
			out, err := runTool(t, bin, "ginctl", "--master", via, "--timeout", "5s", "plan", "--job", strconv.Itoa(job), "-o", "json")
			if err != nil {
				t.Fatalf("plan %d via %s: %v\n%s", job, via, err, out)
			}
			if m := contentHashRE.FindStringSubmatch(out); m == nil || m[1] != want {
				t.Fatalf("plan %d via %s: content hash changed (want %s):\n%s", job, via, want, out)
			}
		}
	}
	checkPlans(clients[survivor])
	if ns := nodes(t, bin, clients[survivor]); len(ns) != 1 || ns[0].Name != "node001" {
		t.Fatalf("node001 lost by the recovery: %+v", ns)
	}
	if out, err := runTool(t, bin, "ginctl", "--master", clients[survivor], "--timeout", "5s", "plan", "--job", "100", "--nodes", "node001"); err != nil {
		t.Fatalf("write after recovery: %v\n%s", err, out)
	}

	// The documented rejoin: admit each of the other masters (joining needs
	// an admin's word: they are no longer in the configuration), wipe their
	// data dirs and start them with their usual command line.
	var others []int
	for i := range 3 {
		if i == survivor {
			continue
		}
		others = append(others, i)
		if out, err := runTool(t, bin, "ginctl", "--master", clients[survivor], "--timeout", "5s", "members", "add", fmt.Sprintf("m%d", i+1)); err != nil {
			t.Fatalf("members add m%d: %v\n%s", i+1, err, out)
		}
		if err := os.RemoveAll(dataDirs[i]); err != nil {
			t.Fatal(err)
		}
		if err := procs[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	// Every master's own view (GetClusterInfo answers from the master
	// asked) has the three voters and the recovered leader: a rejoined
	// master still holding an older configuration would refuse the other's
	// vote below.
	waitFor(t, "3 members again, in every master's view", 90*time.Second, func() bool {
		for i := range 3 {
			ms := members(clients[i])
			if len(ms) != 3 || leaderOf(ms) != survivor {
				return false
			}
		}
		return true
	})
	// They replicated: kill the recovered master; the two rejoined ones
	// are a quorum, elect a leader and serve every write.
	if !procs[survivor].Kill(10 * time.Second) {
		t.Fatal("recovered master did not die")
	}
	via := clients[others[0]] + "," + clients[others[1]]
	waitFor(t, "a leader among the rejoined masters", 60*time.Second, func() bool {
		i := leaderOf(members(clients[others[0]]))
		return i == others[0] || i == others[1]
	})
	out, err := runTool(t, bin, "ginctl", "--master", via, "--timeout", "5s", "plan", "--job", "100", "-o", "json")
	if err != nil || !contentHashRE.MatchString(out) {
		t.Fatalf("plan 100 (written after recovery) missing on the rejoined masters: %v\n%s", err, out)
	}
	checkPlans(via)
}

// distinctPorts returns n free ports, all different.
func distinctPorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for len(ports) < n {
		p := freePort(t)
		dup := false
		for _, q := range ports {
			dup = dup || p == q
		}
		if !dup {
			ports = append(ports, p)
		}
	}
	return ports
}

// TestRecoverRefusesEmptyDataDir: --recover on a data dir with no Raft
// state exits with a clear error and creates nothing.
func TestRecoverRefusesEmptyDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := testkit.BuildCommands(t, "gin-master")
	for _, tc := range []struct {
		name  string
		setup func(dir string) string // returns the --data-dir
	}{
		{"missing", func(dir string) string { return filepath.Join(dir, "nope") }},
		{"empty", func(dir string) string { return dir }},
		{"empty wal", func(dir string) string { _ = os.Mkdir(filepath.Join(dir, "wal"), 0o750); return dir }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dataDir := tc.setup(root)
			before := listTree(t, root)
			out, err := runTool(t, bin, "gin-master", "--node-id", "m1", "--bind", "127.0.0.1:0", "--raft-bind", "127.0.0.1:0",
				"--http-bind", "", "--data-dir", dataDir, "--recover", "--insecure")
			if err == nil {
				t.Fatalf("--recover on %s succeeded:\n%s", tc.name, out)
			}
			if !strings.Contains(out, "--recover") || !strings.Contains(out, "no Raft state") {
				t.Errorf("error does not say what is wrong:\n%s", out)
			}
			if after := listTree(t, root); after != before {
				t.Errorf("the refused --recover changed the directory:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

func listTree(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintln(&b, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
