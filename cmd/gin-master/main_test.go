package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gin-topology/gin/internal/buildinfo"
	"github.com/gin-topology/gin/internal/master"
	ginraft "github.com/gin-topology/gin/internal/raft"
)

// TestUsageErrors: flags that cannot work are refused with exit 64 before
// anything is created (the --data-dir stays absent).
func TestUsageErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"--dev-agents without --dev", []string{"--dev-agents", "3", "--data-dir", dir}, "--dev-agents configures the simulated cluster of --dev: add --dev"},
		{"several --dev-* without --dev", []string{"--dev-profile", "dgx-a100", "--dev-nodes", "n[1-2]", "--data-dir", dir}, "--dev-nodes, --dev-profile configures"},
		{"bad log level", []string{"--log-level", "loud", "--data-dir", dir}, `--log-level "loud"`},
		{"positional argument", []string{"serve", "--data-dir", dir}, "unknown command"},
		{"--recover with --dev", []string{"--dev", "--recover", "--data-dir", dir}, "--recover applies to a real master's --data-dir"},
		{"--dev-agents 0", []string{"--dev", "--dev-agents", "0", "--data-dir", dir}, "--dev-agents 0: want 1..2048"},
		{"--dev-agents 3000", []string{"--dev", "--dev-agents", "3000", "--data-dir", dir}, "--dev-agents 3000: want 1..2048"},
		{"--dev-agents negative", []string{"--dev", "--dev-agents", "-1", "--data-dir", dir}, "--dev-agents -1: want 1..2048"},
		{"--dev-nodes too many", []string{"--dev", "--dev-nodes", "n[1-3000]", "--data-dir", dir}, "3000 nodes, want at most 2048"},
		{"--dev-nodes not a hostlist", []string{"--dev", "--dev-nodes", "n[1-", "--data-dir", dir}, "--dev-nodes:"},
		{"--dev-profile unknown", []string{"--dev", "--dev-profile", "dgx-z100", "--data-dir", dir}, `--dev-profile "dgx-z100": want one of`},
		{"--dev-fabric malformed", []string{"--dev", "--dev-fabric", "spines=x", "--data-dir", dir}, "--dev-fabric:"},
		{"--dev-fault malformed", []string{"--dev", "--dev-fault", "node001", "--data-dir", dir}, "--dev-fault:"},
		{"--recover-peers without --recover", []string{"--recover-peers", "m2=10.0.0.2:5001", "--data-dir", dir}, "--recover-peers needs --recover"},
		{"--recover-peers malformed", []string{"--recover", "--recover-peers", "m2", "--data-dir", dir}, `--recover-peers: "m2": want id=host:port`},
		{"--memory-limit not a size", []string{"--memory-limit", "1x", "--data-dir", dir}, `--memory-limit: memory limit "1x": want auto, off or a size`},
		{"--memory-limit too small", []string{"--memory-limit", "10MiB", "--data-dir", dir}, "below 64MiB"},
		{"--raft-* out of range", []string{"--insecure", "--raft-heartbeat-timeout", "1ns", "--data-dir", dir}, "--raft-*"},
		{"--join malformed", []string{"--insecure", "--join", "m1:99999", "--data-dir", dir}, "--join:"},
		{"--node-id too long", []string{"--insecure", "--node-id", strings.Repeat("m", 200), "--data-dir", dir}, "--node-id:"},
		{"--health-threshold malformed", []string{"--insecure", "--health-threshold", "bogus", "--data-dir", dir}, "--health-threshold:"},
		{"--recover-peers names self", []string{"--node-id", "m1", "--recover", "--recover-peers", "m1=10.0.0.1:5001", "--data-dir", dir}, "names this master (m1)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tc.args, &out, &errb)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if code == 0 || !strings.Contains(errb.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want an error containing %q", code, errb.String(), tc.want)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("--data-dir %s was created by a refused command line", dir)
			}
		})
	}
}

// TestAddressInUseHint: a port already taken is said in words, with what to do.
func TestAddressInUseHint(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out, errb bytes.Buffer
	code := run([]string{"--dev", "--bind", l.Addr().String(), "--data-dir", t.TempDir()}, &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), "address already in use (another gin-master, or another program, uses that port") {
		t.Fatalf("exit %d, stderr %q; want the address-in-use hint", code, errb.String())
	}
}

