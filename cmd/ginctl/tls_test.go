package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gin-topology/gin/internal/pki"
)

func ctlOffline(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb, func(string) string { return "" })
	return out.String(), errb.String(), code
}

// TestTLSCreate runs `ginctl tls ca create` and `ginctl tls cert create` as
// docs/SECURITY.md shows and checks the files: names, modes, identities, SANs.
func TestTLSCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	if out, errs, code := ctlOffline(t, "tls", "ca", "create", "--dir", dir); code != 0 || !strings.Contains(out, "ca.pem") {
		t.Fatalf("ca create: code %d, %q, %q", code, out, errs)
	}
	if _, errs, code := ctlOffline(t, "tls", "ca", "create", "--dir", dir); code != exitErr || !strings.Contains(errs, "exists") {
		t.Fatalf("second ca create: code %d, %q; want a refusal to overwrite", code, errs)
	}
	tests := []struct {
		args     []string
		wantCode int
		file     string
		wantID   string
		wantErr  string
	}{
		{args: []string{"--role", "master", "--name", "m1", "--dns", "m1.example", "--ip", "10.1.2.3"}, file: "master-m1.pem", wantID: "spiffe://gin/master/m1"},
		{args: []string{"--role", "agent", "--name", "node001", "--days", "2"}, file: "agent-node001.pem", wantID: "spiffe://gin/agent/node001"},
		{args: []string{"--role", "admin"}, file: "admin.pem", wantID: "spiffe://gin/admin"},
		{args: []string{"--role", "scheduler", "--name", "slurm"}, file: "scheduler-slurm.pem", wantID: "spiffe://gin/scheduler/slurm"},
		{args: []string{"--role", "agent"}, wantCode: exitUsage, wantErr: "needs a name"},
		{args: []string{"--role", "root"}, wantCode: exitUsage, wantErr: "want one of master"},
		{args: []string{"--role", "master", "--name", "m2", "--ip", "nope"}, wantCode: exitUsage, wantErr: "not an IP"},
		{args: []string{"--role", "agent", "--name", "a\x1bb"}, wantCode: exitUsage, wantErr: "character"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, errs, code := ctlOffline(t, append([]string{"tls", "cert", "create", "--dir", dir, "-o", "json"}, tt.args...)...)
			if code != tt.wantCode {
				t.Fatalf("code %d, want %d (stderr %q)", code, tt.wantCode, errs)
			}
			if tt.wantErr != "" {
				if !strings.Contains(errs, tt.wantErr) {
					t.Fatalf("stderr %q, want %q", errs, tt.wantErr)
				}
				return
			}
			var got tlsCreated
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%v: %q", err, out)
			}
			if got.Cert != filepath.Join(dir, tt.file) || got.Identity != tt.wantID {
				t.Fatalf("got %+v, want %s for %s", got, tt.file, tt.wantID)
			}
			fi, err := os.Stat(got.Key)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("key %s: %v, %v; want mode 0600", got.Key, fi, err)
			}
			b, _ := os.ReadFile(got.Cert)
			blk, _ := pem.Decode(b)
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			id, err := pki.IdentityFromCert(c)
			if err != nil || id.String() != tt.wantID {
				t.Fatalf("certificate identity %v, %v", id, err)
			}
			// The certificate and key load as a client's files.
			if _, err := pki.NewSource(pki.Files{CA: filepath.Join(dir, "ca.pem"), Cert: got.Cert, Key: got.Key}, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestTLSFlagsIncomplete(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--tls-ca", "ca.pem", "nodes"}, "missing [--tls-cert --tls-key]"},
		{[]string{"--tls-ca", "/nonexistent/ca.pem", "--tls-cert", "/nonexistent/c.pem", "--tls-key", "/nonexistent/k.pem", "nodes"}, "/nonexistent/ca.pem"},
	}
	for _, tt := range tests {
		_, errs, code := ctlOffline(t, tt.args...)
		if code != exitUsage || !strings.Contains(errs, tt.want) {
			t.Errorf("ginctl %v: exit %d, %q; want exit %d and %q", tt.args, code, errs, exitUsage, tt.want)
		}
	}
}

