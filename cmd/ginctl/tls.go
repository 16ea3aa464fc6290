package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gin-topology/gin/internal/pki"
)

// tlsFiles is what ginctl's --tls-* flags and GIN_TLS_* name.
func (a *app) tlsFiles() pki.Files {
	return pki.FilesFromEnv(a.tls, a.getenv)
}

// tlsCmd is `ginctl tls`: the cluster CA and certificates (offline: it
// talks to no master).
func (a *app) tlsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "Create the cluster CA and certificates for mTLS; deny certificates",
		Long: `Create the cluster's certificate authority and the certificates of masters,
agents, operators, schedulers and readers (offline: ca create and cert create
talk to no master). Each certificate carries its identity as one URI SAN,
spiffe://gin/<role>[/<name>]; the masters allow each gRPC method to the roles
in docs/SECURITY.md's table. Keys are written with mode 0600 and nothing is overwritten.
deny, denied and allow manage the cluster's certificate deny list on the
masters (admin).`,
		Example: `  ginctl tls ca create --dir /etc/gin/tls
  ginctl tls cert create --dir /etc/gin/tls --role master --name m1 --dns m1.example.org --ip 10.0.0.11
  ginctl tls cert create --dir /etc/gin/tls --role agent --name node001 --days 30
  ginctl tls cert create --dir /etc/gin/tls --role admin
  ginctl tls init --dir /etc/gin/tls --cert master/m1=m1.example.org --cert agent/node001 --cert admin   # idempotent
  ginctl tls deny 3F2A9C01D4E5B6A7 --reason "laptop stolen"`,
		Args: noArgs,
	}
	ca := &cobra.Command{Use: "ca", Short: "The cluster CA", Args: noArgs}
	var caDir string
	var caDays int
	caCreate := &cobra.Command{
		Use:   "create",
		Short: "Create the cluster CA: DIR/ca.pem and DIR/ca-key.pem",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			if caDir == "" {
				return usagef("--dir is required")
			}
			if caDays < 0 || caDays > pki.MaxDays {
				return usagef("--days %d: want 1..%d", caDays, pki.MaxDays)
			}
			if err := os.MkdirAll(caDir, 0o700); err != nil {
				return fmt.Errorf("--dir: %w", err)
			}
			c, err := pki.CreateCA(caDir, caDays, time.Now())
			if err != nil {
				return err
			}
			out := tlsCreated{Cert: filepath.Join(caDir, pki.CAFile), Key: filepath.Join(caDir, pki.CAKeyFile),
				Serial: pki.FormatSerial(c.Cert.SerialNumber), NotAfter: c.Cert.NotAfter.UTC().Format(time.RFC3339)}
			return a.printCreated(out)
		},
	}
	caCreate.Flags().StringVar(&caDir, "dir", "", "directory for ca.pem and ca-key.pem (created 0700 if missing)")
	caCreate.Flags().IntVar(&caDays, "days", pki.DefaultCADays, "validity in days")
	ca.AddCommand(caCreate)

	cert := &cobra.Command{Use: "cert", Short: "Certificates signed by the cluster CA", Args: noArgs}
	var (
		dir, role, name string
		dns, ips        []string
		days            int
	)
	certCreate := &cobra.Command{
		Use:   "create",
		Short: "Create a certificate: DIR/ROLE-NAME.pem and DIR/ROLE-NAME-key.pem (DIR/ROLE.pem without a name)",
		Long: `Create a certificate signed by DIR/ca.pem for one identity, spiffe://gin/ROLE[/NAME].
Roles: master (NAME = its --node-id; the certificate also names localhost,
127.0.0.1 and ::1 besides --dns and --ip, and serves as well as dials), agent
(NAME = the node name it may write), admin, scheduler, reader (NAME optional).`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			if dir == "" {
				return usagef("--dir is required")
			}
			r, err := pki.ParseRole(role)
			if err != nil {
				return usagef("--role: %v", err)
			}
			if days < 1 || days > pki.MaxDays {
				return usagef("--days %d: want 1..%d", days, pki.MaxDays)
			}
			req := pki.CertRequest{Identity: pki.Identity{Role: r, Name: name}, DNS: dns, Days: days}
			if err := req.Identity.Validate(); err != nil {
				return usagef("--role/--name: %v", err)
			}
			for _, s := range ips {
				ip := net.ParseIP(s)
				if ip == nil {
					return usagef("--ip %q is not an IP address", s)
				}
				req.IPs = append(req.IPs, ip)
			}
			c, err := pki.LoadCA(dir)
			if err != nil {
				return fmt.Errorf("%w (create it with: ginctl tls ca create --dir %s)", err, dir)
			}
			certPath, keyPath, err := c.IssueToDir(dir, req, time.Now())
			if err != nil {
				return err
			}
			leaf, err := pki.ReadCertificate(certPath)
			if err != nil {
				return err
			}
			return a.printCreated(tlsCreated{Cert: certPath, Key: keyPath, Identity: req.Identity.String(), Serial: pki.FormatSerial(leaf.SerialNumber)})
		},
	}
	f := certCreate.Flags()
	f.StringVar(&dir, "dir", "", "directory holding ca.pem and ca-key.pem; the certificate is written there")
	f.StringVar(&role, "role", "", "master, agent, admin, scheduler or reader")
	f.StringVar(&name, "name", "", "the holder's name: a master's node id, an agent's node name (required for both)")
	f.StringArrayVar(&dns, "dns", nil, "a DNS name the holder serves as (masters), repeatable")
	f.StringArrayVar(&ips, "ip", nil, "an IP address the holder serves as (masters), repeatable")
	f.IntVar(&days, "days", pki.DefaultCertDays, "validity in days (capped at the CA's)")
	cert.AddCommand(certCreate)
	cmd.AddCommand(ca, cert, a.tlsInitCmd(), a.tlsDenyCmd(), a.tlsDeniedCmd(), a.tlsAllowCmd())
	return cmd
}

// tlsCreated is what `ginctl tls ... create` wrote.
type tlsCreated struct {
	Cert     string `json:"cert"`
	Key      string `json:"key"`
	Identity string `json:"identity,omitempty"`
	Serial   string `json:"serial,omitempty"`
	NotAfter string `json:"not_after,omitempty"`
}

func (a *app) printCreated(c tlsCreated) error {
	if a.output == "json" {
		return a.printJSON(c)
	}
	if c.Identity != "" {
		fmt.Fprintf(a.stdout, "wrote %s and %s (%s, serial %s)\n", c.Cert, c.Key, c.Identity, c.Serial)
		return nil
	}
	fmt.Fprintf(a.stdout, "wrote %s and %s (CA, serial %s, valid until %s); keep %s secret\n", c.Cert, c.Key, c.Serial, c.NotAfter, c.Key)
	return nil
}
