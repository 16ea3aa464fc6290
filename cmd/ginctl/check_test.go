package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/devcluster"
)

// startFaulty starts an in-process dev cluster (4 simulated DGX H100)
// with faults injected (--dev-fault syntax) and returns its address.
func startFaulty(t *testing.T, faults ...string) string {
	t.Helper()
	var fs []devcluster.Fault
	for _, s := range faults {
		f, err := devcluster.ParseFault(s)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cl, done, err := devcluster.Start(ctx, devcluster.Config{Bind: "127.0.0.1:0", DataDir: t.TempDir(), HeartbeatInterval: time.Hour, Faults: fs})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-done })
	return cl.Master.Addr()
}

// TestExitStatusOnFail: check and diagnose print everything, then exit 1
// when a node verdict or a finding is fail (naming them on stderr); warn
// is 0, and --exit-zero keeps 0.
func TestExitStatusOnFail(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dev cluster")
	}
	addr := startFaulty(t, "node003/GPU3/nvlink7=down", "node004/GPU2/xid=94")
	ibDisabled, err := os.ReadFile("../../internal/nccllog/testdata/ib-disabled-by-env.log")
	if err != nil {
		t.Fatal(err)
	}
	fartherNIC, err := os.ReadFile("../../internal/nccllog/testdata/farther-nic.log")
	if err != nil {
		t.Fatal(err)
	}
	const checkFails = "ginctl: 1 of 4 node(s) fail their health check: node003 (--exit-zero exits 0 on failures)\n"
	const diagnoseFails = "ginctl: 2 finding(s) fail: ib-disabled-by-env (--exit-zero exits 0 on failures)\n"
	for _, tc := range []struct {
		name      string
		args      []string
		stdin     string
		code      int
		stdoutHas string // "{": the whole of stdout is one JSON document
		stderr    string
	}{
		{"check: a node fails", []string{"check"}, "", exitErr, "4 node(s): 2 pass, 1 warn, 1 fail", checkFails},
		{"check -o json: a node fails", []string{"check", "-o", "json"}, "", exitErr, "{", checkFails},
		{"check --exit-zero", []string{"check", "--exit-zero"}, "", 0, "node003  fail     nvlink-down", ""},
		{"check -o json --exit-zero", []string{"check", "-o", "json", "--exit-zero"}, "", 0, "{", ""},
		{"check: a warning is 0", []string{"check", "--nodes", "node[001,002,004]"}, "", 0, "3 node(s): 2 pass, 1 warn, 0 fail", ""},
		{"diagnose: a finding fails", []string{"diagnose", "--nccl-log", "-"}, string(ibDisabled), exitErr, "FAIL ib-disabled-by-env (node002)", diagnoseFails},
		{"diagnose -o json: a finding fails", []string{"diagnose", "--nccl-log", "-", "-o", "json"}, string(ibDisabled), exitErr, "{", diagnoseFails},
		{"diagnose --exit-zero", []string{"diagnose", "--nccl-log", "-", "--exit-zero"}, string(ibDisabled), 0, "FAIL ib-disabled-by-env (node002)", ""},
		{"diagnose: warnings are 0", []string{"diagnose", "--nccl-log", "-"}, string(fartherNIC), 0, "WARN farther-nic", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ctl(context.Background(), addr, tc.stdin, tc.args...)
			if r.code != tc.code || r.stderr != tc.stderr {
				t.Fatalf("exit %d, stderr %q; want exit %d, stderr %q\nstdout %s", r.code, r.stderr, tc.code, tc.stderr, r.stdout)
			}
			if tc.stdoutHas == "{" {
				var doc map[string]any
				if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
					t.Fatalf("stdout is not one JSON document: %v\n%s", err, r.stdout)
				}
				return
			}
			if !strings.Contains(r.stdout, tc.stdoutHas) {
				t.Errorf("stdout lacks %q:\n%s", tc.stdoutHas, r.stdout)
			}
		})
	}
}
