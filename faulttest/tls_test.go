package faulttest

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/testcerts"
	"github.com/gin-topology/gin/internal/testproc"
)

// campaignCerts makes the campaign's cluster CA and certificates with the
// real `ginctl tls` commands, as the README tells an operator to: one
// master certificate per master naming the address it advertises inside
// its namespace, one agent certificate per node, and a scheduler
// certificate for the workload and the checks (it may pin plans and read
// everything the checks read, nothing more). It returns the directory and
// what it made (the rotation fault issues them again).
func campaignCerts(t *testing.T, bin, dir string, masterIPs, nodes []string) (testcerts.Dir, []testcerts.Cert) {
	t.Helper()
	var certs []testcerts.Cert
	for i, ip := range masterIPs {
		certs = append(certs, testcerts.Cert{Role: "master", Name: masterID(i), IPs: []string{ip}})
	}
	for _, n := range nodes {
		certs = append(certs, testcerts.Cert{Role: "agent", Name: n})
	}
	certs = append(certs, testcerts.Cert{Role: "scheduler"})
	return testcerts.Make(t, filepath.Join(bin, "ginctl"), dir, certs...), certs
}

func masterID(i int) string { return fmt.Sprintf("m%d", i+1) }

// scheduler is the workload's and the checks' TLS identity; it follows
// its files, so the rotation fault rotates it too.
func scheduler(t *testing.T, d testcerts.Dir) *pki.Source {
	t.Helper()
	src, err := pki.NewSource(d.Files("scheduler"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// servedSerial is the serial number of the certificate the master at addr
// presents to a new TLS connection (verified as a master of the CA naming
// that address).
func servedSerial(addr string, src *pki.Source) (*big.Int, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	cfg := pki.ClientConfig(src, pki.RequireRole(pki.RoleMaster))
	cfg.ServerName = host
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: time.Second}, Config: cfg}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// raftRedialLine is what a master logs when it closes its pooled Raft
// connections after its TLS files changed (internal/raft).
const raftRedialLine = "TLS files changed: closing pooled Raft connections"

// logCount is how many times p's log holds text.
func logCount(p *testproc.Proc, text string) int {
	b, _ := os.ReadFile(p.Log)
	return strings.Count(string(b), text)
}

// requireTLS checks that mTLS is really on in the campaign: every master
// logged that its Raft port takes only master certificates, and a
// plaintext client gets no answer from any of them.
func requireTLS(c *cluster) error {
	for i, p := range c.masters {
		if err := logSays(p, "Raft over TLS"); err != nil {
			return err
		}
		conn, err := grpc.NewClient(c.addrs[i], grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err = ginv1.NewAdminServiceClient(conn).GetClusterInfo(ctx, &ginv1.GetClusterInfoRequest{})
		cancel()
		_ = conn.Close()
		if err == nil {
			return fmt.Errorf("%s answered a plaintext client: TLS is not on", p.Name)
		}
	}
	return nil
}

// agentsUseTLS checks that every agent logged its mTLS identity.
func agentsUseTLS(c *cluster) error {
	for _, a := range c.agents {
		if err := logSays(a, "mTLS to the masters"); err != nil {
			return err
		}
	}
	return nil
}

// logSays checks that p's log holds text.
func logSays(p *testproc.Proc, text string) error {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return err
	}
	if !strings.Contains(string(b), text) {
		return fmt.Errorf("%s's log (%s) does not say %q: is TLS on?", p.Name, p.Log, text)
	}
	return nil
}
