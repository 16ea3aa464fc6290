package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/pki"
)

// maxInitCerts bounds the --cert entries of one `ginctl tls init`.
const maxInitCerts = 10000

// tlsInitCmd is `ginctl tls init`: the CA and a set of certificates in one
// idempotent step (what a deployment runs at every start, e.g. compose's
// certs service, whose image has no shell to test for files first).
func (a *app) tlsInitCmd() *cobra.Command {
	var (
		dir          string
		specs        []string
		caDays, days int
	)
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create the CA and the given certificates in DIR unless they exist (idempotent)",
		Long: `Create DIR/ca.pem and DIR/ca-key.pem unless both exist, then each --cert
ROLE[/NAME][=HOST,...] unless its pair exists (names as ginctl tls cert create
writes them); NAME may be a hostlist (agent/node[001-500]: one certificate per
node). HOSTs are DNS names or IP addresses the holder serves as (masters;
localhost, 127.0.0.1 and ::1 are always added to master certificates). Nothing is
overwritten: a CA is kept and so is every certificate it issued, so running it
again changes nothing. A kept certificate that the CA did not issue, or that
names another identity, is an error naming the file; so is one file of a pair
without the other.`,
		Example: `  ginctl tls init --dir /etc/gin --cert master/m1=m1.example.org,10.0.0.11 \
    --cert 'agent/node[001-500]' --cert admin --cert scheduler --cert reader`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			if dir == "" {
				return usagef("--dir is required")
			}
			if caDays < 1 || caDays > pki.MaxDays || days < 1 || days > pki.MaxDays {
				return usagef("--ca-days %d, --days %d: want 1..%d", caDays, days, pki.MaxDays)
			}
			if len(specs) > maxInitCerts {
				return usagef("%d --cert: at most %d", len(specs), maxInitCerts)
			}
			reqs := make([]pki.CertRequest, 0, len(specs))
			for _, s := range specs {
				rs, err := parseCertSpecs(s, maxInitCerts-len(reqs))
				if err != nil {
					return usagef("--cert %q: %v", s, err)
				}
				for _, req := range rs {
					req.Days = days
					reqs = append(reqs, req)
				}
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return fmt.Errorf("--dir: %w", err)
			}
			now := time.Now()
			ca, created, err := pki.EnsureCA(dir, caDays, now)
			if err != nil {
				return err
			}
			out := []tlsInitResult{{Cert: filepath.Join(dir, pki.CAFile), Key: filepath.Join(dir, pki.CAKeyFile), Identity: "CA", Created: created}}
			for _, req := range reqs {
				c, k, created, err := ca.EnsureIssued(dir, req, now)
				if err != nil {
					return err
				}
				out = append(out, tlsInitResult{Cert: c, Key: k, Identity: req.Identity.String(), Created: created})
			}
			if a.output == "json" {
				return a.printJSON(out)
			}
			for _, r := range out {
				verb := "kept"
				if r.Created {
					verb = "wrote"
				}
				fmt.Fprintf(a.stdout, "%s %s and %s (%s)\n", verb, r.Cert, r.Key, r.Identity)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "directory for the CA and the certificates (created 0700 if missing)")
	f.StringArrayVar(&specs, "cert", nil, "a certificate, ROLE[/NAME][=HOST,...] (e.g. master/m1=m1.example.org,10.0.0.11, agent/node001, admin), repeatable")
	f.IntVar(&caDays, "ca-days", pki.DefaultCADays, "validity of a new CA in days")
	f.IntVar(&days, "days", pki.DefaultCertDays, "validity of new certificates in days (capped at the CA's)")
	return cmd
}

// tlsInitResult is one file pair `ginctl tls init` wrote or kept.
type tlsInitResult struct {
	Cert     string `json:"cert"`
	Key      string `json:"key"`
	Identity string `json:"identity"`
	Created  bool   `json:"created"`
}

// parseCertSpecs reads ROLE[/NAMES][=HOST,...], NAMES a hostlist
// (agent/node[001-500], as every other command takes nodes), into at most
// limit requests. HOSTs belong to one holder: a hostlist of several names
// takes none.
func parseCertSpecs(s string, limit int) ([]pki.CertRequest, error) {
	id, hosts, hasHosts := strings.Cut(s, "=")
	roleS, names, hasName := strings.Cut(id, "/")
	if !hasName || !strings.ContainsAny(names, "[,") {
		req, err := parseCertSpec(s)
		return []pki.CertRequest{req}, err
	}
	expanded, err := hostlist.ExpandAtMost(names, max(limit, 0))
	if err != nil {
		return nil, fmt.Errorf("NAME: %w (at most %d certificates in one tls init)", err, maxInitCerts)
	}
	if hasHosts && len(expanded) > 1 {
		return nil, fmt.Errorf("%d names with =%s: HOSTs belong to one certificate; give one --cert each", len(expanded), hosts)
	}
	out := make([]pki.CertRequest, 0, len(expanded))
	for _, n := range expanded {
		spec := roleS + "/" + n
		if hasHosts {
			spec += "=" + hosts
		}
		req, err := parseCertSpec(spec)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out = append(out, req)
	}
	return out, nil
}

// parseCertSpec reads ROLE[/NAME][=HOST,...] into a request.
func parseCertSpec(s string) (pki.CertRequest, error) {
	id, hosts, hasHosts := strings.Cut(s, "=")
	roleS, name, _ := strings.Cut(id, "/")
	role, err := pki.ParseRole(roleS)
	if err != nil {
		return pki.CertRequest{}, err
	}
	req := pki.CertRequest{Identity: pki.Identity{Role: role, Name: name}}
	if err := req.Identity.Validate(); err != nil {
		return pki.CertRequest{}, err
	}
	if !hasHosts {
		return req, nil
	}
	for _, h := range strings.Split(hosts, ",") {
		switch {
		case h == "":
			return pki.CertRequest{}, fmt.Errorf("an empty HOST after =")
		case net.ParseIP(h) != nil:
			req.IPs = append(req.IPs, net.ParseIP(h))
		default:
			req.DNS = append(req.DNS, h)
		}
	}
	return req, nil
}