func TestVersionLine(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--version"}, &out, &errb); code != 0 || out.String() != buildinfo.Line("gin-master")+"\n" {
		t.Fatalf("--version: exit %d, %q; want %q", code, out.String(), buildinfo.Line("gin-master"))
	}
}

type fakeHost struct {
	route string // "" = no default route
	addrs []string
}

func (f fakeHost) DefaultRouteAddr(v6 bool) (netip.Addr, error) {
	if f.route == "" || v6 {
		return netip.Addr{}, errors.New("network is unreachable")
	}
	return netip.MustParseAddr(f.route), nil
}

func (f fakeHost) InterfaceAddrs() ([]netip.Addr, error) {
	var out []netip.Addr
	for _, a := range f.addrs {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

func TestDeriveAdvertise(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	tests := []struct {
		name                 string
		in                   options
		host                 fakeHost
		wantRaft, wantClient string
		wantErr              string
	}{
		{"README single master: defaults", options{cfg: master.Config{Bind: ":5000", RaftBind: ":5001"}},
			fakeHost{route: "10.0.0.7"}, "10.0.0.7:5001", "10.0.0.7:5000", ""},
		{"explicit raft advertise kept", options{cfg: master.Config{Bind: ":5000", RaftBind: ":5001", RaftAdvertise: "m1:5001", Advertise: "m1:5000"}},
			fakeHost{route: "10.0.0.7"}, "m1:5001", "m1:5000", ""},
		{"specific raft bind needs nothing", options{cfg: master.Config{Bind: "10.0.0.7:5000", RaftBind: "10.0.0.7:5001"}},
			fakeHost{}, "", "", ""},
		{"no route, one address", options{cfg: master.Config{Bind: ":5000", RaftBind: "0.0.0.0:5001"}},
			fakeHost{addrs: []string{"192.168.4.2"}}, "192.168.4.2:5001", "192.168.4.2:5000", ""},
		{"no route, two addresses: names the flag", options{cfg: master.Config{Bind: ":5000", RaftBind: ":5001"}},
			fakeHost{addrs: []string{"10.0.0.1", "10.1.0.1"}}, "", "", "set --raft-advertise"},
		{"client port 0 keeps the bound address", options{cfg: master.Config{Bind: ":0", RaftBind: ":5001"}},
			fakeHost{route: "10.0.0.7"}, "10.0.0.7:5001", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.in
			err := deriveAdvertise(&o, tc.host, quiet)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.cfg.RaftAdvertise != tc.wantRaft || o.cfg.Advertise != tc.wantClient {
				t.Fatalf("raft advertise %q, advertise %q; want %q, %q", o.cfg.RaftAdvertise, o.cfg.Advertise, tc.wantRaft, tc.wantClient)
			}
		})
	}
}

// A Raft bind that cannot be advertised fails before the data dir exists,
// with a message naming --raft-advertise.
func TestRunRefusesUnadvertisableRaftBindBeforeDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var stderr bytes.Buffer
	code := run([]string{"--node-id", "m1", "--insecure", "--bind", "127.0.0.1:0", "--http-bind", "", "--raft-bind", "0.0.0.0:0", "--data-dir", dir}, io.Discard, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "--raft-advertise") {
		t.Fatalf("exit %d, stderr %q; want a failure naming --raft-advertise", code, stderr.String())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the data dir was created (%v)", err)
	}
}

