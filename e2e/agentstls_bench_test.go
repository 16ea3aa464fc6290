//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/testkit"
)

// BenchmarkAgentRegistrationTLS registers GIN_LOAD_AGENTS (default 10,000)
// simulated agents from cold, each with its own connection (the agents of
// BenchmarkMasterTenThousandAgents, GIN_LOAD_REGISTER_CONCURRENCY
// handshakes at a time), on a fresh single master with mutual TLS (every
// agent its own agent/<node> certificate from the cluster CA, made with
// internal/pki; the master's with ginctl tls), then on a fresh plaintext
// master (--insecure), in the same run: registration time and the master's
// CPU per node of each, and their ratio (issue #11).
//
//	go test -run '^$' -bench BenchmarkAgentRegistrationTLS -benchtime=1x -timeout 40m ./e2e/
func BenchmarkAgentRegistrationTLS(b *testing.B) {
	cfg := akConfig{
		agents:      benchEnv(b, akAgentsEnv, 10000, 1, 1<<20),
		concurrency: benchEnv(b, akConcurrencyEnv, 64, 1, 4096),
	}
	raiseFileLimit(b, uint64(cfg.agents+akSpareFDs), fmt.Sprintf("%d agent connections need, in this process and in the master (lower %s)", cfg.agents, akAgentsEnv))
	bin := binaries(b)
	t0 := time.Now()
	certs, creds := agentCerts(b, bin, cfg.agents)
	fmt.Fprintf(os.Stderr, "agentstls: %d agent certificates in %.1f s\n", cfg.agents, time.Since(t0).Seconds())

	type result struct {
		reg      time.Duration
		cpuPerMs float64
		rssMiB   float64
	}
	run := func(mode string, args []string, agentCreds func(string) credentials.TransportCredentials) result {
		l := startAkLoadWith(b, bin, cfg, args)
		if agentCreds != nil {
			l.creds = agentCreds
		}
		reg, cpu := l.register()
		l.waitMaster(fmt.Sprintf("%s: %d agents attached and %d nodes up", mode, cfg.agents, cfg.agents), akAttachWait, func(m foMetrics) error {
			agents, up := m.value("gin_master_connected_agents", ""), m.value("gin_master_nodes", `state="up"`)
			if agents != float64(cfg.agents) || up != float64(cfg.agents) {
				return fmt.Errorf("%v agents attached, %v nodes up", agents, up)
			}
			return nil
		})
		rss, _ := akProcMem(l.master.Pid())
		rt := akRuntimeMetrics(l.scraper.web, l.httpAddr)
		l.progress("%s: heap in use %.0f MiB, stacks %.0f MiB, %v goroutines; last GC (GODEBUG=gctrace=1 in %s): %s", mode,
			rt["go_memstats_heap_inuse_bytes"]/(1<<20), rt["go_memstats_stack_inuse_bytes"]/(1<<20), rt["go_goroutines"], akMasterEnv, akLastGCTrace(l.master.Log))
		for _, a := range l.agents {
			a.close()
		}
		l.master.kill()
		l.progress("%s: registration of %d agents %.1f s (%.0f/s), master CPU %.2f ms per node, RSS %.0f MiB; load %s",
			mode, cfg.agents, reg.Seconds(), float64(cfg.agents)/reg.Seconds(), cpu*1000/float64(cfg.agents), rss/(1<<20), akLoadavg())
		return result{reg: reg, cpuPerMs: cpu * 1000 / float64(cfg.agents), rssMiB: rss / (1 << 20)}
	}
	var tlsRes, plainRes result
	for b.Loop() {
		tlsRes = run("mTLS", certs.Flags("master-m1"), func(name string) credentials.TransportCredentials { return creds[name] })
		plainRes = run("plaintext", []string{"--insecure"}, nil)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(cfg.agents), "agents")
	b.ReportMetric(tlsRes.reg.Seconds(), "tls_registration_s")
	b.ReportMetric(plainRes.reg.Seconds(), "plain_registration_s")
	b.ReportMetric(tlsRes.reg.Seconds()/plainRes.reg.Seconds(), "tls/plain")
	b.ReportMetric(tlsRes.cpuPerMs, "tls_master_cpu_ms/node")
	b.ReportMetric(plainRes.cpuPerMs, "plain_master_cpu_ms/node")
	b.ReportMetric(tlsRes.rssMiB, "tls_master_rss_MiB")
	b.ReportMetric(plainRes.rssMiB, "plain_master_rss_MiB")
}

// agentCerts makes the cluster CA, the master m1's certificate (with
// ginctl) and one agent/<node> certificate per simulated agent (with
// internal/pki), and returns the agents' transport credentials by name.
func agentCerts(b *testing.B, bin string, agents int) (testkit.CertDir, map[string]credentials.TransportCredentials) {
	dir := filepath.Join(b.TempDir(), "tls")
	certs := testkit.MakeCerts(b, filepath.Join(bin, "ginctl"), dir, testkit.Cert{Role: "master", Name: "m1"})
	ca, err := pki.LoadCA(dir)
	if err != nil {
		b.Fatal(err)
	}
	creds := make(map[string]credentials.TransportCredentials, agents)
	for i := range agents {
		name := fmt.Sprintf("ak%05d", i)
		if _, _, err := ca.IssueToDir(dir, pki.CertRequest{Identity: pki.Identity{Role: pki.RoleAgent, Name: name}}, time.Now()); err != nil {
			b.Fatal(err)
		}
		if creds[name], err = pki.ClientCredentials(certs.Files("agent-"+name), nil); err != nil {
			b.Fatal(err)
		}
	}
	return certs, creds
}
