package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"
)

// A certificate whose URI SAN is spiffe://gin/%61dmin (as DER carries it)
// is not an admin's: the identity is refused (issue #21).
func TestPercentEncodedIdentityInACertificateIsRefused(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{"spiffe://gin/%61dmin", "spiffe://gin/admin"} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), URIs: []*url.URL{u}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		id, err := IdentityFromCert(c)
		switch raw {
		case "spiffe://gin/admin":
			if err != nil || id.Role != RoleAdmin {
				t.Fatalf("%s: %v, %v; want admin", raw, id, err)
			}
		default:
			if err == nil || !strings.Contains(err.Error(), "percent-encoding") {
				t.Fatalf("%s: %v, %v; want refused for percent-encoding", raw, id, err)
			}
		}
	}
}
