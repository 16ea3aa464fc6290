package livereport_test

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

var (
	reFootprint = regexp.MustCompile(`(?m)^FOOTPRINT stage=(\w+) threads=(\d+) rss_kb=(\d+)$`)
	reBench     = regexp.MustCompile(`(?m)^BENCH events=(\d+) median_ns=(\d+) p99_ns=(\d+)$`)
	reLoaded    = regexp.MustCompile(`(?m)^LOADED symbol=(\w+) name=(\w+)$`)
)

func harnessOut(t *testing.T, env []string, args ...string) string {
	t.Helper()
	lib, h := artifacts(t)
	cmd := exec.Command(h, append([]string{"--lib", lib}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("profharness %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// With GIN off the profiler (installed as libnccl-profiler.so, so every
// NCCL process loads it) starts no thread and stays within 512 KB; with
// GIN on it starts its one reporter thread. NCCL's loader finds v6 first.
func TestProfilerFootprint(t *testing.T) {
	for _, tc := range []struct {
		name        string
		env         []string
		wantThreads int
	}{
		{"GIN off", []string{"NCCL_GIN_ENABLED="}, 0},
		{"GIN not 1", []string{"NCCL_GIN_ENABLED=yes"}, 0},
		{"GIN on", []string{"NCCL_GIN_ENABLED=1", "NCCL_GIN_AGENT_SOCKET=/nonexistent/agent.sock"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := harnessOut(t, tc.env, "--footprint")
			if m := reLoaded.FindStringSubmatch(out); m == nil || m[1] != "ncclProfiler_v6" || m[2] != "GIN" {
				t.Fatalf("loaded %v, want ncclProfiler_v6 named GIN\n%s", m, out)
			}
			at := map[string][2]int{}
			for _, m := range reFootprint.FindAllStringSubmatch(out, -1) {
				th, _ := strconv.Atoi(m[2])
				kb, _ := strconv.Atoi(m[3])
				at[m[1]] = [2]int{th, kb}
			}
			b, ok := at["before_dlopen"]
			if !ok || len(at) != 3 {
				t.Fatalf("footprints %v\n%s", at, out)
			}
			f := at["after_init"]
			if d := f[0] - b[0]; d != tc.wantThreads {
				t.Errorf("%d threads added, want %d", d, tc.wantThreads)
			}
			if d := f[1] - b[1]; tc.wantThreads == 0 && d > 512 {
				t.Errorf("RSS +%d KB with GIN off, want at most 512", d)
			}
			t.Logf("%s: threads %d -> %d, RSS %d -> %d KB", tc.name, b[0], f[0], b[1], f[1])
		})
	}
}

// The per-event cost is measured (and logged), not asserted: it is a
// number for docs/BENCHMARKS.md, not a test that can fail on a slow
// machine. What is asserted is that every event was taken.
func TestProfilerEventCost(t *testing.T) {
	out := harnessOut(t, []string{"NCCL_GIN_ENABLED=1", "NCCL_GIN_AGENT_SOCKET=/nonexistent/agent.sock"}, "--bench", "100000")
	m := reBench.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no BENCH line\n%s", out)
	}
	if m[1] != "500000" {
		t.Fatalf("%s events, want 500000 (5 calls a step)", m[1])
	}
	t.Logf("per plugin call: median %s ns, p99 %s ns", m[2], m[3])
}
