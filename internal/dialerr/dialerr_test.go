package dialerr

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/fakemaster"
)

// TestClassifyGRPCErrors: the causes are told from what grpc-go really
// says, dialling real listeners, so a change of its words fails here.
func TestClassifyGRPCErrors(t *testing.T) {
	tlsAddr := fakemaster.ServeTLS(t, &fakemaster.Plans{})
	plainAddr := fakemaster.Serve(t, &fakemaster.Plans{})
	web := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(web.Close)
	clientTLS := fakemaster.ClientTLS()

	tests := []struct {
		name  string
		addr  string
		creds credentials.TransportCredentials
		want  Cause
	}{
		{"plaintext to a TLS master", tlsAddr, insecure.NewCredentials(), TLSRequired},
		{"TLS to a plaintext master", plainAddr, clientTLS, NotTLS},
		{"plaintext to the HTTP port", web.Listener.Addr().String(), insecure.NewCredentials(), HTTPPort},
		{"TLS to the HTTP port", web.Listener.Addr().String(), clientTLS, NotTLS},
		{"nothing listens", fakemaster.DeadAddr(t), insecure.NewCredentials(), Refused},
		{"a master certificate of another CA", tlsAddr, credentials.NewTLS(&tls.Config{RootCAs: x509.NewCertPool(), ServerName: "x.test.example.com", MinVersion: tls.VersionTLS13}), WrongCA},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := grpc.NewClient(tc.addr, grpc.WithTransportCredentials(tc.creds))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err = ginv1.NewPlanServiceClient(conn).GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "1"})
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("call: %v, want UNAVAILABLE", err)
			}
			if got := Classify(err.Error()); got != tc.want {
				t.Fatalf("Classify(%q) = %v, want %v", err, got, tc.want)
			}
		})
	}
}

func TestClassifyText(t *testing.T) {
	tests := []struct {
		msg  string
		want Cause
	}{
		{`no master answered (127.0.0.1:5000: Unavailable: connection error: desc = "error reading server preface: EOF")`, TLSRequired},
		// The TLS server may close with the client's preface unread: a reset.
		{`rpc error: code = Unavailable desc = connection error: desc = "error reading server preface: read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer"`, TLSRequired},
		{`rpc error: code = Unavailable desc = connection error: desc = "error reading server preface: connection reset by peer"`, TLSRequired},
		{`connection error: desc = "error reading server preface: http2: frame too large"`, HTTPPort},
		{`connection error: desc = "transport: authentication handshake failed: tls: first record does not look like a TLS handshake"`, NotTLS},
		{`dial tcp: lookup nowhere.invalid: no such host`, NoSuchHost},
		{`context deadline exceeded`, Other},
		{``, Other},
	}
	for _, tc := range tests {
		if got := Classify(tc.msg); got != tc.want {
			t.Errorf("Classify(%q) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}

// TestClassifyWrongCAAlert: a master that does not know the client
// certificate's CA sends crypto/tls's unknown-CA alert.
func TestClassifyWrongCAAlert(t *testing.T) {
	msg := `rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: remote error: tls: unknown certificate authority"`
	if got := Classify(msg); got != WrongCA {
		t.Fatalf("Classify(%q) = %v, want WrongCA", msg, got)
	}
}

// TestClassifyExpired: a master whose certificate has expired is told
// from one of another CA, from grpc-go's own words.
func TestClassifyExpired(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "m1"}, DNSNames: []string{"m1.test"},
		NotBefore: now.Add(-72 * time.Hour), NotAfter: now.Add(-24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS13})))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: "m1.test", MinVersion: tls.VersionTLS13})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = ginv1.NewPlanServiceClient(conn).GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "1"})
	if got := Classify(err.Error()); got != Expired {
		t.Fatalf("Classify(%q) = %v, want Expired", err, got)
	}
}
