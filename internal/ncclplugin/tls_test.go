package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/devcluster"
	"github.com/gin-topology/gin/internal/pki"
)

// TestNoAgentRanksAskTLSMasters: ranks on a node without an agent ask masters
// that serve mutual TLS with the certificate their environment names
// (NCCL_GIN_TLS_*, else GIN_TLS_*). A reader only reads the pinned plan: before
// a scheduler pinned it, ranks stand aside with the master's NOT_FOUND; after,
// they all apply it. Without a certificate the master refuses the handshake
// and ranks stand aside; a scheduler certificate in GIN_TLS_* pins a new job's
// plan itself.
func TestNoAgentRanksAskTLSMasters(t *testing.T) {
	artifacts(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cl, done, err := devcluster.Start(ctx, devcluster.Config{Bind: "127.0.0.1:0", Agents: 4, HeartbeatInterval: time.Second,
		DataDir: t.TempDir(), TLSDir: dir})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-done })
	addr := cl.Master.Addr()
	ca, err := pki.LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := func(role pki.Role) pki.Files {
		c, k, _, err := ca.EnsureIssued(dir, pki.CertRequest{Identity: pki.Identity{Role: role}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return pki.Files{CA: filepath.Join(dir, pki.CAFile), Cert: c, Key: k}
	}
	reader, scheduler := files(pki.RoleReader), files(pki.RoleScheduler)
	env := func(prefix string, f pki.Files, job string) []string {
		e := []string{"NCCL_GIN_ENABLED=1", "SLURM_JOB_ID=" + job, "SLURM_JOB_NODELIST=node[001-004]", "NCCL_GIN_MASTER_HOST=" + addr,
			"NCCL_GIN_AGENT_SOCKET=" + filepath.Join(t.TempDir(), "none.sock"), "NCCL_GIN_INIT_TIMEOUT_MS=3000"}
		if prefix != "" {
			e = append(e, prefix+"CA="+f.CA, prefix+"CERT="+f.Cert, prefix+"KEY="+f.Key)
		}
		return e
	}
	standsAside := func(r *run, cause string) {
		t.Helper()
		if !strings.Contains(r.out, "standing aside, NCCL tunes alone") || !strings.Contains(r.out, cause) {
			t.Fatalf("want a stand-aside naming %q\n%s", cause, r.out)
		}
		r.untouched(t)
	}

	// A reader before the plan is pinned: it may not create it.
	standsAside(runHarness(t, env("NCCL_GIN_TLS_", reader, "4343"), "--iters", "0", "32", "4"), "NotFound")
	// No certificate: the handshake fails, nothing is read.
	standsAside(runHarness(t, env("", pki.Files{}, "4343"), "--iters", "0", "32", "4"), addr)

	// The scheduler pins it (as PrologSlurmctld's ginctl plan does).
	creds, err := pki.ClientCredentials(scheduler, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	pinned, err := ginv1.NewPlanServiceClient(conn).GetOrCreatePlan(cctx, &ginv1.GetOrCreatePlanRequest{JobId: "4343", Nodes: "node[001-004]"})
	if err != nil {
		t.Fatal(err)
	}
	runs := concurrently(t, 4, env("NCCL_GIN_TLS_", reader, "4343"), "--iters", "0", "32", "4")
	sameDecisions(t, runs)
	for i, r := range runs {
		if !strings.Contains(r.out, "NCCL INFO GIN: Connected to topology service at "+addr+" ") ||
			!strings.Contains(r.out, "from master "+addr+" over mTLS as spiffe://gin/reader") {
			t.Fatalf("rank %d\n%s", i, r.out)
		}
	}
	if runs[0].summary["plan_hash"] != pinned.GetPlan().GetContentHash() {
		t.Fatalf("ranks applied %s, the scheduler pinned %s", runs[0].summary["plan_hash"], pinned.GetPlan().GetContentHash())
	}
	runs[0].check(t, pinned.GetPlan(), 32, 4)

	// GIN_TLS_* when no NCCL_GIN_TLS_* is set; a scheduler creates the plan.
	r := runHarness(t, env("GIN_TLS_", scheduler, "4344"), "--iters", "0", "32", "4")
	if !strings.Contains(r.out, "over mTLS as spiffe://gin/scheduler") {
		t.Fatalf("scheduler through GIN_TLS_*\n%s", r.out)
	}
	sameDecisions(t, []*run{r})
	// Half a family is an error naming it, not plaintext.
	half := append(env("", pki.Files{}, "4343"), "NCCL_GIN_TLS_CA="+reader.CA)
	standsAside(runHarness(t, half, "--iters", "0", "32", "4"), "NCCL_GIN_TLS_*: TLS needs --tls-ca, --tls-cert and --tls-key together")
}
