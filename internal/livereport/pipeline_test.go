package livereport_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/livejob"
	"github.com/gin-topology/gin/internal/livereport"
	"github.com/gin-topology/gin/internal/plansock"
)

// These tests run the whole live path on real parts but the gRPC hop:
// the C harness (internal/ncclplugin/profharness) loads the real
// libnccl-profiler-gin.so as NCCL does and runs 16 rank processes on 8
// simulated nodes in lock-step; each node has a real plan socket
// (plansock) with the agent's collector (livereport) behind it, whose
// flush feeds the leader's detector (livejob) as LiveService.ReportRanks
// does. Faults are the harness's; the test asserts who is named.

var (
	buildOnce sync.Once
	buildErr  error
	libPath   string
	harness   string
)

func artifacts(t *testing.T) (string, string) {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gin-profiler-")
		if err != nil {
			buildErr = err
			return
		}
		libPath = filepath.Join(dir, "libnccl-profiler-gin.so")
		harness = filepath.Join(dir, "profharness")
		if out, err := exec.Command("cc", "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "-fvisibility=hidden", "-pthread",
			"-o", libPath, "../ncclplugin/profiler/profiler.c").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("cc profiler.c: %v\n%s", err, out)
			return
		}
		if out, err := exec.Command("cc", "-O2", "-Wall", "-Werror", "-pthread", "-rdynamic", "-o", harness,
			"../ncclplugin/profharness/profharness.c", "-ldl").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("cc profharness.c: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return libPath, harness
}

type noPlans struct{}

func (noPlans) Plan(context.Context, plansock.Request) ([]byte, string, error) {
	return nil, "", plansock.ErrNotFound
}

// detectorSender is LiveService.ReportRanks without gRPC; bytes counts
// what the calls would carry (their encoded requests).
type detectorSender struct {
	d     *livejob.Detector
	bytes *atomic.Int64
}

func (s detectorSender) ReportRanks(_ context.Context, req *ginv1.ReportRanksRequest) (*ginv1.ReportRanksResponse, error) {
	s.bytes.Add(int64(proto.Size(req)))
	var n uint32
	for _, w := range req.GetWindows() {
		if err := s.d.Add(req.GetNodeName(), w, time.Now()); err != nil {
			return nil, err
		}
		n++
	}
	return &ginv1.ReportRanksResponse{Accepted: n}, nil
}

// cluster is 8 nodes' sockets and collectors feeding one detector.
type cluster struct {
	dir   string
	bytes atomic.Int64 // ReportRanks bytes, all nodes
	det   *livejob.Detector
	colls []*livereport.Collector
	socks []*plansock.Server
}

func startCluster(t *testing.T, nodes int) *cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "gs") // short: sun_path holds 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	c := &cluster{dir: dir, det: livejob.New(livejob.Config{}, nil)}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i := 1; i <= nodes; i++ {
		name := fmt.Sprintf("node%03d", i)
		src, err := sim.NewSource("dgx-h100", sim.NodeOptions{NodeName: name, Cluster: "live"})
		if err != nil {
			t.Fatal(err)
		}
		inv, err := src.Collect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		coll := livereport.New(name, livereport.NICOf(func() *ginv1.NodeInventory { return inv }), nil)
		sock, err := plansock.Listen(filepath.Join(dir, name+".sock"), noPlans{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sock.SetReportSink(coll)
		c.colls, c.socks = append(c.colls, coll), append(c.socks, sock)
		wg.Add(2)
		go func() { defer wg.Done(); _ = sock.Serve(ctx) }()
		go func() { defer wg.Done(); coll.Run(ctx, 500*time.Millisecond, detectorSender{c.det, &c.bytes}) }()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tk.C:
				c.det.Evaluate(now)
			}
		}
	}()
	return c
}

var reFault = regexp.MustCompile(`FAULT kind=(\w+) rank=(\d+) node=(\w+) gpu=(-?\d+) iter=\d+ at_ns=(\d+)`)

// runJob starts the harness and returns when it has printed its FAULT line
// (or at once without faults), with the fault's onset.
func runJob(t *testing.T, c *cluster, args ...string) (*exec.Cmd, time.Time, *strings.Builder) {
	t.Helper()
	lib, h := artifacts(t)
	cmd := exec.Command(h, append([]string{"--lib", lib, "--ranks", "16", "--nodes", "8", "--socket-dir", c.dir, "--job", "4242", "--duration-ms", "900000",
		// 1 ms network steps: the harness's sleeps overshoot by tens of
		// microseconds on a loaded machine, which would dilute a 1.5x
		// fault on shorter steps.
		"--net-us", "1000"}, args...)...)
	cmd.Env = append(os.Environ(), "NCCL_GIN_ENABLED=1", "NCCL_GIN_PROFILER_INTERVAL_MS=500")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	onset := make(chan time.Time, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := reFault.FindStringSubmatch(sc.Text()); m != nil {
				ns, _ := strconv.ParseInt(m[5], 10, 64)
				onset <- time.Unix(0, ns)
			}
		}
	}()
	hasFault := false
	for _, a := range args {
		hasFault = hasFault || a == "--fault"
	}
	if !hasFault {
		return cmd, time.Now(), &errb
	}
	select {
	case at := <-onset:
		return cmd, at, &errb
	case <-time.After(2 * time.Minute):
		t.Fatalf("the harness printed no FAULT line\n%s", errb.String())
	}
	return nil, time.Time{}, nil
}

