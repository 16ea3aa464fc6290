package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// BenchmarkPrologGate: the Slurm prolog (deploy/slurm/gin-prolog.sh) on a
// healthy node with the health gate (GIN_HEALTH_GATE=strict: ginctl gate
// asks the dev master for the node's verdict) and without it
// (GIN_HEALTH_GATE=off), run alternately so that both see the same load.
// The plan step is left out (no SLURM_JOB_NODELIST): the difference is the
// gate. Reports the median of each and the median difference, ms.
func BenchmarkPrologGate(b *testing.B) {
	bin := testprocBuild(b)
	addr, _, _ := startDev(b, bin)
	prolog, _ := filepath.Abs("../deploy/slurm/gin-prolog.sh")
	defaults := filepath.Join(b.TempDir(), "gin-slurm")
	if err := os.WriteFile(defaults, []byte("GIN_MASTER_HOST="+addr+"\nGINCTL="+filepath.Join(bin, "ginctl")+"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	run := func(gate string) time.Duration {
		cmd := exec.Command("bash", prolog)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GIN_SLURM_DEFAULTS=" + defaults, "GIN_HEALTH_GATE=" + gate,
			"SLURM_JOB_ID=1", "SLURMD_NODENAME=node001", "GIN_AGENT=/bin/true"}
		t0 := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil || len(out) != 0 {
			b.Fatalf("prolog (gate %s): %v\n%s", gate, err, out)
		}
		return time.Since(t0)
	}
	run("strict") // warm the page cache and the master's verdicts
	var off, on, diff []float64
	b.ResetTimer()
	for range b.N {
		o := run("off")
		s := run("strict")
		off, on, diff = append(off, ms(o)), append(on, ms(s)), append(diff, ms(s)-ms(o))
	}
	b.ReportMetric(medianMs(off), "ms-without-gate")
	b.ReportMetric(medianMs(on), "ms-with-gate")
	b.ReportMetric(medianMs(diff), "ms-gate-added")
}

func testprocBuild(b *testing.B) string { return binaries(b) }

func medianMs(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}
