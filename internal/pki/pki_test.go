package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestIdentityRoundTrip(t *testing.T) {
	tests := []struct {
		uri     string
		want    Identity
		wantErr string
	}{
		{uri: "spiffe://gin/master/m1", want: Identity{RoleMaster, "m1"}},
		{uri: "spiffe://gin/agent/node-017", want: Identity{RoleAgent, "node-017"}},
		{uri: "spiffe://gin/admin", want: Identity{RoleAdmin, ""}},
		{uri: "spiffe://gin/admin/alice", want: Identity{RoleAdmin, "alice"}},
		{uri: "spiffe://gin/reader", want: Identity{RoleReader, ""}},
		{uri: "spiffe://gin/scheduler/slurm", want: Identity{RoleScheduler, "slurm"}},
		{uri: "spiffe://gin/agent", wantErr: "needs a name"},
		{uri: "spiffe://gin/master", wantErr: "needs a name"},
		{uri: "spiffe://other/admin", wantErr: "want spiffe://gin"},
		{uri: "https://gin/admin", wantErr: "want spiffe://gin"},
		{uri: "spiffe://gin/root/x", wantErr: "role \"root\""},
		{uri: "spiffe://gin/agent/a/b", wantErr: "want spiffe://gin"},
		{uri: "spiffe://gin/agent/", wantErr: "empty name"},
		{uri: "spiffe://gin/agent/a%1Bb", wantErr: "percent-encoding"},
		{uri: "spiffe://gin/%61dmin", wantErr: "percent-encoding"}, // issue #21: was read as admin
		{uri: "spiffe://gin/agent/node%30001", wantErr: "percent-encoding"},
		{uri: "spiffe://gin/reader%2Fx", wantErr: "percent-encoding"},
		{uri: "spiffe://gin/admin?x=1", wantErr: "want spiffe://gin"},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			u, err := url.Parse(tt.uri)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseIdentity(u)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseIdentity(%s) = %v, %v; want error containing %q", tt.uri, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseIdentity(%s) = %v, %v; want %v", tt.uri, got, err, tt.want)
			}
			if got.String() != tt.uri {
				t.Fatalf("String() = %s, want %s", got.String(), tt.uri)
			}
		})
	}
}

func TestCreateCAAndIssue(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ca, err := CreateCA(dir, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CreateCA(dir, 0, now); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("second CreateCA = %v, want a refusal to overwrite", err)
	}
	assertMode(t, filepath.Join(dir, CAKeyFile), 0o600)
	loaded, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Cert.Equal(ca.Cert) {
		t.Fatal("LoadCA returned another certificate")
	}
	tests := []struct {
		name      string
		req       CertRequest
		wantFiles [2]string
		wantDNS   []string
		wantIPs   []string
		wantEKU   []x509.ExtKeyUsage
		wantErr   string
	}{
		{
			name:      "master with extra names",
			req:       CertRequest{Identity: Identity{RoleMaster, "m1"}, DNS: []string{"m1.example"}, IPs: []net.IP{net.ParseIP("10.0.0.1")}},
			wantFiles: [2]string{"master-m1.pem", "master-m1-key.pem"},
			wantDNS:   []string{"m1.example", "localhost"},
			wantIPs:   []string{"10.0.0.1", "127.0.0.1", "::1"},
			wantEKU:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		},
		{
			name:      "agent",
			req:       CertRequest{Identity: Identity{RoleAgent, "node001"}, Days: 1},
			wantFiles: [2]string{"agent-node001.pem", "agent-node001-key.pem"},
			wantEKU:   []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		},
		{
			name:      "admin without a name",
			req:       CertRequest{Identity: Identity{RoleAdmin, ""}},
			wantFiles: [2]string{"admin.pem", "admin-key.pem"},
			wantEKU:   []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		},
		{name: "agent without a name", req: CertRequest{Identity: Identity{RoleAgent, ""}}, wantErr: "needs a name"},
		{name: "bad role", req: CertRequest{Identity: Identity{"root", "x"}}, wantErr: "role"},
		{name: "days out of range", req: CertRequest{Identity: Identity{RoleReader, ""}, Days: MaxDays + 1}, wantErr: "days"},
		{name: "bad DNS", req: CertRequest{Identity: Identity{RoleMaster, "m2"}, DNS: []string{"a b"}}, wantErr: "DNS name"},
		{name: "slash in name", req: CertRequest{Identity: Identity{RoleAgent, "../x"}}, wantErr: "character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := os.ReadDir(dir)
			certPath, keyPath, err := ca.IssueToDir(dir, tt.req, now)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("IssueToDir = %v, want error containing %q", err, tt.wantErr)
				}
				after, _ := os.ReadDir(dir)
				if len(after) != len(before) {
					t.Fatalf("a refused request wrote files: %d → %d entries", len(before), len(after))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Base(certPath) != tt.wantFiles[0] || filepath.Base(keyPath) != tt.wantFiles[1] {
				t.Fatalf("files %s %s, want %v", certPath, keyPath, tt.wantFiles)
			}
			assertMode(t, keyPath, 0o600)
			certs, err := readCerts(certPath)
			if err != nil {
				t.Fatal(err)
			}
			c := certs[0]
			id, err := IdentityFromCert(c)
			if err != nil || id != tt.req.Identity {
				t.Fatalf("identity %v, %v; want %v", id, err, tt.req.Identity)
			}
			if strings.Join(c.DNSNames, ",") != strings.Join(tt.wantDNS, ",") {
				t.Fatalf("DNS SANs %v, want %v", c.DNSNames, tt.wantDNS)
			}
			var ips []string
			for _, ip := range c.IPAddresses {
				ips = append(ips, ip.String())
			}
			if strings.Join(ips, ",") != strings.Join(tt.wantIPs, ",") {
				t.Fatalf("IP SANs %v, want %v", ips, tt.wantIPs)
			}
			if len(c.ExtKeyUsage) != len(tt.wantEKU) {
				t.Fatalf("EKU %v, want %v", c.ExtKeyUsage, tt.wantEKU)
			}
			if _, err := c.Verify(x509.VerifyOptions{Roots: poolOf(ca.Cert), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Fatalf("leaf does not verify against the CA: %v", err)
			}
			if _, _, err := ca.IssueToDir(dir, tt.req, now); err == nil || !strings.Contains(err.Error(), "exists") {
				t.Fatalf("issuing the same name twice = %v, want a refusal to overwrite", err)
			}
		})
	}
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != want {
		t.Fatalf("%s mode %v, want %v", path, fi.Mode().Perm(), want)
	}
}

