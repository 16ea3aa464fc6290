package testcerts

import (
	"context"
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

// Dir is a directory holding ca.pem and the certificates made in it.
type Dir string

// Make runs `ginctl tls ca create --dir dir` and `ginctl tls cert create`
// for each of certs, with the ginctl binary at ginctl; a failure fails tb.
func Make(tb testing.TB, ginctl, dir string, certs ...Cert) Dir {
	tb.Helper()
	run := func(args ...string) {
		tb.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, ginctl, append([]string{"tls"}, args...)...).CombinedOutput()
		if err != nil {
			tb.Fatalf("ginctl tls %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("ca", "create", "--dir", dir)
	for _, c := range certs {
		args := []string{"cert", "create", "--dir", dir, "--role", c.Role}
		if c.Name != "" {
			args = append(args, "--name", c.Name)
		}
		for _, ip := range c.IPs {
			args = append(args, "--ip", ip)
		}
		run(args...)
	}
	return Dir(dir)
}

// Files are the CA, certificate and key files of the certificate base
// ("master-m1", "agent-node001", "admin").
func (d Dir) Files(base string) pki.Files {
	return pki.Files{CA: filepath.Join(string(d), pki.CAFile), Cert: filepath.Join(string(d), base+".pem"),
		Key: filepath.Join(string(d), base+"-key.pem")}
}

// Flags are gin-master's, gin-agent's and ginctl's --tls-ca, --tls-cert
// and --tls-key for the certificate base.
func (d Dir) Flags(base string) []string {
	f := d.Files(base)
	return []string{"--tls-ca", f.CA, "--tls-cert", f.Cert, "--tls-key", f.Key}
}
