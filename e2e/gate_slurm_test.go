package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/testkit"
)

// TestHealthGateUnderSlurm: three Slurm nodes whose GIN twins are simulated
// by a dev master, n2 with an NVLink down. slurmd runs the real
// deploy/slurm/gin-prolog.sh (GIN_HEALTH_GATE=strict) on every allocated
// node; a two-node batch job is first given n1,n2: n2's prolog drains n2
// with GIN's reason, Slurm requeues the job, and it runs on n1 and n3. The
// operator's sinfo -R shows the reason.
func TestHealthGateUnderSlurm(t *testing.T) {
	requireSlurm(t)
	bin := binaries(t)
	addr, _, _ := startDev(t, bin, "--dev-nodes", "n[1-3]", "--dev-fault", "n2/GPU3/nvlink7=down")

	work, err := os.MkdirTemp("/tmp", "gin-gate-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	prolog, _ := filepath.Abs("../deploy/slurm/gin-prolog.sh")
	// slurmd gives the prolog a bare environment: the wrapper sets what
	// /etc/default/gin-slurm would.
	defaults := filepath.Join(work, "gin-slurm")
	wrapper := filepath.Join(work, "prolog.sh")
	sc := startSlurm(t, slurmConfig{Nodes: 3, CPUs: 2,
		ConfExtra: "Prolog=" + wrapper + "\nPrologFlags=Alloc\nSchedulerParameters=nohold_on_prolog_fail"})
	write := func(p, s string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(defaults, fmt.Sprintf("GIN_MASTER_HOST=%s\nGIN_HEALTH_GATE=strict\nGINCTL=%s\nGIN_AGENT=/bin/true\nSLURM_CONF=%s\nPATH=%s\n",
		addr, filepath.Join(bin, "ginctl"), filepath.Join(sc.Dir, "etc", "slurm.conf"), os.Getenv("PATH")), 0o644)
	prologLog := filepath.Join(work, "prolog.log")
	write(wrapper, "#!/bin/bash\nexport GIN_SLURM_DEFAULTS="+defaults+"\necho \"prolog on $SLURMD_NODENAME for job $SLURM_JOB_ID\" >>"+prologLog+"\nexec 2>>"+prologLog+"\nexec "+prolog+" \"$@\"\n", 0o755)
	diag := func() string {
		b, _ := os.ReadFile(prologLog)
		return "prolog log:\n" + string(b) + "\n" + tailFile(sc.LogFile("slurmd-n2.log"))
	}
	out := filepath.Join(work, "job.out")
	script := filepath.Join(work, "job.sh")
	write(script, "#!/bin/bash\nsrun -N2 -n2 bash -c 'echo $SLURMD_NODENAME' | sort > "+out+"\n", 0o755)

	res, err := sc.Run(time.Minute, nil, "sbatch", "-N2", "-n2", "--requeue", "-o", filepath.Join(work, "batch.log"), script)
	if err != nil {
		t.Fatalf("sbatch: %v\n%s", err, res)
	}
	m := regexp.MustCompile(`Submitted batch job (\d+)`).FindStringSubmatch(res)
	if m == nil {
		t.Fatalf("sbatch: %s", res)
	}
	job := m[1]
	// Slurm holds a requeued batch job for its credential lifetime
	// (cred_expire, 120 s) before it is eligible again (Reason=BeginTime);
	// the test lifts that hold instead of waiting it out.
	lifted := false
	state := func() string {
		s, _ := sc.Run(30*time.Second, nil, "scontrol", "show", "job", job, "-o")
		if !lifted && strings.Contains(s, "Reason=BeginTime") {
			if out, err := sc.Run(30*time.Second, nil, "scontrol", "update", "JobId="+job, "StartTime=now"); err != nil {
				t.Logf("scontrol update StartTime=now: %v: %s", err, out)
			} else {
				lifted = true
			}
		}
		if f := regexp.MustCompile(`JobState=(\S+)`).FindStringSubmatch(s); f != nil {
			return f[1]
		}
		return s
	}
	testkit.WaitFor(t, 4*time.Minute, "job "+job+" to complete", func() bool { return state() == "COMPLETED" },
		func() string {
			s, _ := sc.Run(30*time.Second, nil, "scontrol", "show", "job", job)
			return s + "\n" + tailFile(sc.LogFile("slurmctld.log")) + "\n" + tailFile(sc.LogFile("slurmd-n2.log"))
		})
	got, err := os.ReadFile(out)
	if err != nil || string(got) != "n1\nn3\n" {
		t.Errorf("the job ran on %q (%v); want n1 and n3\n%s", got, err, diag())
	}
	reasons, err := sc.Run(30*time.Second, nil, "sinfo", "-R", "-h", "-o", "%N|%E")
	if err != nil || strings.TrimSpace(reasons) != "n2|GIN: nvlink-down GPU3/nvlink7" {
		t.Errorf("sinfo -R: %q (%v); want n2 drained with GIN's reason", reasons, err)
	}
	if s, _ := sc.Run(30*time.Second, nil, "scontrol", "show", "job", job, "-o"); !strings.Contains(s, "Restarts=1") {
		t.Errorf("the job was not requeued once: %s", s)
	}
}
