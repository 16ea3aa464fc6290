//go:build linux

package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// BenchmarkSessionBytes measures what one agent session costs a master
// (issue #16): a fresh single master (GODEBUG=gctrace=1) registers
// GIN_LOAD_AGENTS (default 3,000) simulated agents from cold, each its own
// connection and session (BenchmarkMasterTenThousandAgents' agents,
// heartbeating every 5 s); once they are attached and no snapshot is being
// taken, the master's live heap (the smallest "->N MB" of five
// collections that started after the phase began: reads of the node list
// are sent until they have run), its goroutine stacks and its goroutines
// are read; then
// every session is closed, and once the master has marked every node DOWN
// the same is read again: same nodes, no sessions. Per session is the
// difference over the agents. Both with mutual TLS (every agent its own
// agent/<node> certificate) and plaintext (--insecure), one fresh master
// each, in one run; GIN_SESSIONBYTES_MODES=mtls or =plaintext runs one.
//
//	go test -run '^$' -bench BenchmarkSessionBytes -benchtime=1x -timeout 30m ./e2e/
func BenchmarkSessionBytes(b *testing.B) {
	cfg := akConfig{
		agents:      benchEnv(b, akAgentsEnv, 3000, 1, 1<<20),
		concurrency: benchEnv(b, akConcurrencyEnv, 64, 1, 4096),
	}
	modes := strings.Split(os.Getenv("GIN_SESSIONBYTES_MODES"), ",")
	if modes[0] == "" {
		modes = []string{"mtls", "plaintext"}
	}
	raiseFileLimit(b, uint64(cfg.agents+akSpareFDs), fmt.Sprintf("%d agent connections need, in this process and in the master (lower %s)", cfg.agents, akAgentsEnv))
	bin := binaries(b)
	env := "GODEBUG=gctrace=1"
	if v := os.Getenv(akMasterEnv); v != "" {
		env += "," + v
	}
	type result struct{ heap, stacks, goroutines float64 }
	results := map[string]result{}
	for b.Loop() {
		for _, mode := range modes {
			var l *akLoad
			switch mode {
			case "mtls":
				certs, creds := agentCerts(b, bin, cfg.agents)
				l = startAkLoadEnv(b, bin, cfg, certs.Flags("master-m1"), env)
				l.creds = func(name string) credentials.TransportCredentials { return creds[name] }
			case "plaintext":
				l = startAkLoadEnv(b, bin, cfg, []string{"--insecure"}, env)
			default:
				b.Fatalf("GIN_SESSIONBYTES_MODES: unknown mode %q (mtls, plaintext)", mode)
			}
			n := float64(cfg.agents)
			reg, _ := l.register()
			l.waitMaster(fmt.Sprintf("%s: %d agents attached and %d nodes up", mode, cfg.agents, cfg.agents), akAttachWait, func(m foMetrics) error {
				agents, up := m.value("gin_master_connected_agents", ""), m.value("gin_master_nodes", `state="up"`)
				if agents != n || up != n {
					return fmt.Errorf("%v agents attached, %v nodes up", agents, up)
				}
				return nil
			})
			l.quiesce()
			with := l.sessionMemory(mode + ": every session open")
			for _, a := range l.agents {
				a.close()
			}
			l.waitMaster(fmt.Sprintf("%s: no session and %d nodes marked down", mode, cfg.agents), akDownWait, func(m foMetrics) error {
				agents, down := m.value("gin_master_connected_agents", ""), m.value("gin_master_nodes", `state="down"`)
				if agents != 0 || down != n {
					return fmt.Errorf("%v agents attached, %v nodes down", agents, down)
				}
				return nil
			})
			l.quiesce()
			without := l.sessionMemory(mode + ": no session")
			r := result{
				heap:       (with.heap - without.heap) / n,
				stacks:     (with.stacks - without.stacks) / n,
				goroutines: (with.goroutines - without.goroutines) / n,
			}
			results[mode] = r
			l.progress("%s: per session %.1f KiB of live heap, %.1f KiB of stacks, %.2f goroutines (%d sessions; registration %.1f s; load %s)",
				mode, r.heap/1024, r.stacks/1024, r.goroutines, cfg.agents, reg.Seconds(), akLoadavg())
			l.master.kill()
		}
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(cfg.agents), "agents")
	for mode, r := range results {
		b.ReportMetric(r.heap/1024, mode+"_heap_KiB/session")
		b.ReportMetric(r.stacks/1024, mode+"_stacks_KiB/session")
		b.ReportMetric(r.goroutines, mode+"_goroutines/session")
	}
}

