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
// the README shows and checks the files: names, modes, identities, SANs.
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
