package e2e

import (
	"context"
	"net"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/export"
	"github.com/gin-topology/gin/internal/graph"
)

// TestSlurmTopologyTree feeds a topology.conf written by export.SlurmTree to
// a real slurmctld (TopologyPlugin=topology/tree) and checks that Slurm
// accepts it: `scontrol show topology` lists our switches and nodes, jobs
// see SLURM_TOPOLOGY_ADDR through our switches, and slurmctld logs no
// topology error. The nodes are the harness's n1..n4 (four slurmd on this
// machine), as four simulated DGX H100 in two scalable units.
func TestSlurmTopologyTree(t *testing.T) {
	requireSlurm(t)
	start := time.Now()

	// The topology: n1..n4 as 4 DGX H100 in 2 leaf groups under 2 spines.
	names := []string{"n1", "n2", "n3", "n4"}
	conf := simTree(t, names)
	t.Logf("topology.conf:\n%s", conf)
	c := startSlurm(t, slurmConfig{Nodes: len(names), CPUs: 2, Topology: conf})
	run := func(timeout time.Duration, name string, args ...string) (string, error) {
		return c.Run(timeout, nil, name, args...)
	}

	// scontrol show topology lists every switch with our nodes or children.
	topo, err := run(time.Minute, "scontrol", "show", "topology")
	if err != nil {
		t.Fatalf("scontrol show topology: %v\n%s", err, topo)
	}
	t.Logf("scontrol show topology:\n%s", topo)
	shown := map[string]string{}
	for _, line := range strings.Split(topo, "\n") {
		if m := regexp.MustCompile(`^SwitchName=(\S+) `).FindStringSubmatch(line); m != nil {
			shown[m[1]] = " " + line + " "
		}
	}
	for _, line := range strings.Split(string(conf), "\n") {
		if !strings.HasPrefix(line, "SwitchName=") {
			continue
		}
		f := strings.Fields(line)
		name := strings.TrimPrefix(f[0], "SwitchName=")
		got, ok := shown[name]
		if !ok {
			t.Errorf("slurmctld does not show switch %s", name)
			continue
		}
		if !strings.Contains(got, " "+f[1]+" ") {
			t.Errorf("switch %s: slurmctld shows %q, want %s", name, strings.TrimSpace(got), f[1])
		}
	}

	// Jobs see the topology: SLURM_TOPOLOGY_ADDR is spine.leaf.node.
	addrs, err := run(2*time.Minute, "srun", "-N4", "--ntasks-per-node=1", "-t", "1", "bash", "-c", `echo "$SLURMD_NODENAME $SLURM_TOPOLOGY_ADDR"`)
	if err != nil {
		t.Fatalf("srun: %v\n%s", err, addrs)
	}
	lines := strings.Split(strings.TrimSpace(addrs), "\n")
	sort.Strings(lines)
	want := []string{"n1 spine01.leaf01.n1", "n2 spine01.leaf01.n2", "n3 spine01.leaf02.n3", "n4 spine01.leaf02.n4"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("SLURM_TOPOLOGY_ADDR per node:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	// No topology complaint in slurmctld's log.
	logText, err := os.ReadFile(c.LogFile("slurmctld.log"))
	if err != nil {
		t.Fatal(err)
	}
	bad := regexp.MustCompile(`(?i)(error|fatal|warning).*(topolog|switch)|(topolog|switch).*(error|fatal|warning)`)
	for _, line := range strings.Split(string(logText), "\n") {
		if bad.MatchString(line) {
			t.Errorf("slurmctld.log: %s", line)
		}
	}
	t.Logf("total (generate, up, checks): %.1fs", time.Since(start).Seconds())
}

// simTree generates the topology.conf of simulated DGX H100 nodes with
// the given names: two scalable units under two spines.
func simTree(t *testing.T, names []string) []byte {
	t.Helper()
	fnodes := make([]sim.FabricNode, len(names))
	for i, n := range names {
		fnodes[i] = sim.FabricNode{Name: n, Profile: "dgx-h100", Index: i}
	}
	c, err := sim.NewCluster("slurm-e2e", &sim.FabricSpec{LeafGroups: 2, Spines: 2, Oversubscription: 1}, fnodes)
	if err != nil {
		t.Fatal(err)
	}
	invs, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build(invs, c.Fabric)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := export.SlurmTree(g)
	if err != nil {
		t.Fatal(err)
	}
	return conf
}

// freePort returns a TCP port free on 127.0.0.1 and on all addresses.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