// sbMemory is what the master held at one point: live heap after a
// collection, goroutine stacks in use, goroutines.
type sbMemory struct{ heap, stacks, goroutines float64 }

// sbGCTraceRE is a gctrace line's heap at the start of marking, at its
// end, and the live heap marked, in MB.
var sbGCTraceRE = regexp.MustCompile(`(\d+)->(\d+)->(\d+) MB`)

// sessionMemory reads the master's memory once five collections that
// started after the call have completed: node lists are read (one
// connection, the first agent's credentials) until the master's GC count
// has grown by six. The live heap is the smallest a collection marked
// (a collection also marks what is allocated while it runs).
func (l *akLoad) sessionMemory(what string) sbMemory {
	l.b.Helper()
	conn, err := grpc.NewClient(l.addr, grpc.WithTransportCredentials(l.creds(l.agents[0].name)))
	if err != nil {
		l.fatalf("%s: %v", what, err)
	}
	defer conn.Close()
	client := ginv1.NewTopologyServiceClient(conn)
	traces0 := len(sbGCTraces(l.master.Log))
	gc0 := akRuntimeMetrics(l.scraper.web, l.httpAddr)["go_gc_duration_seconds_count"]
	t0, reads := time.Now(), 0
	// The reads are paced: a collection marks what is allocated while it
	// runs as live, so reads back to back would add their own garbage.
	pace := time.NewTicker(sbReadEvery)
	defer pace.Stop()
	for {
		rt := akRuntimeMetrics(l.scraper.web, l.httpAddr)
		if rt["go_gc_duration_seconds_count"] >= gc0+sbCollections+1 {
			break
		}
		if time.Since(t0) > akGCWait {
			l.fatalf("%s: the master did not collect %d times within %s (%d node lists read)", what, sbCollections+1, akGCWait, reads)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := client.ListNodes(ctx, &ginv1.ListNodesRequest{})
		cancel()
		if err != nil {
			l.fatalf("%s: list nodes: %v", what, err)
		}
		reads++
		<-pace.C
	}
	rt := akRuntimeMetrics(l.scraper.web, l.httpAddr)
	traces := sbGCTraces(l.master.Log)
	if len(traces) < traces0+sbCollections+1 {
		l.fatalf("%s: %d gctrace lines in %s, want %d more than %d (the master runs with GODEBUG=gctrace=1)", what, len(traces), l.master.Log, sbCollections+1, traces0)
	}
	// The first collection counted may have started before the call.
	live := math.Inf(1)
	for _, t := range traces[traces0+1:] {
		live = min(live, t.live)
	}
	r := sbMemory{heap: live, stacks: rt["go_memstats_stack_inuse_bytes"], goroutines: rt["go_goroutines"]}
	rss, _ := akProcMem(l.master.Pid())
	l.progress("%s: live heap %.1f MiB (smallest of %d collections), stacks %.1f MiB, %v goroutines, RSS %.0f MiB (after %d node lists; last GC: %s)",
		what, r.heap/(1<<20), len(traces)-traces0-1, r.stacks/(1<<20), r.goroutines, rss/(1<<20), reads, traces[len(traces)-1].line)
	return r
}

// sbCollections is how many collections that started after a phase began
// sessionMemory reads the live heap of.
const sbCollections = 5

// sbReadEvery paces the node lists that make the master collect.
const sbReadEvery = 25 * time.Millisecond

// sbGCTrace is one gctrace line and the live heap it reports, in bytes.
type sbGCTrace struct {
	line string
	live float64
}

// sbGCTraces are the gctrace lines of a log, in order.
func sbGCTraces(path string) []sbGCTrace {
	data, _ := os.ReadFile(path)
	var out []sbGCTrace
	for line := range strings.SplitSeq(string(data), "\n") {
		if !strings.HasPrefix(line, "gc ") {
			continue
		}
		if m := sbGCTraceRE.FindStringSubmatch(line); m != nil {
			mb, _ := strconv.ParseFloat(m[3], 64)
			out = append(out, sbGCTrace{line: line, live: mb * (1 << 20)})
		}
	}
	return out
}