func poolOf(c *x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c)
	return p
}

// pkiDir is a CA plus issued certificates in one directory.
type pkiDir struct {
	dir string
	ca  *CA
}

func newPKI(t *testing.T) *pkiDir {
	t.Helper()
	dir := t.TempDir()
	ca, err := CreateCA(dir, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &pkiDir{dir: dir, ca: ca}
}

func (p *pkiDir) issue(t *testing.T, id Identity) Files {
	t.Helper()
	c, k, err := p.ca.IssueToDir(p.dir, CertRequest{Identity: id}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return Files{CA: filepath.Join(p.dir, CAFile), Cert: c, Key: k}
}

// handshake runs one real TLS 1.3 handshake over loopback TCP and returns
// what each side saw.
func handshake(t *testing.T, server, client *tls.Config) (serverSaw Identity, clientSaw *x509.Certificate, err error) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	type result struct {
		id  Identity
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			done <- result{err: err}
			return
		}
		id, err := PeerIdentity(tc.ConnectionState())
		// Under TLS 1.3 the client learns of a rejected certificate only
		// when it reads: echo one byte.
		_, _ = io.CopyN(tc, tc, 1)
		done <- result{id: id, err: err}
	}()
	cc := client.Clone()
	cc.ServerName = "localhost"
	c, err := tls.Dial("tcp", lis.Addr().String(), cc)
	if err == nil {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err = c.Write([]byte{1}); err == nil {
			_, err = c.Read(make([]byte, 1))
		}
		if err == nil {
			clientSaw = c.ConnectionState().PeerCertificates[0]
		}
	}
	r := <-done
	if err == nil {
		err = r.err
	}
	return r.id, clientSaw, err
}

