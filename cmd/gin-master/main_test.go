package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gin-topology/gin/internal/buildinfo"
)

// TestUsageErrors: flags that cannot work are refused with exit 2 before
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
