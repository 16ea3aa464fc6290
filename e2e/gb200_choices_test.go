package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// gb200Log is an nccl-tests all_reduce log of the published GB200 case
// (nccl#1801: three GB200 NVL4 partitions over InfiniBand, NCCL 2.27.3,
// NCCL_NVLS_ENABLE=0, 12 ranks) on the dev cluster's trays node001,
// node019 and node037 (three racks), 1-16 GiB at the published busbw
// (ring 197 GB/s, NCCL_ALGO=Tree 234 GB/s).
func gb200Log(algo string, busbw float64) string {
	var b strings.Builder
	b.WriteString("# nccl-tests version 2.17.8 nccl-headers=22703 nccl-library=22703\n# Collective test starting: all_reduce_perf\n")
	b.WriteString("# nThread 1 nGpus 1 minBytes 1073741824 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n")
	for r := range 12 {
		fmt.Fprintf(&b, "#  Rank %2d Group  0 Pid %d on %s device  %d [0000:%02x:00] NVIDIA GB200\n", r, 1000+r, []string{"node001", "node019", "node037"}[r/4], r%4, 1+0x10*(r%4))
	}
	b.WriteString("NCCL version 2.27.3+cuda12.9\n")
	fmt.Fprintf(&b, "node001:1000:1000 [0] NCCL INFO NCCL_ALGO set by environment to %s\n", algo)
	b.WriteString("node001:1000:1000 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.\n")
	b.WriteString("#\n#                                                              out-of-place                       in-place          \n")
	b.WriteString("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n")
	b.WriteString("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n")
	for size := uint64(1 << 30); size <= 16<<30; size <<= 1 {
		alg := busbw / (2 * 11.0 / 12)
		us := float64(size) / alg / 1000
		fmt.Fprintf(&b, "%12d  %12d     float     sum      -1  %7.1f  %6.2f  %6.2f      0  %7.1f  %6.2f  %6.2f      0\n", size, size/4, us, alg, busbw, us, alg, busbw)
	}
	fmt.Fprintf(&b, "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : %.2f \n#\n", busbw)
	return b.String()
}

// TestGB200ChoicesOnDevCluster: a dev cluster of GB200 trays, three of
// them in three racks (the published case's shape), the two published
// runs imported; the new plan's 16 GiB all_reduce rule reads
// nccl(nvls_tree),tree/simple, and the real plugin, loaded by the C
// harness with that plan, leaves NCCL's NVLSTree where the cost table
// offers NVLS and forces tree/simple where it does not
// (NCCL_NVLS_ENABLE=0), on NCCL 2.27.3; on NCCL 2.29.7 the measured tree is
// set aside by the version rule.
func TestGB200ChoicesOnDevCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binaries")
	}
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler for the plugin and the harness")
	}
	bin := binaries(t)
	addr, _, _ := startDev(t, bin, "--dev-agents", "37", "--dev-profile", "gb200-nvl72")
	ctl := func(args ...string) string {
		t.Helper()
		out, err := runTool(t, bin, "ginctl", append([]string{"--master", addr}, args...)...)
		if err != nil {
			t.Fatalf("ginctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	dir := t.TempDir()
	nodes := "node[001,019,037]"
	for _, run := range []struct {
		algo  string
		busbw float64
	}{{"Ring", 197}, {"Tree", 234}} {
		f := filepath.Join(dir, run.algo+".log")
		if err := os.WriteFile(f, []byte(gb200Log(run.algo, run.busbw)), 0o644); err != nil {
			t.Fatal(err)
		}
		if out := ctl("calibrate", "import", "--nccl-tests", f, "--nodes", nodes); !strings.Contains(out, "stored ") || !strings.Contains(out, "NCCL 2.27.3") {
			t.Fatalf("import %s: %s", run.algo, out)
		}
	}
	out := ctl("plan", "--job", "gb200", "--nodes", nodes, "--stage-dir", dir)
	if !regexp.MustCompile(`all_reduce\s+12\s+3\s+1G-\S+\s+nccl\(nvls_tree\),tree/simple\s`).MatchString(out) {
		t.Fatalf("the plan has no nccl(nvls_tree),tree/simple row for 12 ranks over 3 nodes:\n%s", out)
	}
	planFile := filepath.Join(dir, "plan-gb200.pb")

	lib := filepath.Join(bin, "libnccl-tuner-gin.so")
	build := exec.Command("go", "build", "-buildmode=c-shared", "-ldflags", "-extldflags -Wl,-z,nodelete",
		"-o", filepath.Join(bin, "libnccl-tuner-gin-go.so"), "./internal/ncclplugin")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build plugin: %v\n%s", err, out)
	}
	if out, err := exec.Command("cc", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-o", lib,
		"../internal/ncclplugin/shim/shim.c", "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("build shim: %v\n%s", err, out)
	}
	harness := filepath.Join(bin, "harness-rdynamic")
	if out, err := exec.Command("cc", "-O2", "-rdynamic", "-o", harness, "../internal/ncclplugin/harness/harness.c", "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("build harness: %v\n%s", err, out)
	}
	at16G := regexp.MustCompile(`DECISION coll=4 bytes=17179869184 algo=(-?\d+) proto=(-?\d+) nch=\d+ forced=(-?\d+)/(-?\d+)`)
	for _, tc := range []struct {
		name, nvls, version string
		want                string // algo proto forced
	}{
		{"NVLS offered", "on", "22703", "5 2 -1 -1"},
		{"NCCL_NVLS_ENABLE=0", "off", "22703", "0 2 0 2"},
		{"NCCL_NVLS_ENABLE=0 on NCCL 2.29.7", "off", "22907", "1 2 -1 -1"},
	} {
		cmd := exec.Command(harness, "--iters", "0", "--nvls", tc.nvls, "--nccl-version", tc.version, lib, "12", "3")
		cmd.Env = append(os.Environ(), "NCCL_GIN_ENABLED=1", "NCCL_GIN_PLAN_FILE="+planFile, "NCCL_GIN_JOB_ID=gb200", "SLURM_JOB_ID=")
		out, err := cmd.CombinedOutput()
		m := at16G.FindStringSubmatch(string(out))
		if err != nil || m == nil {
			t.Fatalf("%s: harness: %v\n%s", tc.name, err, out)
		}
		if got := strings.Join(m[1:], " "); got != tc.want {
			t.Errorf("%s: 16 GiB all_reduce runs/forces %s, want %s\n%s", tc.name, got, tc.want, out)
		}
	}
}
