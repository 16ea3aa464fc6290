package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/jsonout/schematest"
	"github.com/gin-topology/gin/internal/pki"
)

// TestTLSDenyCertFile: `tls deny --cert FILE` records the certificate's
// serial, identity and expiry; `tls allow --expired` takes off the entries
// of expired certificates only; bad combinations are usage errors.
func TestTLSDenyCertFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dev cluster")
	}
	cl := startDev(t)
	addr := cl.Master.Addr()
	dir := t.TempDir()
	now := time.Now()
	ca, err := pki.CreateCA(dir, 0, now.Add(-72*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	issue := func(name string, at time.Time) (path, serial string) {
		t.Helper()
		cert, _, err := ca.IssueToDir(dir, pki.CertRequest{Identity: pki.Identity{Role: pki.RoleAgent, Name: name}, Days: 1}, at)
		if err != nil {
			t.Fatal(err)
		}
		c, err := pki.ReadCertificate(cert)
		if err != nil {
			t.Fatal(err)
		}
		return cert, pki.FormatSerial(c.SerialNumber)
	}
	expiredCert, expiredSerial := issue("old", now.Add(-48*time.Hour)) // valid one day, two days ago
	validCert, validSerial := issue("new", now)
	run := func(args ...string) ctlResult {
		t.Helper()
		return ctl(context.Background(), addr, "", args...)
	}
	for _, c := range []string{expiredCert, validCert} {
		if r := run("tls", "deny", "--cert", c, "--reason", "test"); r.code != 0 || !strings.Contains(r.stdout, "denied serial") {
			t.Fatalf("tls deny --cert %s: exit %d %s%s", c, r.code, r.stdout, r.stderr)
		}
	}
	r := run("tls", "denied", "-o", "json")
	var entries []struct {
		Serial   string `json:"serial"`
		Identity string `json:"identity"`
		NotAfter string `json:"not_after"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil || len(entries) != 2 {
		t.Fatalf("tls denied -o json: %v\n%s", err, r.stdout)
	}
	for _, e := range entries {
		na, err := time.Parse(time.RFC3339Nano, e.NotAfter)
		wantID, wantExpired := "spiffe://gin/agent/new", false
		if e.Serial == expiredSerial {
			wantID, wantExpired = "spiffe://gin/agent/old", true
		}
		if err != nil || e.Identity != wantID || na.Before(now) != wantExpired {
			t.Errorf("entry %+v: want identity %s, expired %v (%v)", e, wantID, wantExpired, err)
		}
	}
	r = run("tls", "denied")
	if !strings.Contains(r.stdout, "spiffe://gin/agent/old") || !strings.Contains(r.stdout, validSerial) {
		t.Fatalf("tls denied:\n%s", r.stdout)
	}
	r = run("tls", "allow", "--expired", "-o", "json")
	o := schemaFor(t, []string{"tls", "allow", "--expired"})
	if err := schematest.Validate(compileSchema(t, o), []byte(r.stdout), false); r.code != 0 || err != nil {
		t.Fatalf("tls allow --expired -o json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	var allowed []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &allowed); err != nil || len(allowed) != 1 {
		t.Fatalf("tls allow --expired took off %d entries, want 1: %v\n%s", len(allowed), err, r.stdout)
	}
	r = run("tls", "denied")
	if strings.Contains(r.stdout, expiredSerial) || !strings.Contains(r.stdout, validSerial) {
		t.Fatalf("after allow --expired:\n%s", r.stdout)
	}
	for _, args := range [][]string{
		{"tls", "deny"},
		{"tls", "deny", validSerial, "--cert", validCert},
		{"tls", "deny", "--cert", filepath.Join(dir, "nope.pem")},
		{"tls", "allow"},
		{"tls", "allow", validSerial, "--expired"},
	} {
		if r := run(args...); r.code != exitUsage {
			t.Errorf("ginctl %s: exit %d, want %d (%s)", strings.Join(args, " "), r.code, exitUsage, r.stderr)
		}
	}
}