// waitSuspect polls the detector (once per evaluation) until a suspect of
// kind appears or the deadline passes.
func waitSuspect(t *testing.T, c *cluster, kind string, deadline time.Duration) (*ginv1.Suspect, *ginv1.GetJobLiveResponse) {
	t.Helper()
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		if live, ok := c.det.Job("4242", time.Now()); ok {
			for _, s := range live.GetSuspects() {
				if s.GetKind() == kind && s.GetConfirmed() {
					return s, live
				}
			}
		}
		time.Sleep(250 * time.Millisecond) // polling a condition, not a race: the deadline is the bound
	}
	live, _ := c.det.Job("4242", time.Now())
	t.Fatalf("no confirmed %s within %s; the job: %v", kind, deadline, live)
	return nil, nil
}

func TestLiveNamesInjectedFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the harness for about a minute")
	}
	if runtime.GOOS != "linux" {
		t.Skip("Linux only (SO_PEERCRED)")
	}
	for _, tc := range []struct {
		name, fault, kind, node, component string
	}{
		// rank 5 is node003's second GPU: its nearest NIC on a DGX H100
		// (the simulated inventory) is the one the agent names.
		{"slow sender", "slow:5:300:1.5", livejob.KindSlowLink, "node003", ""},
		{"straggler", "straggle:9:300:3", livejob.KindStraggler, "node005", "gpu1"},
		{"hung rank", "hang:6:300", livejob.KindHang, "node004", "gpu0"},
		{"stopped rank", "stop:11:300", livejob.KindHang, "node006", "gpu1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, 8)
			_, onset, errb := runJob(t, c, "--fault", tc.fault)
			limit := 60 * time.Second
			s, live := waitSuspect(t, c, tc.kind, limit)
			took := time.Since(onset)
			t.Logf("%s named after %s: %s %s %s, slowdown %.2f\n  %s", tc.kind, took.Round(100*time.Millisecond), s.GetNode(), s.GetComponent(), s.GetNic(),
				s.GetSlowdown(), strings.Join(s.GetEvidence(), "\n  "))
			if s.GetNode() != tc.node {
				t.Fatalf("named %s, the fault is on %s\n%v\n%s", s.GetNode(), tc.node, s, errb)
			}
			if tc.component != "" && s.GetComponent() != tc.component {
				t.Errorf("component %s, want %s", s.GetComponent(), tc.component)
			}
			if tc.kind == livejob.KindSlowLink && (s.GetComponent() == "" || s.GetComponent() != s.GetNic() || !strings.HasPrefix(s.GetNic(), "mlx5_")) {
				t.Errorf("a slow link must name the rank's NIC: %v", s)
			}
			for _, o := range live.GetSuspects() {
				if o.GetConfirmed() && o.GetNode() != tc.node {
					t.Errorf("a second, wrong suspect: %v", o)
				}
			}
			if len(live.GetRanks()) != 16 || live.GetMissingRanks() != 0 {
				t.Errorf("%d ranks reporting, %d missing", len(live.GetRanks()), live.GetMissingRanks())
			}
		})
	}
}