func TestHandshake(t *testing.T) {
	p := newPKI(t)
	other := newPKI(t)
	master := mustSource(t, p.issue(t, Identity{RoleMaster, "m1"}))
	agent := mustSource(t, p.issue(t, Identity{RoleAgent, "node001"}))
	reader := mustSource(t, p.issue(t, Identity{RoleReader, ""}))
	foreign := mustSource(t, other.issue(t, Identity{RoleAdmin, ""}))
	foreignMaster := mustSource(t, other.issue(t, Identity{RoleMaster, "m1"}))
	tests := []struct {
		name       string
		server     *tls.Config
		client     *tls.Config
		wantServer Identity
		wantErr    bool
	}{
		{name: "agent to master", server: ServerConfig(master, nil), client: ClientConfig(agent, RequireRole(RoleMaster)), wantServer: Identity{RoleAgent, "node001"}},
		{name: "raft port refuses an agent", server: ServerConfig(master, RequireRole(RoleMaster)), client: ClientConfig(agent, RequireRole(RoleMaster)), wantErr: true},
		{name: "client refuses a server that is no master", server: ServerConfig(reader, nil), client: ClientConfig(agent, RequireRole(RoleMaster)), wantErr: true},
		{name: "certificate of another CA", server: ServerConfig(master, nil), client: ClientConfig(foreign, RequireRole(RoleMaster)), wantErr: true},
		{name: "server of another CA", server: ServerConfig(foreignMaster, nil), client: ClientConfig(agent, RequireRole(RoleMaster)), wantErr: true},
		{name: "no client certificate", server: ServerConfig(master, nil), client: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}, wantErr: true},
		{name: "TLS 1.2 client", server: ServerConfig(master, nil), client: func() *tls.Config {
			c := ClientConfig(agent, nil)
			c.MaxVersion = tls.VersionTLS12
			return c
		}(), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := handshake(t, tt.server, tt.client)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("handshake succeeded (server saw %v), want a failure", got)
				}
				return
			}
			if err != nil || got != tt.wantServer {
				t.Fatalf("server saw %v, %v; want %v", got, err, tt.wantServer)
			}
		})
	}
}

