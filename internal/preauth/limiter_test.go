package preauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/gin-topology/gin/internal/testkit"
)

// Flood bounds of the tests: floodConns connections from one address,
// of which perSource are held; the handshake deadline is long so that
// the held ones stay held for the whole test.
const (
	perSource  = 4
	floodConns = 40
	longWait   = time.Minute
)

func TestAdmitBounds(t *testing.T) {
	a := func(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 1} }
	tests := []struct {
		name          string
		perSource     int
		total         int
		from          []string
		wantOK        int
		wantRefused   Refused
		wantAfterFree int // admitted again from from[0] after all are released
	}{
		{"per source", 2, 10, []string{"10.0.0.1", "10.0.0.1", "10.0.0.1"}, 2, Refused{Source: 1}, 2},
		{"total", 2, 3, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"}, 3, Refused{Busy: 1}, 2},
		{"sources apart", 1, 10, []string{"10.0.0.1", "10.0.0.2", "10.0.0.1"}, 2, Refused{Source: 1}, 1},
		// PrefixFactor × perSource = 4 of one /24, whatever its addresses;
		// another /24 is apart.
		{"IPv4 /24", 1, 100, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.1.1", "::ffff:10.0.0.6"}, 5, Refused{Prefix: 2}, 1},
		{"IPv6 /64", 1, 100, []string{"2001:db8::1", "2001:db8::2", "2001:db8::3", "2001:db8::4", "2001:db8::5", "2001:db8:0:1::1"}, 5, Refused{Prefix: 1}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := New("test", tc.perSource, tc.total, nil)
			if err != nil {
				t.Fatal(err)
			}
			var rels []func()
			for _, ip := range tc.from {
				if rel, ok := l.Admit(a(ip)); ok {
					rels = append(rels, rel)
				}
			}
			if len(rels) != tc.wantOK || l.Refused() != tc.wantRefused {
				t.Fatalf("admitted %d, refused %+v; want %d, %+v", len(rels), l.Refused(), tc.wantOK, tc.wantRefused)
			}
			for _, rel := range rels {
				rel()
				rel() // twice changes nothing
			}
			if n := l.InFlight(); n != 0 {
				t.Fatalf("in flight after release: %d", n)
			}
			for range tc.wantAfterFree {
				if _, ok := l.Admit(a(tc.from[0])); !ok {
					t.Fatal("refused after every slot was released")
				}
			}
		})
	}
	if _, err := New("x", 0, 1, nil); err == nil {
		t.Fatal("a zero bound was accepted")
	}
}

func selfSigned(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "preauth"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS13}, pool
}

// dialerFrom dials from the loopback address src (127.0.0.0/8 is all
// loopback on Linux).
func dialerFrom(src string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
}

// flood opens floodConns connections from src to addr that send nothing,
// closed at the test's end.
func flood(t *testing.T, src, addr string) {
	t.Helper()
	d := dialerFrom(src)
	for range floodConns {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("flood from %s: %v", src, err)
		}
		t.Cleanup(func() { _ = c.Close() })
	}
}

// waitFlooded waits until the flood holds perSource slots and the rest
// were refused for their source.
func waitFlooded(t *testing.T, l *Limiter) {
	t.Helper()
	testkit.WaitFor(t, 20*time.Second, "the flood's connections past the per-source bound refused",
		func() bool { return l.Refused().Source == floodConns-perSource && l.InFlight() == perSource },
		func() string { return fmt.Sprintf("refused %+v, in flight %d", l.Refused(), l.InFlight()) })
	if r := l.Refused(); r.Busy != 0 {
		t.Fatalf("refused as busy: %+v", r)
	}
}

func TestGRPCFloodFromOneSourceDoesNotStarveOthers(t *testing.T) {
	l, err := New("grpc", perSource, 64, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, pool := selfSigned(t)
	srv := grpc.NewServer(grpc.Creds(l.Credentials(credentials.NewTLS(cfg))), grpc.ConnectionTimeout(longWait))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	flood(t, "127.0.0.2", lis.Addr().String())
	waitFlooded(t, l)

	// Other sources complete their handshakes; one of them opens more
	// sessions than the per-source bound, each held open: a connection
	// past its handshake holds no slot.
	call := func(src string) *grpc.ClientConn {
		d := dialerFrom(src)
		conn, err := grpc.NewClient(lis.Addr().String(),
			grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("from %s during the flood: %v", src, err)
		}
		return conn
	}
	call("127.0.0.1")
	for range 2 * perSource {
		call("127.0.0.3")
	}
	if n := l.InFlight(); n != perSource {
		t.Fatalf("slots held after the other sources' handshakes: %d, want the flood's %d", n, perSource)
	}
	if r := l.Refused(); r.Source != floodConns-perSource {
		t.Fatalf("refused %+v, want only the flood's %d", r, floodConns-perSource)
	}
}

func TestHTTPFloodFromOneSourceDoesNotStarveOthers(t *testing.T) {
	for _, useTLS := range []bool{true, false} {
		name := map[bool]string{true: "tls", false: "plain"}[useTLS]
		t.Run(name, func(t *testing.T) {
			lines := &countingHandler{}
			l, err := New("http", perSource, 64, slog.New(lines))
			if err != nil {
				t.Fatal(err)
			}
			cfg, pool := selfSigned(t)
			srv := &http.Server{ReadHeaderTimeout: longWait, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, "ok\n")
			})}
			l.GuardHTTP(srv)
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			scheme := "http"
			if useTLS {
				scheme = "https"
				lis = tls.NewListener(lis, cfg)
			}
			go func() { _ = srv.Serve(lis) }()
			t.Cleanup(func() { _ = srv.Close() })

			flood(t, "127.0.0.2", lis.Addr().String())
			waitFlooded(t, l)

			get := func(src string) {
				tr := &http.Transport{DialContext: dialerFrom(src).DialContext,
					TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}}
				t.Cleanup(tr.CloseIdleConnections)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+lis.Addr().String()+"/", nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := (&http.Client{Transport: tr}).Do(req)
				if err != nil {
					t.Fatalf("from %s during the flood: %v", src, err)
				}
				body, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || string(body) != "ok\n" {
					t.Fatalf("from %s: %d %q %v", src, resp.StatusCode, body, err)
				}
			}
			get("127.0.0.1")
			// Kept-alive connections past their first request hold no slot.
			for range 2 * perSource {
				get("127.0.0.3")
			}
			if n := l.InFlight(); n != perSource {
				t.Fatalf("slots held after the other sources' requests: %d, want the flood's %d", n, perSource)
			}
			if r := l.Refused(); r.Source != floodConns-perSource {
				t.Fatalf("refused %+v, want only the flood's %d", r, floodConns-perSource)
			}
			// The refusals and net/http's TLS handshake errors about them
			// are logged through token buckets, not a line each.
			if useTLS {
				testkit.WaitFor(t, 20*time.Second, "net/http's TLS handshake errors in the limiter's log",
					func() bool { return lines.httpErrors.Load() > 0 })
			}
			if n := lines.n.Load(); n >= floodConns-perSource {
				t.Fatalf("%d log lines for %d refused connections", n, floodConns-perSource)
			}
		})
	}
}

// countingHandler counts the records logged.
type countingHandler struct{ n, httpErrors atomic.Int64 }

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.n.Add(1)
	if r.Message == "http server error" {
		h.httpErrors.Add(1)
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }
