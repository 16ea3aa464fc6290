// certs.go makes a cluster CA and certificates for the tests and benchmarks
// on real processes (the fault campaign, e2e) with the real
// `ginctl tls ca create` and `ginctl tls cert create` commands, as the
// README tells an operator to, and hands out the --tls-ca/--tls-cert/
// --tls-key flags and the files of each.

package testkit

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/pki"
)

// Cert is one certificate to make: a role, the name masters and agents
// need, and the IP addresses a master serves as (besides the loopback
// ones every master certificate names).
type Cert struct {
	Role string
	Name string
	IPs  []string
}

// Base is the file name ginctl gives c without ".pem": "ROLE-NAME", or
// "ROLE" without a name.
func (c Cert) Base() string {
	if c.Name == "" {
		return c.Role
	}
	return c.Role + "-" + c.Name
}

// CertDir is a directory holding ca.pem and the certificates made in it.
type CertDir string

// MakeCerts runs `ginctl tls ca create --dir dir` and `ginctl tls cert create`
// for each of certs, with the ginctl binary at ginctl; a failure fails tb.
func MakeCerts(tb testing.TB, ginctl, dir string, certs ...Cert) CertDir {
	tb.Helper()
	ctl(tb, ginctl, "ca", "create", "--dir", dir)
	for _, c := range certs {
		create(tb, ginctl, dir, c)
	}
	return CertDir(dir)
}

// ctl runs `ginctl tls args...`.
func ctl(tb testing.TB, ginctl string, args ...string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, ginctl, append([]string{"tls"}, args...)...).CombinedOutput()
	if err != nil {
		tb.Fatalf("ginctl tls %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// create runs `ginctl tls cert create` for c in dir (which holds the CA).
func create(tb testing.TB, ginctl, dir string, c Cert) {
	tb.Helper()
	args := []string{"cert", "create", "--dir", dir, "--role", c.Role}
	if c.Name != "" {
		args = append(args, "--name", c.Name)
	}
	for _, ip := range c.IPs {
		args = append(args, "--ip", ip)
	}
	ctl(tb, ginctl, args...)
}

// Reissue rotates certs in d as an operator would, without stopping the
// processes that use them: `ginctl tls cert create` issues each again
// from the same CA in a staging directory next to d (ginctl never
// overwrites a certificate), then the new key and certificate are renamed
// over the old files, one file at a time (a process may load the new key
// with the old certificate in between; it keeps its last good pair then).
// It returns each certificate's new serial number by Cert.Base.
func (d CertDir) Reissue(tb testing.TB, ginctl string, certs ...Cert) map[string]*big.Int {
	tb.Helper()
	staging, err := os.MkdirTemp(filepath.Dir(string(d)), "reissue-")
	if err != nil {
		tb.Fatal(err)
	}
	defer os.RemoveAll(staging)
	for _, f := range []string{pki.CAFile, pki.CAKeyFile} {
		b, err := os.ReadFile(filepath.Join(string(d), f))
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(staging, f), b, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	serials := map[string]*big.Int{}
	for _, c := range certs {
		create(tb, ginctl, staging, c)
		from, to := CertDir(staging).Files(c.Base()), d.Files(c.Base())
		for _, mv := range [][2]string{{from.Key, to.Key}, {from.Cert, to.Cert}} {
			if err := os.Rename(mv[0], mv[1]); err != nil {
				tb.Fatal(err)
			}
		}
		leaf, err := ReadCert(to.Cert)
		if err != nil {
			tb.Fatal(err)
		}
		serials[c.Base()] = leaf.SerialNumber
	}
	return serials
}

// ReadCert parses the first certificate of the PEM file path.
func ReadCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", path)
	}
	return x509.ParseCertificate(blk.Bytes)
}

// Files are the CA, certificate and key files of the certificate base
// ("master-m1", "agent-node001", "admin").
func (d CertDir) Files(base string) pki.Files {
	return pki.Files{CA: filepath.Join(string(d), pki.CAFile), Cert: filepath.Join(string(d), base+".pem"),
		Key: filepath.Join(string(d), base+"-key.pem")}
}

// Flags are gin-master's, gin-agent's and ginctl's --tls-ca, --tls-cert
// and --tls-key for the certificate base.
func (d CertDir) Flags(base string) []string {
	f := d.Files(base)
	return []string{"--tls-ca", f.CA, "--tls-cert", f.Cert, "--tls-key", f.Key}
}