// A clean job is never accused: 16 ranks for 30 s, no suspect at any
// evaluation.
func TestLiveCleanJobHasNoSuspects(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the harness for 30 s")
	}
	c := startCluster(t, 8)
	runJob(t, c)
	end := time.Now().Add(30 * time.Second)
	seen := false
	for time.Now().Before(end) {
		if live, ok := c.det.Job("4242", time.Now()); ok {
			seen = seen || len(live.GetRanks()) == 16
			if len(live.GetSuspects()) > 0 {
				t.Fatalf("a clean job accused: %v", live.GetSuspects())
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	if !seen {
		t.Fatal("the job's 16 ranks never all reported")
	}
	var taken uint64
	for _, cl := range c.colls {
		n := cl.Counts()
		taken += n.Taken
		if n.Refused != 0 {
			t.Errorf("refused %d windows", n.Refused)
		}
	}
	// 8 nodes, 2 ranks each, windows of 500 ms: a node's bytes per minute
	// at the default 1 s window are half of these.
	t.Logf("%d windows in 30 s from 16 ranks; %d bytes to the masters: %.0f bytes per node per minute at 500 ms windows",
		taken, c.bytes.Load(), float64(c.bytes.Load())/8/0.5)
}

// TestLiveCampaign is the detector's benchmark (docs/BENCHMARKS.md), run
// on demand: GIN_LIVE_CAMPAIGN=N randomized injected runs (kind, rank,
// onset and size drawn from GIN_LIVE_SEED), each until a confirmed suspect
// or 60 s, and GIN_LIVE_CLEAN_S seconds of a clean job; it reports
// precision, recall and the detection times, and fails under 95%.
func TestLiveCampaign(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("GIN_LIVE_CAMPAIGN"))
	if n <= 0 {
		t.Skip("GIN_LIVE_CAMPAIGN=N runs N randomized injected runs")
	}
	seed, _ := strconv.ParseUint(os.Getenv("GIN_LIVE_SEED"), 10, 64)
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("GIN_LIVE_SEED=%d", seed)
	rng := newRand(seed)
	kinds := []string{"slow", "straggle", "hang", "stop"}
	want := map[string]string{"slow": livejob.KindSlowLink, "straggle": livejob.KindStraggler, "hang": livejob.KindHang, "stop": livejob.KindHang}
	var right, wrong, missed int
	times := map[string][]time.Duration{}
	for i := 0; i < n; i++ {
		kind := kinds[rng.IntN(len(kinds))]
		rank := rng.IntN(16)
		iter := 200 + rng.IntN(300)
		fault := fmt.Sprintf("%s:%d:%d", kind, rank, iter)
		switch kind {
		case "slow":
			fault += fmt.Sprintf(":%.2f", 1.5+rng.Float64()*0.5)
		case "straggle":
			fault += fmt.Sprintf(":%d", 3+rng.IntN(4))
		}
		node := fmt.Sprintf("node%03d", rank/2+1)
		t.Run(fault, func(t *testing.T) {
			c := startCluster(t, 8)
			_, onset, _ := runJob(t, c, "--fault", fault, "--seed", strconv.Itoa(i+1))
			end := time.Now().Add(60 * time.Second)
			for time.Now().Before(end) {
				live, ok := c.det.Job("4242", time.Now())
				var named *ginv1.Suspect
				for _, s := range live.GetSuspects() {
					if !ok || !s.GetConfirmed() {
						continue
					}
					if s.GetNode() != node || s.GetKind() != want[kind] {
						wrong++
						t.Errorf("wrong suspect for %s: %v", fault, s)
						return
					}
					named = s
				}
				if named != nil {
					right++
					d := time.Since(onset)
					times[kind] = append(times[kind], d)
					t.Logf("%s: named after %s (slowdown %.2f)", fault, d.Round(100*time.Millisecond), named.GetSlowdown())
					return
				}
				time.Sleep(250 * time.Millisecond)
			}
			missed++
			t.Errorf("%s: not named within 60 s", fault)
		})
	}
	cleanS, _ := strconv.Atoi(os.Getenv("GIN_LIVE_CLEAN_S"))
	var falseAlarms int
	if cleanS > 0 {
		t.Run("clean", func(t *testing.T) {
			c := startCluster(t, 8)
			runJob(t, c, "--seed", "99")
			end := time.Now().Add(time.Duration(cleanS) * time.Second)
			for time.Now().Before(end) {
				if live, ok := c.det.Job("4242", time.Now()); ok && len(live.GetSuspects()) > 0 {
					falseAlarms++
					t.Errorf("clean job accused after %s: %v", time.Until(end), live.GetSuspects())
					return
				}
				time.Sleep(500 * time.Millisecond)
			}
		})
	}
	precision := float64(right) / float64(max(1, right+wrong+falseAlarms))
	recall := float64(right) / float64(max(1, n))
	t.Logf("runs %d: named right %d, wrong %d, missed %d; clean %d s: %d false alarms; precision %.1f%%, recall %.1f%%",
		n, right, wrong, missed, cleanS, falseAlarms, precision*100, recall*100)
	for k, ds := range times {
		t.Logf("detection %s: %s", k, distribution(ds))
	}
	if precision < 0.95 || recall < 0.95 {
		t.Errorf("precision %.1f%%, recall %.1f%%: both must be at least 95%%", precision*100, recall*100)
	}
}

func distribution(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := append([]time.Duration(nil), ds...)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[int(p*float64(len(s)-1))].Round(100 * time.Millisecond) }
	return fmt.Sprintf("n=%d min %s median %s p90 %s max %s", len(s), q(0), q(0.5), q(0.9), q(1))
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 7)) }