// TestSecurityFlagsRefusedBeforeDataDir: bad --tls-*/--hello-timeout
// combinations fail with a message naming the flag and create nothing; a
// value out of its range is a usage error (exit 64), as the docs say.
func TestSecurityFlagsRefusedBeforeDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	base := []string{"--node-id", "m1", "--bind", "127.0.0.1:0", "--raft-bind", "127.0.0.1:0", "--http-bind", "", "--data-dir", dir}
	insecure := append(append([]string{}, base...), "--insecure")
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"--tls-* with --dev", []string{"--dev", "--tls-ca", "ca.pem", "--data-dir", dir}, exitUsage, "do not apply to --dev"},
		{"--tls-ca alone", append(append([]string{}, base...), "--tls-ca", "ca.pem"), exitConfig, "missing [--tls-cert --tls-key]"},
		{"missing files", append(append([]string{}, base...), "--tls-ca", "/nonexistent/ca.pem", "--tls-cert", "/nonexistent/c.pem", "--tls-key", "/nonexistent/k.pem"), exitConfig, "--tls-ca"},
		{"no TLS and no --insecure", base, exitConfig, "no TLS certificates: a master serves mutual TLS with --tls-ca, --tls-cert and --tls-key (or GIN_TLS_CA, GIN_TLS_CERT, GIN_TLS_KEY), made with `ginctl tls ca create --dir /etc/gin` and `ginctl tls cert create --dir /etc/gin --role master --name m1 --dns HOST` (docs/SECURITY.md); or give --insecure"},
		{"--insecure with --tls-*", append(append([]string{}, insecure...), "--tls-ca", "ca.pem"), exitUsage, "--insecure and --tls-* exclude each other"},
		{"--hello-timeout too short", append(append([]string{}, insecure...), "--hello-timeout", "1ms"), exitUsage, "--hello-timeout 1ms"},
		{"--max-nodes 0", append(append([]string{}, insecure...), "--max-nodes", "0"), exitUsage, "--max-nodes 0"},
		{"--max-plans -1", append(append([]string{}, insecure...), "--max-plans", "-1"), exitUsage, "--max-plans -1"},
		{"--agent-log-rate 0", append(append([]string{}, insecure...), "--agent-log-rate", "0"), exitUsage, "--agent-log-rate 0"},
		{"--agent-log-burst 0", append(append([]string{}, insecure...), "--agent-log-burst", "0"), exitUsage, "--agent-log-burst 0"},
		{"--max-streams-per-conn 0", append(append([]string{}, insecure...), "--max-streams-per-conn", "0"), exitUsage, "--max-streams-per-conn 0: want 1..65536"},
		{"--max-streams-per-conn too many", append(append([]string{}, insecure...), "--max-streams-per-conn", "70000"), exitUsage, "--max-streams-per-conn 70000"},
		{"--data-dir-min-free-mib 0", append(append([]string{}, insecure...), "--data-dir-min-free-mib", "0"), exitUsage, "--data-dir-min-free-mib 0: want 64..1048576"},
		{"--data-dir-min-free-mib below a WAL segment", append(append([]string{}, insecure...), "--data-dir-min-free-mib", "16"), exitUsage, "--data-dir-min-free-mib 16: want 64..1048576 (at least one Raft log segment"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tc.args, &out, &errb)
			if code != tc.wantCode || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errb.String(), tc.wantCode, tc.want)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("--data-dir %s was created by a refused command line", dir)
			}
		})
	}
}

// TestInsecureConflictsWithTLSEnvironment: GIN_TLS_* in the environment
// turn TLS on as the flags do, so --insecure next to them is refused, naming
// the environment; nothing is created.
func TestInsecureConflictsWithTLSEnvironment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	t.Setenv("GIN_TLS_CA", "/etc/gin/ca.pem")
	var out, errb bytes.Buffer
	code := run([]string{"--node-id", "m1", "--insecure", "--bind", "127.0.0.1:0", "--raft-bind", "127.0.0.1:0", "--http-bind", "", "--data-dir", dir}, &out, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), "--insecure and GIN_TLS_CA/GIN_TLS_CERT/GIN_TLS_KEY in the environment exclude each other") {
		t.Fatalf("exit %d, stderr %q; want exit %d naming the environment", code, errb.String(), exitUsage)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("--data-dir %s was created by a refused command line", dir)
	}
}

// A log store that failed a write, or a data dir full at start, exits with
// the status systemd restarts on (EX_TEMPFAIL); other errors exit 1.
func TestLogStoreFailedExitStatus(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"log store failed", fmt.Errorf("master: %w: data dir /d is full: %w", ginraft.ErrLogStoreFailed, syscall.ENOSPC), true},
		{"full at start", fmt.Errorf("raft: open log store /d/wal: %w", &os.PathError{Op: "write", Path: "/d/wal/x", Err: syscall.ENOSPC}), true},
		{"quota", fmt.Errorf("x: %w", syscall.EDQUOT), true},
		{"another error", errors.New("--max-nodes 0: want 1..10000000"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := logStoreFailed(tc.err); got != tc.want {
				t.Fatalf("logStoreFailed(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
	for _, other := range []int{0, 1, exitUsage, exitConfig} {
		if exitLogStore == other {
			t.Fatalf("exit status %d for a failed log store is not distinct", exitLogStore)
		}
	}
}
