package faulttest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// testNet is a private L2 segment: a bridge inside its own "switch"
// namespace, one namespace per master plugged into it by a veth pair, and
// one veth from the root namespace (agents and the workload) into it. The
// bridge lives in a namespace of its own so that the host's firewall
// (e.g. Docker's FORWARD DROP with bridge-nf-call-iptables=1) never sees
// the traffic, and nothing on the host is routed through it: the /24 is
// only reachable from the root-side veth.
type testNet struct {
	t      *testing.T
	suffix string
	sw     string   // switch namespace
	ns     []string // master namespaces
	host   string   // root-namespace veth
	prefix string   // "10.213.X."
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func ipOut(args ...string) string {
	out, _ := exec.Command("ip", args...).CombinedOutput()
	return string(out)
}

// requireNetns skips unless the test may create network namespaces. With
// GIN_FAULT_REQUIRE=1 (CI) a missing prerequisite fails the test instead.
func requireNetns(t *testing.T) {
	t.Helper()
	if os.Getenv("GIN_FAULT_TESTS") != "1" {
		t.Skip("fault-injection campaign runs from `make test` as root or `make fault-test` (GIN_FAULT_TESTS=1); needs root, ip netns and nft")
	}
	missing := func(why string) {
		t.Helper()
		if os.Getenv("GIN_FAULT_REQUIRE") == "1" {
			t.Fatal("fault-injection campaign is required (GIN_FAULT_REQUIRE=1) but " + why)
		}
		t.Skip("fault-injection campaign skipped: " + why)
	}
	if os.Geteuid() != 0 {
		missing("it needs root (network namespaces, veth, bridge)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		missing("it needs iproute2's ip (not found in PATH)")
	}
	if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil {
		missing(fmt.Sprintf("ip netns is unavailable: %v: %s", err, out))
	}
	if _, err := exec.LookPath("nft"); err != nil {
		missing("it needs nftables' nft for one-way and lossy links (apt-get install nftables)")
	}
}

func randHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// newTestNet builds the segment for n masters; t.Cleanup removes it, even
// when the test fails half-way through building it.
func newTestNet(t *testing.T, n int) *testNet {
	t.Helper()
	tn := &testNet{t: t, suffix: randHex(5)}
	tn.sw = "gin-ft-" + tn.suffix + "-sw"
	tn.host = "gft" + tn.suffix // 8 bytes, under IFNAMSIZ
	for i := 1; i <= n; i++ {
		tn.ns = append(tn.ns, fmt.Sprintf("gin-ft-%s-%d", tn.suffix, i))
	}
	// A /24 that nothing on this host uses.
	used := ipOut("-4", "-o", "addr") + ipOut("-4", "route", "show", "table", "all")
	for {
		b := make([]byte, 1)
		_, _ = rand.Read(b)
		o := int(b[0])
		if o == 0 || o == 255 {
			continue
		}
		p := fmt.Sprintf("10.213.%d.", o)
		if !strings.Contains(used, p) {
			tn.prefix = p
			break
		}
	}
	t.Cleanup(tn.destroy)
	must := func(args ...string) {
		t.Helper()
		if err := ipCmd(args...); err != nil {
			msg := fmt.Sprintf("cannot build the test network (needs CAP_NET_ADMIN and netns/veth/bridge support): %v", err)
			if os.Getenv("GIN_FAULT_REQUIRE") == "1" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	must("netns", "add", tn.sw)
	for _, ns := range tn.ns {
		must("netns", "add", ns)
	}
	must("-n", tn.sw, "link", "set", "lo", "up")
	must("-n", tn.sw, "link", "add", "br0", "type", "bridge", "stp_state", "0")
	must("-n", tn.sw, "link", "set", "br0", "up")
	for i, ns := range tn.ns {
		port := fmt.Sprintf("p%d", i+1)
		must("-n", ns, "link", "set", "lo", "up")
		must("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", tn.sw)
		must("-n", ns, "addr", "add", tn.IP(i)+"/24", "dev", "eth0")
		must("-n", ns, "link", "set", "eth0", "up")
		must("-n", tn.sw, "link", "set", port, "master", "br0")
		must("-n", tn.sw, "link", "set", port, "up")
	}
	must("link", "add", tn.host, "type", "veth", "peer", "name", "p0", "netns", tn.sw)
	must("-n", tn.sw, "link", "set", "p0", "master", "br0")
	must("-n", tn.sw, "link", "set", "p0", "up")
	must("addr", "add", tn.prefix+"254/24", "dev", tn.host)
	must("link", "set", tn.host, "up")
	return tn
}

// IP is master i's address (0-based).
func (tn *testNet) IP(i int) string { return fmt.Sprintf("%s%d", tn.prefix, i+1) }

// Isolate cuts master i off the segment (from the other masters, the agents
// and the clients alike); Heal plugs it back.
func (tn *testNet) Isolate(i int) error {
	return ipCmd("-n", tn.sw, "link", "set", fmt.Sprintf("p%d", i+1), "down")
}

func (tn *testNet) Heal(i int) error {
	return ipCmd("-n", tn.sw, "link", "set", fmt.Sprintf("p%d", i+1), "up")
}

// filterTable is the nftables table the fault filters live in; it exists
// only inside a master's namespace, never on the host.
const filterTable = "ginft"

// nft loads an nftables script into master i's namespace.
func (tn *testNet) nft(i int, script string) error {
	cmd := exec.Command("ip", "netns", "exec", tn.ns[i], "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %v: %s", tn.ns[i], err, strings.TrimSpace(string(out)))
	}
	return nil
}

// DropFrom makes master i deaf to the given masters while it can still send
// to them (a one-way partition: its packets leave, theirs are dropped on
// arrival, so TCP connections between them stall instead of resetting).
// Agents and clients still reach it.
func (tn *testNet) DropFrom(i int, from []int) error {
	var ips []string
	for _, j := range from {
		ips = append(ips, tn.IP(j))
	}
	return tn.nft(i, fmt.Sprintf("table inet %s {\n chain input {\n  type filter hook input priority 0; policy accept;\n  ip saddr { %s } drop\n }\n}\n",
		filterTable, strings.Join(ips, ", ")))
}

// Lossy drops pct percent of the packets master i receives, at random.
func (tn *testNet) Lossy(i, pct int) error {
	return tn.nft(i, fmt.Sprintf("table inet %s {\n chain input {\n  type filter hook input priority 0; policy accept;\n  iifname \"eth0\" numgen random mod 100 < %d drop\n }\n}\n",
		filterTable, pct))
}

// ClearFilters removes master i's DropFrom/Lossy rules.
func (tn *testNet) ClearFilters(i int) error {
	return tn.nft(i, fmt.Sprintf("table inet %s {}\ndelete table inet %s\n", filterTable, filterTable))
}

func (tn *testNet) destroy() {
	// Deleting the namespaces deletes the veths in them and so their peers.
	for _, ns := range append([]string{tn.sw}, tn.ns...) {
		if err := ipCmd("netns", "del", ns); err != nil && !strings.Contains(err.Error(), "No such file") {
			tn.t.Logf("cleanup: %v", err)
		}
	}
	if strings.Contains(ipOut("link", "show", tn.host), tn.host+"@") {
		_ = ipCmd("link", "del", tn.host)
	}
}
