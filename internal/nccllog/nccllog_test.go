package nccllog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
)

// devTopology is GIN's view of the dev cluster's node001 and node002
// (simulated DGX H100: 8 GPUs on NVSwitches, 8 active NDR compute ports).
func devTopology(t testing.TB) Topology {
	t.Helper()
	topo := Topology{}
	for _, n := range []string{"node001", "node002"} {
		src, err := sim.NewSource("dgx-h100", sim.NodeOptions{NodeName: n})
		if err != nil {
			t.Fatal(err)
		}
		inv, err := src.Collect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		topo[n] = inv
	}
	return topo
}

func parseFile(t testing.TB, name string) *Log {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	log, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return log
}

// got lists a report's findings as "severity check host".
func got(r *Report) []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, fmt.Sprintf("%s %s %s", f.Severity, f.Check, f.Host))
	}
	return out
}

// TestPublishedFailureModes: each fixture (shaped from a public log, cited
// in its header) is named for its failure mode, with GIN's topology and
// without it.
func TestPublishedFailureModes(t *testing.T) {
	for _, tc := range []struct {
		file  string
		want  []string // with the dev cluster's topology, in order
		alone []string // without any topology
	}{
		{"ib-disabled-by-env.log",
			[]string{"fail ib-disabled-by-env node001", "fail ib-disabled-by-env node002"},
			[]string{"warn ib-disabled-by-env node001", "warn ib-disabled-by-env node002"}},
		{"ib-no-device-container.log",
			[]string{"fail ib-no-device node001", "fail ib-no-device node002"},
			[]string{"warn ib-no-device node001", "warn ib-no-device node002"}},
		{"mixed-socket-ib.log",
			[]string{"fail mixed-transports ", "fail ib-no-device node002"},
			[]string{"fail mixed-transports ", "warn ib-no-device node002"}},
		{"p2p-disabled-shm.log",
			[]string{"fail p2p-via-shm node001", "warn p2p-restricted-by-env node001"},
			nil},
		{"version-mismatch.log",
			[]string{"fail nccl-version-mismatch "},
			[]string{"fail nccl-version-mismatch "}},
		{"farther-nic.log",
			[]string{"warn farther-nic node001", "warn farther-nic node002"},
			nil},
	} {
		t.Run(tc.file, func(t *testing.T) {
			log := parseFile(t, tc.file)
			r := Diagnose(log, devTopology(t))
			if g := got(r); !slices.Equal(g, tc.want) {
				t.Errorf("with topology: %q, want %q", g, tc.want)
			}
			for _, f := range r.Findings {
				if f.Title == "" || f.Detail == "" || f.Fix == "" || len(f.Lines) == 0 {
					t.Errorf("%s: a finding without its title, detail, fix or lines: %+v", f.Check, f)
				}
				for _, l := range f.Lines {
					if l.N <= 0 || !strings.Contains(l.Text, "NCCL") {
						t.Errorf("%s: evidence line %+v is not an NCCL line of the log", f.Check, l)
					}
				}
			}
			if len(r.Unmatched) != 0 {
				t.Errorf("unmatched hosts %v", r.Unmatched)
			}
			alone := Diagnose(log, nil)
			if g := got(alone); !slices.Equal(g, tc.alone) {
				t.Errorf("without topology: %q, want %q", g, tc.alone)
			}
		})
	}
}

