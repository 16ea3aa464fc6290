package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// docLine returns the command line docs/OPERATIONS.md gives after the
// comment line `# <comment>` in a code block, so the test follows the docs.
func docLine(t *testing.T, comment string) string {
	t.Helper()
	f, err := os.Open("../docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "# "+comment && sc.Scan() {
			return strings.TrimSpace(sc.Text())
		}
	}
	t.Fatalf("docs/OPERATIONS.md has no line after %q", "# "+comment)
	return ""
}

// newHostScript gives the command a fresh "machine": its own network
// namespace with one NIC (a veth pair, its peer standing in for the uplink, and a default route, as a
// freshly installed server has) and an empty /var/lib, so the documented line
// runs as it is written, default ports and data dir included.
const newHostScript = `set -eu
mount -t tmpfs tmpfs /var/lib
ip link set lo up
ip link add eth0 type veth peer name uplink0
ip addr add 10.77.0.2/24 dev eth0
ip link set uplink0 up
ip link set eth0 up
ip route add default via 10.77.0.1
PATH="$GIN_BIN:$PATH"
eval "exec $GIN_LINE" &
pid=$!
for _ in $(seq 1 600); do
  if ginctl $GIN_CTL_TLS --timeout 2s members -o json >"$GIN_WORK/members.json" 2>/dev/null && grep -q '"leader": *true' "$GIN_WORK/members.json"; then break; fi
  kill -0 "$pid" 2>/dev/null || { echo "GIN-MASTER EXITED"; wait "$pid" || echo "exit=$?"; exit 3; }
  sleep 0.1
done
echo "MEMBERS $(tr -d '\n' <"$GIN_WORK/members.json")"
ls /var/lib/gin-master | sed 's/^/DATADIR /'
kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?
echo "STOPPED exit=$rc"
`

// TestREADMESingleMasterStarts runs docs/OPERATIONS.md's single-master line
// (`gin-master --node-id m1 --data-dir /var/lib/gin-master`) exactly as
// written on a fresh host: default binds (:5000, :5001, 127.0.0.1:5002), no
// --raft-advertise, its certificates in GIN_TLS_CA/GIN_TLS_CERT/GIN_TLS_KEY
// as the docs' export line says (made by ginctl tls as docs/SECURITY.md
// says; ginctl asks as admin). It used to die with "local bind
// address is not advertisable" after writing a 64 MiB WAL segment, and the
// packaged unit restart-looped.
func TestREADMESingleMasterStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	if os.Geteuid() != 0 {
		ciSkipf(t, "needs root for a network and mount namespace (unshare), so the default ports and /var/lib/gin-master are the host's own")
	}
	for _, tool := range []string{"unshare", "ip", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			ciSkipf(t, "%s not installed", tool)
		}
	}
	line := docLine(t, "a single master")
	if !strings.HasPrefix(line, "gin-master ") {
		t.Fatalf("docs/OPERATIONS.md single-master line %q does not start with gin-master", line)
	}
	bin := binaries(t)
	work := t.TempDir()
	tdir := filepath.Join(work, "tls")
	for _, c := range [][]string{{"ca", "create", "--dir", tdir}, {"cert", "create", "--dir", tdir, "--role", "admin"},
		{"cert", "create", "--dir", tdir, "--role", "master", "--name", "m1", "--ip", "10.77.0.2"}} {
		if out, err := runTool(t, bin, "ginctl", append([]string{"tls"}, c...)...); err != nil {
			t.Fatalf("ginctl tls %s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	export := docLine(t, "certificates (docs/SECURITY.md), in the environment or as --tls-ca, --tls-cert, --tls-key")
	for _, v := range []string{"GIN_TLS_CA=/etc/gin/ca.pem", "GIN_TLS_CERT=/etc/gin/master-m1.pem", "GIN_TLS_KEY=/etc/gin/master-m1-key.pem"} {
		if !strings.Contains(export, v) {
			t.Fatalf("docs/OPERATIONS.md export line %q lacks %s", export, v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--net", "--mount", "--pid", "--fork", "bash", "-c", newHostScript)
	cmd.Env = append(os.Environ(), "GIN_BIN="+bin, "GIN_LINE="+line, "GIN_WORK="+work,
		// the docs' files, here in a temporary directory instead of /etc/gin
		"GIN_TLS_CA="+filepath.Join(tdir, "ca.pem"), "GIN_TLS_CERT="+filepath.Join(tdir, "master-m1.pem"), "GIN_TLS_KEY="+filepath.Join(tdir, "master-m1-key.pem"),
		"GIN_CTL_TLS=--tls-ca "+filepath.Join(tdir, "ca.pem")+" --tls-cert "+filepath.Join(tdir, "admin.pem")+" --tls-key "+filepath.Join(tdir, "admin-key.pem"))
	cmd.Dir = work
	// Everything runs in its own PID namespace: when the script ends (or is
	// killed) the master dies with it and cannot hold the output open.
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s on a fresh host: %v\n%s", line, err, out)
	}
	var members []struct {
		ID      string `json:"id"`
		Address string `json:"address"`
		Leader  bool   `json:"leader"`
	}
	var data []string
	stopped := ""
	for _, l := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(l, "MEMBERS "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "MEMBERS ")), &members); err != nil {
				t.Fatalf("ginctl members -o json: %v\n%s", err, out)
			}
		case strings.HasPrefix(l, "DATADIR "):
			data = append(data, strings.TrimPrefix(l, "DATADIR "))
		case strings.HasPrefix(l, "STOPPED "):
			stopped = l
		}
	}
	if len(members) != 1 || members[0].ID != "m1" || !members[0].Leader || members[0].Address != "10.77.0.2:5001" {
		t.Fatalf("members %+v: want m1 alone, leader, Raft address derived from the default route (10.77.0.2:5001)\n%s", members, out)
	}
	if !contains(data, "wal") {
		t.Errorf("/var/lib/gin-master holds %v, want the Raft log (wal)", data)
	}
	if stopped != "STOPPED exit=0" {
		t.Errorf("SIGTERM: %q, want exit 0\n%s", stopped, out)
	}
	if !strings.Contains(string(out), "gRPC with mTLS") {
		t.Errorf("the master did not serve mutual TLS\n%s", out)
	}
	if !strings.Contains(string(out), "raft advertise address derived") {
		t.Errorf("the derived address is not logged\n%s", out)
	}
	t.Logf("docs/OPERATIONS.md line %q on a fresh host:\n%s", line, out)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
