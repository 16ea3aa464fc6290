//go:build linux

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/nodeplans"
	"github.com/gin-topology/gin/internal/plansock"
	"github.com/gin-topology/gin/internal/plantable"
)

// BenchmarkJobStartAgents measures the DESIGN target "job start of 16,384
// ranks on 2,048 nodes: rank init p99 ≤ 50 ms from the node's agent;
// masters see ≤ one request per node (zero when the prolog pinned the
// plan)", with the old every-rank-to-master path as the baseline in the
// same run.
//
// The cluster is the plan-storm benchmark's: three gin-master processes and
// GIN_PLANSTORM_AGENTS (16) gin-agent processes whose simulated nodes the
// job spans (the plan's size does not depend on the socket count). The
// node agents are GIN_JOBSTART_HELPERS (16) processes (this test binary,
// TestJobStartHelper) that each serve GIN_JOBSTART_RANKS/8/helpers node
// sockets with the agent's own plan code (internal/nodeplans store,
// internal/plansock server, internal/nodeplans.Masters fetcher): 2,048
// sockets, one per node. Ranks are goroutines of this process released by
// a barrier; a rank's init is what the plugin's C shim does on the agent
// path: a form-2 plansock request on its node's socket and the table's
// check (plantable.Decode, the C check's twin); its latency is taken from
// the barrier.
//
// Per iteration, three job starts with fresh job ids:
//   - agents+prolog: first every node's "prolog" asks its agent (the
//     agents fetch from the masters, one request per node), then the ranks;
//   - agents: no prolog, the ranks ask their agents, which fetch at once;
//   - masters (baseline): every rank asks the masters itself (stormFetch,
//     as BenchmarkPlanFetchStorm: its own gRPC connection, redirects).
//
// Reported per path: p50/p99/max of rank init (ms), failures, and the
// requests that reached the masters during the ranks' start
// (master_reqs) and, for the prolog, before it.
//
//	go test -run '^$' -bench BenchmarkJobStartAgents -benchtime=1x -timeout 30m ./e2e/
func BenchmarkJobStartAgents(b *testing.B) {
	ranks := benchEnv(b, "GIN_JOBSTART_RANKS", 16384, stormGPUsPerNode, 1<<20)
	nHelpers := benchEnv(b, "GIN_JOBSTART_HELPERS", 16, 1, 256)
	agents := benchEnv(b, stormAgentsEnv, defaultStormAgents, 1, 64)
	nodes := ranks / stormGPUsPerNode
	if nodes%nHelpers != 0 {
		b.Fatalf("%d nodes do not split over %d helpers", nodes, nHelpers)
	}
	raiseFileLimit(b, uint64(ranks+stormSpareFDs), fmt.Sprintf("%d concurrent ranks need (lower GIN_JOBSTART_RANKS)", ranks))
	bin := binaries(b)
	c := startFailoverCluster(b, bin, agents, nil)
	w := c.waitWhole("the cluster to form with every agent attached")
	var names, addrs []string
	for _, a := range c.agents {
		names = append(names, a.Name)
	}
	for _, m := range c.masters {
		addrs = append(addrs, m.client)
	}
	jobNodes := hostlist.Compress(names)
	b.Logf("%d masters (leader %s, term %d), %d agents; %d ranks on %d node sockets in %d helper processes",
		len(c.masters), c.masters[w.leader].id, w.term, agents, ranks, nodes, nHelpers)

	sockDir, err := os.MkdirTemp("", "gjs")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	helpers := startJobStartHelpers(b, sockDir, nHelpers, nodes, addrs)
	sock := func(node int) string { return filepath.Join(sockDir, strconv.Itoa(node)+".sock") }

	type pathStats struct {
		lat                 []float64
		failures, masterReq int
		prologReq           int
		prologMs            []float64
		// CPU during the ranks' start: of this process (the ranks), the
		// node-agent helpers, the masters and agents (ours), and of the
		// whole machine (ours and everyone else's); the start's wall time.
		cpuOurs, cpuMachine, wall time.Duration
		ranks                     int
	}
	stats := map[string]*pathStats{"agents+prolog": {}, "agents": {}, "masters": {}}
	iter := 0
	for b.Loop() {
		iter++
		for _, path := range []string{"agents+prolog", "agents", "masters"} {
			c.waitWhole("the cluster whole before the job starts")
			st := stats[path]
			job := fmt.Sprintf("js-%s-%d-%d", strings.ReplaceAll(path, "+", "-"), time.Now().UnixNano(), iter)
			sreq := plansock.Request{JobID: job, Nodes: jobNodes, GPUsPerNode: stormGPUsPerNode}
			if path == "agents+prolog" {
				before := helpers.fetches(b)
				t0 := time.Now()
				if n := prologAll(sreq, nodes, sock); n > 0 {
					b.Fatalf("prolog: %d nodes' agents could not get the plan", n)
				}
				st.prologMs = append(st.prologMs, float64(time.Since(t0).Microseconds())/1000)
				st.prologReq += helpers.fetches(b) - before
			}
			before := helpers.fetches(b)
			cpu0, mach0, w0 := helpers.cpu(c), akMachineCPU(), time.Now()
			self0, nodes0 := stormProcCPU("self"), helpers.nodesCPU()
			lat, failed, hashes := startRanks(ranks, path, sreq, sock, addrs)
			wall, cpu, mach := time.Since(w0), helpers.cpu(c)-cpu0, time.Duration((akMachineCPU()-mach0)*float64(time.Second))
			self, nodeAgents := stormProcCPU("self")-self0, helpers.nodesCPU()-nodes0
			st.cpuOurs, st.cpuMachine, st.wall, st.ranks = st.cpuOurs+cpu, st.cpuMachine+mach, st.wall+wall, st.ranks+ranks
			st.masterReq += helpers.fetches(b) - before
			if path == "masters" {
				st.masterReq += ranks // every rank asked the masters itself
			}
			st.lat = append(st.lat, lat...)
			st.failures += failed
			if len(hashes) != 1 {
				b.Fatalf("%s: ranks of job %s hold %d different plans: %v", path, job, len(hashes), hashes)
			}
			b.Logf("iteration %d %-13s job %s: p50 %.1f ms p99 %.1f ms max %.1f ms, %d failures, plan %.12s; "+
				"%.0f ms wall, CPU: ours %.0f ms (%.0f µs per rank: ranks %.0f, node agents %.0f, masters and agents %.0f), "+
				"whole machine busy %.0f ms of %d cores × %.0f ms",
				iter, path, job, stormPct(lat, 0.5), stormPct(lat, 0.99), stormPct(lat, 1), failed, firstKey(hashes),
				ms(wall), ms(cpu), perRank(cpu, ranks), perRank(self, ranks), perRank(nodeAgents, ranks), perRank(cpu-self-nodeAgents, ranks),
				ms(mach), runtime.NumCPU(), ms(wall))
			time.Sleep(stormPause)
		}
	}
	for _, path := range []string{"agents+prolog", "agents", "masters"} {
		st := stats[path]
		unit := strings.ReplaceAll(path, "+", "_")
		b.ReportMetric(stormPct(st.lat, 0.5), unit+"_p50_ms")
		b.ReportMetric(stormPct(st.lat, 0.99), unit+"_p99_ms")
		b.ReportMetric(stormPct(st.lat, 1), unit+"_max_ms")
		b.ReportMetric(float64(st.failures)/float64(iter), unit+"_failures/op")
		b.ReportMetric(float64(st.masterReq)/float64(iter), unit+"_master_reqs/op")
		b.ReportMetric(float64(st.cpuOurs.Microseconds())/float64(st.ranks), unit+"_cpu_us/rank")
		b.ReportMetric(100*st.cpuOurs.Seconds()/st.cpuMachine.Seconds(), unit+"_cpu_ours_%_of_busy")
		b.ReportMetric(100*st.cpuMachine.Seconds()/(st.wall.Seconds()*float64(runtime.NumCPU())), unit+"_machine_busy_%")
		if path == "agents+prolog" {
			b.ReportMetric(float64(st.prologReq)/float64(iter), "prolog_master_reqs/op")
			b.ReportMetric(stormPct(st.prologMs, 1), "prolog_all_nodes_ms")
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cpu is the CPU time used so far by this process, the masters, the
// agents and the node-agent helpers (/proc/<pid>/stat).
func (h *jobStartHelpers) cpu(c *foCluster) time.Duration {
	var total time.Duration
	for _, d := range stormCPU(c) {
		total += d
	}
	return total + h.nodesCPU()
}

func perRank(d time.Duration, ranks int) float64 { return float64(d.Microseconds()) / float64(ranks) }

// nodesCPU is the CPU time used so far by the node-agent helpers.
func (h *jobStartHelpers) nodesCPU() time.Duration {
	var total time.Duration
	for _, p := range h.procs {
		total += stormProcCPU(strconv.Itoa(p.cmd.Process.Pid))
	}
	return total
}

func firstKey(m map[string]int) string {
	for k := range m {
		return k
	}
	return ""
}

// prologAll asks every node's agent for the plan, 64 nodes at a time (as
// the nodes' prologs would, in parallel); it returns the failures.
func prologAll(req plansock.Request, nodes int, sock func(int) string) int {
	var mu sync.Mutex
	failed := 0
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for n := range nodes {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r, err := plansock.Fetch(ctx, sock(n), req)
			if err != nil || r.Status != plansock.StatusOK {
				mu.Lock()
				failed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return failed
}

// startRanks releases every rank at once and returns each one's init
// latency (ms, from the barrier), the failures and the plans they hold.
func startRanks(ranks int, path string, req plansock.Request, sock func(int) string, addrs []string) ([]float64, int, map[string]int) {
	lat := make([]float64, ranks)
	hash := make([]string, ranks)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	var t0 time.Time
	greq := &ginv1.GetOrCreatePlanRequest{JobId: req.JobID, Nodes: req.Nodes, GpusPerNode: req.GPUsPerNode}
	ctx, cancel := context.WithTimeout(context.Background(), stormFetchLimit)
	defer cancel()
	for r := range ranks {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			if path == "masters" {
				res := stormFetch(ctx, t0, addrs, r%len(addrs), greq, nil, r)
				lat[r] = float64(res.lat.Microseconds()) / 1000
				if res.err == nil {
					hash[r] = res.hash
				}
				return
			}
			// The plugin's agent path, as the C shim takes it: one form-2
			// request on the node's socket, then the table checked
			// (checksum, job, hash, cells; plantable.Decode is the C
			// check's twin).
			rctx, rcancel := context.WithTimeout(ctx, stormInitTimeout)
			defer rcancel()
			treq := req
			treq.Form = plansock.FormTable
			resp, err := plansock.Fetch(rctx, sock(r/stormGPUsPerNode), treq)
			if err == nil && resp.Status == plansock.StatusOK {
				if e, derr := plantable.Decode(resp.Body); derr == nil && e.Hash == resp.Hash && e.JobID == req.JobID {
					hash[r] = e.Hash
				}
			}
			lat[r] = float64(time.Since(t0).Microseconds()) / 1000
		}()
	}
	ready.Wait()
	t0 = time.Now()
	close(start)
	done.Wait()
	failed := 0
	hashes := map[string]int{}
	for _, h := range hash {
		if h == "" {
			failed++
			continue
		}
		hashes[h]++
	}
	return lat, failed, hashes
}

// jobStartHelpers are the node-agent processes.
type jobStartHelpers struct {
	procs []*jobStartHelper
}

type jobStartHelper struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// fetches asks every helper how many requests its node stores sent to the
// masters so far.
func (h *jobStartHelpers) fetches(b *testing.B) int {
	total := 0
	for _, p := range h.procs {
		if _, err := io.WriteString(p.in, "COUNT\n"); err != nil {
			b.Fatalf("helper: %v", err)
		}
		if !p.out.Scan() {
			b.Fatalf("helper exited: %v", p.out.Err())
		}
		n, err := strconv.Atoi(strings.TrimPrefix(p.out.Text(), "FETCHES "))
		if err != nil {
			b.Fatalf("helper said %q", p.out.Text())
		}
		total += n
	}
	return total
}

func startJobStartHelpers(b *testing.B, dir string, n, nodes int, masters []string) *jobStartHelpers {
	h := &jobStartHelpers{}
	per := nodes / n
	for i := range n {
		cmd := exec.Command(os.Args[0], "-test.run=^TestJobStartHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), "GIN_JOBSTART_HELPER_DIR="+dir, "GIN_JOBSTART_HELPER_FIRST="+strconv.Itoa(i*per),
			"GIN_JOBSTART_HELPER_COUNT="+strconv.Itoa(per), "GIN_JOBSTART_HELPER_MASTERS="+strings.Join(masters, ","))
		in, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		p := &jobStartHelper{cmd: cmd, in: in, out: bufio.NewScanner(out)}
		b.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
		for p.out.Scan() && p.out.Text() != "READY" {
		}
		if p.out.Text() != "READY" {
			b.Fatalf("helper %d did not start", i)
		}
		h.procs = append(h.procs, p)
	}
	return h
}

// TestJobStartHelper is one node-agent process of BenchmarkJobStartAgents
// (skipped unless the benchmark starts it): COUNT nodes' plan stores and
// sockets, the agent's own code; it answers "COUNT" on stdin with the
// requests that reached the masters and exits when stdin closes.
func TestJobStartHelper(t *testing.T) {
	dir := os.Getenv("GIN_JOBSTART_HELPER_DIR")
	if dir == "" {
		t.Skip("started by BenchmarkJobStartAgents only")
	}
	first, _ := strconv.Atoi(os.Getenv("GIN_JOBSTART_HELPER_FIRST"))
	count, _ := strconv.Atoi(os.Getenv("GIN_JOBSTART_HELPER_COUNT"))
	masters := strings.Split(os.Getenv("GIN_JOBSTART_HELPER_MASTERS"), ",")
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stores []*nodeplans.Store
	var wg sync.WaitGroup
	for n := first; n < first+count; n++ {
		m, err := nodeplans.NewMasters(masters, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		s, err := nodeplans.Open(nodeplans.Options{Fetcher: m})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := plansock.Listen(filepath.Join(dir, strconv.Itoa(n)+".sock"), s, nil)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
		wg.Go(func() { _ = srv.Serve(ctx) })
	}
	fmt.Println("READY")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		total := 0
		for _, s := range stores {
			total += s.Fetches()
		}
		fmt.Printf("FETCHES %d\n", total)
	}
	cancel()
	wg.Wait()
}
