package testkit_test

import (
	"crypto/x509"
	"path/filepath"
	"testing"

	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/testkit"
)

// TestMakeAndReissue builds ginctl and checks that the certificates it made
// carry the identities and addresses asked for, that Flags and Files name
// them, and that Reissue replaces them with new ones of the same identity
// that a running process's pki.Source picks up.
func TestMakeAndReissue(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ginctl")
	}
	ginctl := filepath.Join(testkit.BuildCommands(t, "ginctl"), "ginctl")
	certs := []testkit.Cert{{Role: "master", Name: "m1", IPs: []string{"10.213.7.1"}}, {Role: "agent", Name: "node001"}, {Role: "scheduler"}}
	d := testkit.MakeCerts(t, ginctl, filepath.Join(t.TempDir(), "tls"), certs...)
	check := func(c testkit.Cert) *x509.Certificate {
		t.Helper()
		f := d.Files(c.Base())
		if flags := d.Flags(c.Base()); len(flags) != 6 || flags[1] != f.CA || flags[3] != f.Cert || flags[5] != f.Key {
			t.Fatalf("Flags(%s) = %v, Files %+v", c.Base(), flags, f)
		}
		leaf, err := testkit.ReadCert(f.Cert)
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
		return leaf
	}
	sources := map[string]*pki.Source{}
	before := map[string]*x509.Certificate{}
	for _, c := range certs {
		before[c.Base()] = check(c)
		src, err := pki.NewSource(d.Files(c.Base()), nil)
		if err != nil {
			t.Fatalf("%s does not load: %v", c.Base(), err)
		}
		sources[c.Base()] = src
	}

	serials := d.Reissue(t, ginctl, certs...)
	for _, c := range certs {
		after := check(c)
		if after.SerialNumber.Cmp(before[c.Base()].SerialNumber) == 0 || after.SerialNumber.Cmp(serials[c.Base()]) != 0 {
			t.Errorf("%s: serial %x after Reissue (was %x, Reissue says %x)", c.Base(), after.SerialNumber, before[c.Base()].SerialNumber, serials[c.Base()])
		}
		got := sources[c.Base()].Certificate()
		if got.Leaf == nil {
			if got.Leaf, _ = x509.ParseCertificate(got.Certificate[0]); got.Leaf == nil {
				t.Fatal("unparsable pair")
			}
		}
		if got.Leaf.SerialNumber.Cmp(after.SerialNumber) != 0 {
			t.Errorf("%s: the running source still serves serial %x, want %x", c.Base(), got.Leaf.SerialNumber, after.SerialNumber)
		}
	}
}
