package testcerts_test

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/testcerts"
	"github.com/gin-topology/gin/internal/testproc"
)

// TestMake builds ginctl and checks that the certificates it made carry
// the identities and addresses asked for, and that Flags and Files name
// them.
func TestMake(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ginctl")
	}
	bin := testproc.Build(t, "ginctl")
	certs := []testcerts.Cert{{Role: "master", Name: "m1", IPs: []string{"10.213.7.1"}}, {Role: "agent", Name: "node001"}, {Role: "scheduler"}}
	d := testcerts.Make(t, filepath.Join(bin, "ginctl"), filepath.Join(t.TempDir(), "tls"), certs...)
	for _, c := range certs {
		f := d.Files(c.Base())
		if flags := d.Flags(c.Base()); len(flags) != 6 || flags[1] != f.CA || flags[3] != f.Cert || flags[5] != f.Key {
			t.Fatalf("Flags(%s) = %v, Files %+v", c.Base(), flags, f)
		}
		b, err := os.ReadFile(f.Cert)
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		if blk == nil {
			t.Fatalf("%s: no PEM block", f.Cert)
		}
		leaf, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		id, err := pki.IdentityFromCert(leaf)
		if err != nil {
			t.Fatal(err)
		}
		if string(id.Role) != c.Role || id.Name != c.Name {
			t.Errorf("%s: identity %s, want role %s name %q", f.Cert, id, c.Role, c.Name)
		}
		for _, ip := range c.IPs {
			if err := leaf.VerifyHostname(ip); err != nil {
				t.Errorf("%s does not name %s: %v", f.Cert, ip, err)
			}
		}
		if _, err := pki.NewSource(f, nil); err != nil {
			t.Errorf("%s does not load: %v", c.Base(), err)
		}
	}
}