func mustSource(t *testing.T, f Files) *Source {
	t.Helper()
	s, err := NewSource(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// replace overwrites dst with src's content and gives it a distinct
// modification time (as a rotation by an operator or cert-manager would).
func replace(t *testing.T, dst, src string, mod time.Time) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(dst, mod, mod); err != nil {
		t.Fatal(err)
	}
}

// TestRotationWithoutRestart changes the files under a running source:
// the next handshake uses the new certificate; a half-written pair keeps
// the last good one; a new CA is trusted once its file is in place.
func TestRotationWithoutRestart(t *testing.T) {
	p := newPKI(t)
	live := t.TempDir()
	f1 := p.issue(t, Identity{RoleMaster, "m1"})
	files := Files{CA: filepath.Join(live, "ca.pem"), Cert: filepath.Join(live, "cert.pem"), Key: filepath.Join(live, "key.pem")}
	mod := time.Now().Add(-time.Hour)
	step := func() time.Time { mod = mod.Add(time.Second); return mod }
	replace(t, files.CA, f1.CA, step())
	replace(t, files.Cert, f1.Cert, step())
	replace(t, files.Key, f1.Key, step())
	server := mustSource(t, files)
	client := mustSource(t, p.issue(t, Identity{RoleAdmin, ""}))
	serial := func() string {
		t.Helper()
		_, c, err := handshake(t, ServerConfig(server, nil), ClientConfig(client, RequireRole(RoleMaster)))
		if err != nil {
			t.Fatal(err)
		}
		return c.SerialNumber.String()
	}
	first := serial()

	// 1. A new certificate for the same identity.
	f2 := p.issue(t, Identity{RoleMaster, "m1-b"})
	replace(t, files.Cert, f2.Cert, step())
	// Only the certificate changed: it does not match the key, the old pair stays.
	if got := serial(); got != first {
		t.Fatalf("half-written pair: serial %s, want the old %s", got, first)
	}
	replace(t, files.Key, f2.Key, step())
	second := serial()
	if second == first {
		t.Fatal("the rotated certificate was not picked up")
	}
	if server.Identity() != (Identity{RoleMaster, "m1-b"}) {
		t.Fatalf("identity %v after rotation", server.Identity())
	}

	// 2. A broken certificate file keeps the last good pair.
	if err := os.WriteFile(files.Cert, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := serial(); got != second {
		t.Fatalf("broken file: serial %s, want %s", got, second)
	}

	// 3. A new CA: a client of the new CA is refused until the server's CA
	// file trusts it, then accepted, without a restart.
	q := newPKI(t)
	newClient := mustSource(t, q.issue(t, Identity{RoleAdmin, ""}))
	if _, _, err := handshake(t, ServerConfig(server, nil), ClientConfig(newClient, nil)); err == nil {
		t.Fatal("a client of an unknown CA was accepted")
	}
	both := append(mustRead(t, f1.CA), mustRead(t, filepath.Join(q.dir, CAFile))...)
	if err := os.WriteFile(files.CA, both, 0o600); err != nil {
		t.Fatal(err)
	}
	replace(t, files.Cert, f2.Cert, step())
	_ = os.Chtimes(files.CA, step(), mod)
	// The client of the new CA must trust the server's (old) CA too: the
	// three-step CA roll (trust both, reissue, drop the old).
	newClientFiles := Files{CA: files.CA, Cert: newClient.files.Cert, Key: newClient.files.Key}
	got, _, err := handshake(t, ServerConfig(server, nil), ClientConfig(mustSource(t, newClientFiles), RequireRole(RoleMaster)))
	if err != nil || got.Role != RoleAdmin {
		t.Fatalf("after the CA change: %v, %v", got, err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNewSourceErrors(t *testing.T) {
	p := newPKI(t)
	other := newPKI(t)
	good := p.issue(t, Identity{RoleAgent, "n1"})
	foreign := other.issue(t, Identity{RoleAgent, "n1"})
	at := func(when time.Time) Files {
		dir := t.TempDir()
		c, k, err := p.ca.IssueToDir(dir, CertRequest{Identity: Identity{RoleAgent, "n1"}, Days: 1}, when)
		if err != nil {
			t.Fatal(err)
		}
		return Files{CA: good.CA, Cert: c, Key: k}
	}
	expired, future := at(time.Now().Add(-48*time.Hour)), at(time.Now().Add(48*time.Hour))
	tests := []struct {
		name    string
		files   Files
		wantErr string
	}{
		{name: "missing key flag", files: Files{CA: good.CA, Cert: good.Cert}, wantErr: "--tls-key"},
		{name: "missing file", files: Files{CA: good.CA, Cert: good.Cert, Key: good.Key + ".nope"}, wantErr: "no such file"},
		{name: "cert of another CA", files: Files{CA: good.CA, Cert: foreign.Cert, Key: foreign.Key}, wantErr: "not signed by"},
		{name: "expired cert", files: expired, wantErr: "expired on"},
		{name: "cert not valid yet", files: future, wantErr: "is not valid before"},
		{name: "key of another cert", files: Files{CA: good.CA, Cert: good.Cert, Key: foreign.Key}, wantErr: "private key does not match"},
		{name: "CA file is a key", files: Files{CA: good.Key, Cert: good.Cert, Key: good.Key}, wantErr: "no CERTIFICATE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewSource(tt.files, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewSource = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestFilesFromEnv(t *testing.T) {
	env := map[string]string{"GIN_TLS_CA": "/e/ca", "GIN_TLS_CERT": "/e/c", "GIN_TLS_KEY": "/e/k"}
	got := FilesFromEnv(Files{Cert: "/flag/c"}, func(k string) string { return env[k] })
	if got != (Files{CA: "/e/ca", Cert: "/flag/c", Key: "/e/k"}) {
		t.Fatalf("FilesFromEnv = %+v (flags must win over the environment)", got)
	}
	if (Files{}).Given() || !got.Given() {
		t.Fatal("Given is wrong")
	}
}

func FuzzParseIdentity(f *testing.F) {
	for _, s := range []string{"spiffe://gin/master/m1", "spiffe://gin/admin", "spiffe://gin/agent/a/b", "spiffe://x/y", "spiffe://gin/agent/%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := url.Parse(s)
		if err != nil {
			return
		}
		id, err := ParseIdentity(u)
		if err != nil {
			return
		}
		// Whatever parses is valid and prints back to an ID that parses
		// to the same identity.
		if err := id.Validate(); err != nil {
			t.Fatalf("%q parsed to invalid %v: %v", s, id, err)
		}
		again, err := ParseIdentity(id.URI())
		if err != nil || again != id {
			t.Fatalf("%q: round trip %v → %v, %v", s, id, again, err)
		}
		if bytes.ContainsAny([]byte(id.Name), "/\x00\x1b") {
			t.Fatalf("%q: name %q has a forbidden byte", s, id.Name)
		}
	})
}

func TestCoversHost(t *testing.T) {
	p := newPKI(t)
	c, k, err := p.ca.IssueToDir(p.dir, CertRequest{Identity: Identity{RoleMaster, "m1"}, DNS: []string{"m1.example.org"}, IPs: []net.IP{net.ParseIP("10.0.0.11")}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	src := mustSource(t, Files{CA: filepath.Join(p.dir, CAFile), Cert: c, Key: k})
	for host, want := range map[string]bool{"m1.example.org": true, "10.0.0.11": true, "localhost": true, "127.0.0.1": true, "::1": true, "m2.example.org": false, "10.0.0.12": false} {
		if err := src.CoversHost(host); (err == nil) != want {
			t.Errorf("CoversHost(%s) = %v, want covered %v", host, err, want)
		}
	}
}
