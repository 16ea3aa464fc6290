package faulttest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/pki"
)

// campaignPKI is the campaign's cluster CA and certificates, made with the
// real `ginctl tls` commands as the README tells an operator to: one
// master certificate per master naming the address it advertises inside
// its namespace, one agent certificate per node, and a scheduler
// certificate for the workload and the checks (it may pin plans and read
// everything the checks read, nothing more).
type campaignPKI struct {
	dir string
}

// newCampaignPKI runs `ginctl tls ca create` and `ginctl tls cert create`
// for masters m1..mN (with --ip masterIPs[i]), the agents named nodes and
// the scheduler.
func newCampaignPKI(t *testing.T, bin, dir string, masterIPs, nodes []string) *campaignPKI {
	t.Helper()
	ctl := func(args ...string) {
		t.Helper()
		out, err := exec.Command(filepath.Join(bin, "ginctl"), append([]string{"tls"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ginctl tls %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ctl("ca", "create", "--dir", dir)
	for i, ip := range masterIPs {
		ctl("cert", "create", "--dir", dir, "--role", "master", "--name", masterID(i), "--ip", ip)
	}
	for _, n := range nodes {
		ctl("cert", "create", "--dir", dir, "--role", "agent", "--name", n)
	}
	ctl("cert", "create", "--dir", dir, "--role", "scheduler")
	return &campaignPKI{dir: dir}
}

func masterID(i int) string { return fmt.Sprintf("m%d", i+1) }

// flags are the --tls-ca/--tls-cert/--tls-key of the certificate
// base.pem ("master-m1", "agent-ftn1").
func (p *campaignPKI) flags(base string) []string {
	return []string{"--tls-ca", filepath.Join(p.dir, pki.CAFile), "--tls-cert", filepath.Join(p.dir, base+".pem"),
		"--tls-key", filepath.Join(p.dir, base+"-key.pem")}
}

// scheduler is the workload's and the checks' dial credentials.
func (p *campaignPKI) scheduler(t *testing.T) credentials.TransportCredentials {
	t.Helper()
	creds, err := pki.ClientCredentials(pki.Files{CA: filepath.Join(p.dir, pki.CAFile),
		Cert: filepath.Join(p.dir, "scheduler.pem"), Key: filepath.Join(p.dir, "scheduler-key.pem")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

// requireTLS checks that mTLS is really on in the campaign: every master
// logged that its Raft port takes only master certificates, and a
// plaintext client gets no answer from any of them.
func requireTLS(c *cluster) error {
	for i, p := range c.masters {
		b, err := os.ReadFile(p.Log)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "Raft over TLS") {
			return fmt.Errorf("%s's log does not say Raft runs over TLS (%s)", p.Name, p.Log)
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
		b, err := os.ReadFile(a.Log)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "mTLS to the masters") {
			return fmt.Errorf("agent %s's log does not say it uses mTLS (%s)", a.Name, a.Log)
		}
	}
	return nil
}
