package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gin-topology/gin/internal/nodeplans"
	"github.com/gin-topology/gin/internal/plansock"
)

var reFootprint = regexp.MustCompile(`(?m)^FOOTPRINT stage=(\w+) threads=(-?\d+) rss_kb=(-?\d+)$`)

type footprintAt struct{ threads, rssKB int }

func footprints(t *testing.T, r *run) map[string]footprintAt {
	t.Helper()
	out := map[string]footprintAt{}
	for _, m := range reFootprint.FindAllStringSubmatch(r.out, -1) {
		th, _ := strconv.Atoi(m[2])
		kb, _ := strconv.Atoi(m[3])
		out[m[1]] = footprintAt{th, kb}
	}
	for _, stage := range []string{"before_dlopen", "after_dlopen", "after_init"} {
		if f, ok := out[stage]; !ok || f.threads <= 0 || f.rssKB <= 0 {
			t.Fatalf("no footprint at %s\n%s", stage, r.out)
		}
	}
	return out
}

// TestFootprint loads the library as NCCL does and reads the process's
// threads and resident set before dlopen, after it and after init. With
// GIN off (the library is installed as libnccl-tuner.so, so every NCCL
// process loads it) the C shim must start no thread and stay within
// 512 KB; with GIN on the Go loader's cost is logged, not asserted.
func TestFootprint(t *testing.T) {
	lib, _ := artifacts(t)
	for _, name := range []string{lib, filepath.Join(filepath.Dir(lib), "libnccl-tuner-gin-go.so")} {
		if st, err := os.Stat(name); err == nil {
			t.Logf("%s: %d bytes", filepath.Base(name), st.Size())
		}
	}
	off := footprints(t, runHarness(t, nil, "--iters", "0", "32", "4"))
	t.Logf("GIN off: %+v", off)
	b := off["before_dlopen"]
	for _, stage := range []string{"after_dlopen", "after_init"} {
		f := off[stage]
		if f.threads != b.threads {
			t.Errorf("GIN off, %s: %d threads, %d before dlopen", stage, f.threads, b.threads)
		}
		if d := f.rssKB - b.rssKB; d > 512 {
			t.Errorf("GIN off, %s: RSS +%d KB, want at most 512", stage, d)
		}
	}
	file := writePlan(t, simPlan(t, "job-fp"))
	on := footprints(t, runHarness(t, []string{"NCCL_GIN_ENABLED=1", "NCCL_GIN_PLAN_FILE=" + file, "SLURM_JOB_ID=job-fp"},
		"--iters", "0", "32", "4"))
	t.Logf("GIN on (plan file): %+v; init added %d threads and %d KB", on,
		on["after_init"].threads-on["before_dlopen"].threads, on["after_init"].rssKB-on["before_dlopen"].rssKB)
	if on["after_dlopen"].threads != on["before_dlopen"].threads {
		t.Errorf("GIN on: dlopen itself started threads: %+v", on)
	}

	// GIN on with the plan from the node's agent: the shim reads the
	// compiled table in C; no Go runtime, gRPC or protobuf is loaded.
	store, err := nodeplans.Open(nodeplans.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := simPlan(t, "job-fp")
	if err := store.Put(p); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(shortDir(t), "agent.sock")
	srv, err := plansock.Listen(sock, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	defer func() { cancel(); <-served }()
	r := runHarness(t, []string{"NCCL_GIN_ENABLED=1", "NCCL_GIN_AGENT_SOCKET=" + sock, "SLURM_JOB_ID=job-fp"}, "--iters", "0", "32", "4")
	viaAgent := footprints(t, r)
	t.Logf("GIN on (node agent, C path): %+v; init added %d threads and %d KB", viaAgent,
		viaAgent["after_init"].threads-viaAgent["before_dlopen"].threads, viaAgent["after_init"].rssKB-viaAgent["before_dlopen"].rssKB)
	if !r.ctxSet || r.summary["plan_hash"] != p.GetContentHash() || !strings.Contains(r.out, "(C, no Go loaded)") {
		t.Fatalf("the agent's plan was not applied by the C path\n%s", r.out)
	}
	r.check(t, p, 32, 4)
	if f := viaAgent["after_init"]; f.threads != viaAgent["before_dlopen"].threads {
		t.Errorf("GIN on via the agent: %d threads after init, %d before dlopen (the Go loader was loaded?)", f.threads, viaAgent["before_dlopen"].threads)
	}
	if d := viaAgent["after_init"].rssKB - viaAgent["before_dlopen"].rssKB; d > 1024 {
		t.Errorf("GIN on via the agent: RSS +%d KB", d)
	}
}