func TestParseReadsPrefixedInterleavedLines(t *testing.T) {
	log := parseFile(t, "version-mismatch.log")
	if len(log.Procs) != 2 || log.Procs[0].Host != "node001" || log.Procs[1].Host != "node002" {
		t.Fatalf("procs %+v", log.Procs)
	}
	p := log.Procs[1]
	if p.Version != "2.18.5+cuda12.2" || p.Network != "IB" || len(p.IBDevices) != 8 || p.IBDevices[3] != "mlx5_5:1" || len(p.Warnings) != 1 {
		t.Errorf("node002: %+v", p)
	}
	if len(p.Ranks) != 1 || p.Ranks[0] != (Rank{Rank: 8, NRanks: 16, CUDADev: 0, BusID: "0000:18:00.0"}) {
		t.Errorf("node002 ranks %+v", p.Ranks)
	}
	// The merged device list of 2.2x plugins.
	if d := ibDevices("[0]={[0] mlx5_2:1/RoCE, [1] mlx5_3:1/RoCE} [1]={[2] mlx5_0:1/RoCE, [3] mlx5_1:1/RoCE} [RO]; OOB bond0:1.2.3.4<0>"); !slices.Equal(d, []string{"mlx5_2:1+mlx5_3:1", "mlx5_0:1+mlx5_1:1"}) {
		t.Errorf("merged devices %q", d)
	}
	// A bare "NCCL version" line (PyTorch prints it so) still counts.
	bare := parseFile(t, "ib-disabled-by-env.log")
	if len(bare.Unattributed) != 1 || bare.Unattributed[0].Version != "2.18.5+cuda12.2" {
		t.Errorf("unattributed %+v", bare.Unattributed)
	}
}

func TestGIDIndexOnRoCE(t *testing.T) {
	topo := devTopology(t)
	for _, n := range topo {
		h := n.Hcas[0] // mlx5_0, compute: made a RoCE port with a link-local and an IPv4-mapped GID
		h.Ports[0].LinkLayer = ginv1.LinkLayer_LINK_LAYER_ETHERNET
		h.Ports[0].Gids = []string{"fe80:0000:0000:0000:a288:c2ff:fe45:2e10", "0000:0000:0000:0000:0000:ffff:0a95:001f"}
	}
	log := "node001:1:1 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 0\nnode001:1:1 [0] NCCL INFO Using network IB\n"
	l, err := Parse(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	r := Diagnose(l, topo)
	if g := got(r); !slices.Equal(g, []string{"warn roce-gid-index node001"}) || !strings.Contains(r.Findings[0].Fix, "NCCL_IB_GID_INDEX=1") {
		t.Errorf("findings %q %+v", g, r.Findings)
	}
}

func TestParseBounds(t *testing.T) {
	long := strings.Repeat("x", MaxLine+10)
	l, err := Parse(strings.NewReader("node001:1:1 [0] NCCL INFO Using network IB\n" + long + "\nnode002:2:2 [0] NCCL INFO Using network Socket"))
	if err != nil {
		t.Fatal(err)
	}
	if l.Lines != 3 || l.Skipped != 1 || len(l.Procs) != 2 {
		t.Errorf("lines %d skipped %d procs %d", l.Lines, l.Skipped, len(l.Procs))
	}
	big := bytes.Repeat([]byte("node001:1:1 [0] NCCL INFO Using network IB\n"), 100)
	if _, err := parse(bytes.NewReader(big), len(big)-1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a log one byte over the bound: %v, want ErrTooLarge", err)
	}
	if _, err := parse(bytes.NewReader(big), len(big)); err != nil {
		t.Errorf("a log at the bound: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.log"))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	topo := devTopology(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := Parse(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err) // every input under MaxBytes parses
		}
		if l.NCCLLines > l.Lines || len(l.Procs) > MaxProcs {
			t.Fatalf("counts: %d NCCL lines of %d, %d procs", l.NCCLLines, l.Lines, len(l.Procs))
		}
		r := Diagnose(l, topo)
		for _, fd := range r.Findings {
			if len(fd.Lines) > MaxEvidence || fd.Severity == "" || fd.Check == "" {
				t.Fatalf("finding %+v", fd)
			}
			for _, ln := range fd.Lines {
				if ln.N < 1 || ln.N > l.Lines {
					t.Fatalf("evidence line %d of %d", ln.N, l.Lines)
				}
			}
		}
	})
}