// TestTLSInit: `ginctl tls init` makes the CA and every --cert once; run
// again it keeps every file byte for byte (compose runs it at every up),
// adds only what is new, and refuses what it cannot keep.
func TestTLSInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	args := []string{"tls", "init", "--dir", dir, "--cert", "master/m1=m1,10.1.2.3", "--cert", "agent/node01", "--cert", "admin"}
	out, errs, code := ctlOffline(t, args...)
	if code != 0 || strings.Count(out, "wrote ") != 4 {
		t.Fatalf("first init: code %d, %q, %q; want 4 pairs written", code, out, errs)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	caBefore, masterBefore := read("ca.pem"), read("master-m1-key.pem")
	out, errs, code = ctlOffline(t, append(args, "--cert", "reader", "-o", "json")...)
	if code != 0 {
		t.Fatalf("second init: code %d, %q", code, errs)
	}
	var res []tlsInitResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	var created []string
	for _, r := range res {
		if r.Created {
			created = append(created, r.Identity)
		}
	}
	if len(res) != 5 || len(created) != 1 || created[0] != "spiffe://gin/reader" {
		t.Fatalf("second init: %+v; want 5 pairs, only the reader new", res)
	}
	if read("ca.pem") != caBefore || read("master-m1-key.pem") != masterBefore {
		t.Fatal("a second init replaced the CA or a key")
	}
	c, err := pki.NewSource(pki.Files{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "master-m1.pem"), Key: filepath.Join(dir, "master-m1-key.pem")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"m1", "10.1.2.3", "localhost"} {
		if err := c.CoversHost(h); err != nil {
			t.Errorf("master-m1.pem does not name %s: %v", h, err)
		}
	}

	other := filepath.Join(t.TempDir(), "other")
	if _, errs, code := ctlOffline(t, "tls", "init", "--dir", other, "--cert", "admin"); code != 0 {
		t.Fatalf("init other: %q", errs)
	}
	if err := os.Rename(filepath.Join(other, "admin.pem"), filepath.Join(dir, "scheduler.pem")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(other, "admin-key.pem"), filepath.Join(dir, "scheduler-key.pem")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "reader-key.pem")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"admin.pem", "admin-key.pem"} {
		if err := os.WriteFile(filepath.Join(dir, strings.Replace(f, "admin", "admin-bob", 1)), []byte(read(f)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"a pair the CA did not issue", []string{"--cert", "scheduler"}, exitErr, "scheduler.pem was not issued by this CA"},
		{"a pair of another identity", []string{"--cert", "admin/bob"}, exitErr, "admin-bob.pem is for spiffe://gin/admin, not spiffe://gin/admin/bob"},
		{"half a pair", []string{"--cert", "reader"}, exitErr, "only one of"},
		{"unknown role", []string{"--cert", "root"}, exitUsage, "want one of master"},
		{"agent without a name", []string{"--cert", "agent"}, exitUsage, "needs a name"},
		{"empty host", []string{"--cert", "master/m2=m2,"}, exitUsage, "empty HOST"},
		{"control character", []string{"--cert", "agent/a\x1bb"}, exitUsage, "character"},
		{"bad days", []string{"--days", "0"}, exitUsage, "want 1..3650"},
		{"bad hostlist", []string{"--cert", "agent/node[1-"}, exitUsage, "NAME"},
		{"hosts with many names", []string{"--cert", "master/m[1-3]=m.example.org"}, exitUsage, "HOSTs belong to one certificate"},
		{"too many names", []string{"--cert", "agent/n[1-10001]"}, exitUsage, "at most 10000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := ctlOffline(t, append([]string{"tls", "init", "--dir", dir}, tc.args...)...)
			if code != tc.wantCode || !strings.Contains(errs, tc.wantErr) {
				t.Fatalf("code %d, stderr %q; want %d and %q", code, errs, tc.wantCode, tc.wantErr)
			}
		})
	}
	half := filepath.Join(t.TempDir(), "half")
	if _, errs, code := ctlOffline(t, "tls", "init", "--dir", half); code != 0 {
		t.Fatalf("init of a CA alone: %q", errs)
	}
	if err := os.Remove(filepath.Join(half, "ca-key.pem")); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := ctlOffline(t, "tls", "init", "--dir", half, "--cert", "admin"); code != exitErr || !strings.Contains(errs, "holds only one of ca.pem and ca-key.pem") {
		t.Fatalf("init with half a CA: code %d, %q; want a refusal", code, errs)
	}
	if _, err := os.Stat(filepath.Join(half, "ca-key.pem")); err == nil {
		t.Fatal("init with half a CA made a new key")
	}
}

// TestTLSInitHostlist: `--cert 'agent/node[001-003]'` is one certificate
// per node, as every other command takes node lists; `tls cert create
// --days 0` is refused, not silently a year.
func TestTLSInitHostlist(t *testing.T) {
	dir := t.TempDir()
	out, errs, code := ctlOffline(t, "tls", "init", "--dir", dir, "--cert", "agent/node[001-003]", "--cert", "admin")
	if code != 0 {
		t.Fatalf("tls init: %d %s", code, errs)
	}
	for _, n := range []string{"node001", "node002", "node003"} {
		if !strings.Contains(out, "agent-"+n+".pem") || !strings.Contains(out, "spiffe://gin/agent/"+n) {
			t.Errorf("no certificate for %s:\n%s", n, out)
		}
	}
	if _, errs, code := ctlOffline(t, "tls", "cert", "create", "--dir", dir, "--role", "reader", "--days", "0"); code != exitUsage || !strings.Contains(errs, "--days 0: want 1..3650") {
		t.Fatalf("--days 0: %d %q", code, errs)
	}
}
