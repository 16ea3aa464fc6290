package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/hostlist"
	"github.com/gin-topology/gin/internal/kubetest"
	"github.com/gin-topology/gin/internal/nodelabels"
	"github.com/gin-topology/gin/internal/testkit"
)

var updateGolden = flag.Bool("update", false, "rewrite e2e/testdata golden files")

// kubeAPI starts a real kube-apiserver (internal/kubetest), or skips when
// its binaries are missing (fails under CI=true).
func kubeAPI(t *testing.T, users ...kubetest.User) *kubetest.Server {
	t.Helper()
	bin, err := kubetest.Find()
	if err != nil {
		ciSkipf(t, "%v", err)
	}
	return kubetest.Start(t, bin, users...)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

func mustKubectl(t *testing.T, s *kubetest.Server, user string, stdin []byte, args ...string) string {
	t.Helper()
	out, err := s.Kubectl(t, user, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The shipped manifests: the kustomize output is the reviewed one (golden),
// a real API server accepts every object (server-side dry-run, then for
// real), the TLS script fills the Secrets from ginctl tls init, and GIN's
// ClusterRole can do what --kube-labels needs and nothing more.
func TestKubernetesManifests(t *testing.T) {
	s := kubeAPI(t, kubetest.User{Token: "gin-token", Name: "gin-labeller"})
	root := repoRoot(t)
	dir := filepath.Join(root, "deploy", "kubernetes")

	out := mustKubectl(t, s, "admin", nil, "kustomize", dir)
	golden := filepath.Join("testdata", "kubernetes-kustomize.golden.yaml")
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./e2e -run TestKubernetesManifests -update)", err)
	}
	if string(want) != out {
		t.Errorf("kubectl kustomize deploy/kubernetes differs from %s: review the change and rerun with -update\n%s", golden, out)
	}

	// A server-side dry run checks namespaced objects against an existing
	// namespace: the namespace first, for real.
	mustKubectl(t, s, "admin", nil, "apply", "-f", filepath.Join(dir, "namespace.yaml"))
	if got := mustKubectl(t, s, "admin", nil, "apply", "--dry-run=server", "-k", dir); !strings.Contains(got, "statefulset.apps/gin-master created (server dry run)") {
		t.Fatalf("server-side dry run:\n%s", got)
	}
	mustKubectl(t, s, "admin", nil, "apply", "-k", dir)
	for _, obj := range []string{"namespace/gin", "statefulset/gin-master", "daemonset/gin-agent", "poddisruptionbudget/gin-master",
		"service/gin-master", "service/gin", "serviceaccount/gin-master", "serviceaccount/gin-agent",
		"clusterrole/gin-node-labeller", "clusterrolebinding/gin-node-labeller"} {
		mustKubectl(t, s, "admin", nil, "-n", "gin", "get", obj, "-o", "name")
	}
	sts := mustKubectl(t, s, "admin", nil, "-n", "gin", "get", "statefulset/gin-master", "-o", "jsonpath={.spec.replicas} {.spec.serviceName} {.spec.podManagementPolicy}")
	if sts != "3 gin-master Parallel" {
		t.Errorf("statefulset: %q", sts)
	}
	if pdb := mustKubectl(t, s, "admin", nil, "-n", "gin", "get", "pdb/gin-master", "-o", "jsonpath={.spec.minAvailable}"); pdb != "2" {
		t.Errorf("PodDisruptionBudget minAvailable %q, want 2 (a quorum of 3)", pdb)
	}

	// The example Job and the Secrets.
	mustKubectl(t, s, "admin", nil, "apply", "--dry-run=server", "-f", filepath.Join(dir, "examples", "nccl-job.yaml"))
	bin := binaries(t)
	certs := t.TempDir()
	cmd := exec.Command("bash", filepath.Join(dir, "tls-secrets.sh"), certs, "gpu-a", "gpu-b")
	cmd.Env = append(os.Environ(), "GINCTL="+filepath.Join(bin, "ginctl"), "KUBECTL="+s.KubectlPath(), "KUBECONFIG="+s.Kubeconfig(t, "admin"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tls-secrets.sh: %v\n%s", err, out)
	}
	keys := func(secret string) []string {
		var data map[string]string
		if err := json.Unmarshal([]byte(mustKubectl(t, s, "admin", nil, "-n", "gin", "get", "secret", secret, "-o", "jsonpath={.data}")), &data); err != nil {
			t.Fatal(err)
		}
		var ks []string
		for k := range data {
			ks = append(ks, k)
		}
		return sortedStrings(ks)
	}
	if got := strings.Join(keys("gin-master-tls"), " "); got != "ca.pem master-gin-master-0-key.pem master-gin-master-0.pem master-gin-master-1-key.pem master-gin-master-1.pem master-gin-master-2-key.pem master-gin-master-2.pem" {
		t.Errorf("gin-master-tls keys: %s", got)
	}
	if got := strings.Join(keys("gin-agent-tls"), " "); got != "agent-gpu-a-key.pem agent-gpu-a.pem agent-gpu-b-key.pem agent-gpu-b.pem ca.pem" {
		t.Errorf("gin-agent-tls keys: %s", got)
	}

	// GIN's identity: a static-token user bound to the shipped ClusterRole.
	mustKubectl(t, s, "admin", nil, "create", "clusterrolebinding", "gin-test", "--clusterrole", "gin-node-labeller", "--user", "gin-labeller")
	for _, c := range []struct {
		verb, res string
		want      bool
	}{
		{"patch", "nodes", true}, {"list", "nodes", true}, {"watch", "nodes", true},
		{"create", "nodes", false}, {"delete", "nodes", false}, {"get", "secrets", false}, {"list", "secrets", false},
		{"list", "pods", false}, {"update", "clusterroles", false},
	} {
		got, _ := s.Kubectl(t, "gin-labeller", nil, "auth", "can-i", c.verb, c.res, "-A")
		if (strings.TrimSpace(got) == "yes") != c.want {
			t.Errorf("gin-labeller can-i %s %s: %q, want %v", c.verb, c.res, strings.TrimSpace(got), c.want)
		}
	}
	if _, err := s.Kubectl(t, "gin-labeller", nil, "-n", "gin", "get", "secret", "gin-master-tls"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("gin-labeller read a Secret: %v", err)
	}
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// nodeObj is what the test reads of a Node.
type nodeObj struct {
	Metadata struct {
		Name            string            `json:"name"`
		ResourceVersion string            `json:"resourceVersion"`
		Labels          map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Taints []struct{ Key, Value, Effect string } `json:"taints"`
	} `json:"spec"`
}

func getNodes(t *testing.T, s *kubetest.Server) map[string]nodeObj {
	t.Helper()
	out, err := s.Kubectl(t, "admin", nil, "get", "nodes", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Items []nodeObj }
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	m := map[string]nodeObj{}
	for _, n := range list.Items {
		m[n.Metadata.Name] = n
	}
	return m
}

// metric reads one sample of the master's /metrics (0 when absent).
func metric(t *testing.T, addr, sample string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

var switchLine = regexp.MustCompile(`(?m)^SwitchName=(\S+) Nodes=(\S+)$`)

// The leader keeps GIN's labels on the API server's Nodes: they appear as
// the Slurm export groups the nodes, a fabric import that moves a node
// patches that node alone, a node GIN marks down fails (and is tainted),
// GIN's identity cannot read Secrets, the labels converge after the API
// server restarts, and a restarted master patches nothing that is right.
func TestKubeLabels(t *testing.T) {
	s := kubeAPI(t, kubetest.User{Token: "gin-token", Name: "gin-labeller"})
	root := repoRoot(t)
	mustKubectl(t, s, "admin", nil, "apply", "-k", filepath.Join(root, "deploy", "kubernetes"))
	mustKubectl(t, s, "admin", nil, "create", "clusterrolebinding", "gin-test", "--clusterrole", "gin-node-labeller", "--user", "gin-labeller")
	names := []string{"node001", "node002", "node003", "node004", "node005", "node006"}
	var objs strings.Builder
	for _, n := range append(append([]string(nil), names...), "gpu-x", "cpu01") {
		labels := `{"kubernetes.io/hostname": "` + n + `"}`
		switch n {
		case "node001":
			labels = `{"team": "ml"}` // someone else's label: kept
		case "node002":
			labels = `{"gin.topology/leaf": "stale"}` // set by hand: GIN takes it over
		}
		fmt.Fprintf(&objs, "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n  labels: %s\n", n, labels)
	}
	mustKubectl(t, s, "admin", []byte(objs.String()), "create", "-f", "-")
	cpuRV := getNodes(t, s)["cpu01"].Metadata.ResourceVersion

	bin := binaries(t)
	dataDir := t.TempDir()
	httpAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	fabricSpec := "leaf-groups=2,spines=2,oversub=1"
	masterArgs := []string{"--dev-agents", "6", "--dev-fabric", fabricSpec, "--heartbeat-interval", "1s", "--http-bind", httpAddr,
		"--kube-labels", "--kubeconfig", s.Kubeconfig(t, "gin-labeller"), "--kube-taint-fail", "--kube-topograph-labels"}
	addr, mcmd, mlog := startDevAt(t, bin, dataDir, masterArgs...)

	// Labels appear, grouped as the Slurm export groups the nodes.
	conf, err := runTool(t, bin, "ginctl", "--master", addr, "export", "slurm")
	if err != nil {
		t.Fatalf("export slurm: %v\n%s", err, conf)
	}
	leafOf := map[string]string{}
	for _, m := range switchLine.FindAllStringSubmatch(conf, -1) {
		ns, err := hostlist.Expand(m[2])
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ns {
			leafOf[n] = m[1]
		}
	}
	labelled := func(want map[string]string) func() (bool, string) {
		return func() (bool, string) {
			nodes := getNodes(t, s)
			for n, leaf := range want {
				if got := nodes[n].Metadata.Labels[nodelabels.KeyLeaf]; got != leaf {
					return false, fmt.Sprintf("%s: leaf %q, want %q (labels %v)", n, got, leaf, nodes[n].Metadata.Labels)
				}
			}
			return true, ""
		}
	}
	waitKube(t, 90*time.Second, "labels on every GIN node", mlog, labelled(leafOf))
	verdicts := checkVerdicts(t, bin, addr)
	nodes := getNodes(t, s)
	for _, n := range names {
		l := nodes[n].Metadata.Labels
		if l[nodelabels.KeySpine] == "" || l[nodelabels.KeyHealth] != verdicts[n] || verdicts[n] == "" || l[nodelabels.TopographTier0] != l[nodelabels.KeyLeaf] || l[nodelabels.TopographTier1] != l[nodelabels.KeySpine] {
			t.Errorf("%s: labels %v", n, l)
		}
	}
	if nodes["node001"].Metadata.Labels["team"] != "ml" {
		t.Errorf("node001 lost someone else's label: %v", nodes["node001"].Metadata.Labels)
	}
	if len(leafOf) != 6 || leafOf["node001"] == leafOf["node006"] {
		t.Fatalf("the fabric should put node001 and node006 under different leaves: %v", leafOf)
	}

	// Kueue's own CRDs (from its Go module) accept the Topology ginctl
	// writes, and a ResourceFlavor that uses it; its levels are keys the
	// nodes carry.
	crds := kueueCRDs(t)
	for _, f := range []string{"kueue.x-k8s.io_topologies.yaml", "kueue.x-k8s.io_resourceflavors.yaml"} {
		mustKubectl(t, s, "admin", nil, "apply", "--server-side", "-f", filepath.Join(crds, f))
	}
	mustKubectl(t, s, "admin", nil, "wait", "--for", "condition=established", "--timeout", "60s", "crd/topologies.kueue.x-k8s.io", "crd/resourceflavors.kueue.x-k8s.io")
	topo, err := runTool(t, bin, "ginctl", "--master", addr, "export", "kueue")
	if err != nil {
		t.Fatalf("export kueue: %v\n%s", err, topo)
	}
	mustKubectl(t, s, "admin", []byte(topo), "create", "-f", "-")
	mustKubectl(t, s, "admin", []byte("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: gpu}\nspec:\n  nodeLabels: {nvidia.com/gpu.present: \"true\"}\n  topologyName: gin\n"), "create", "-f", "-")
	levels := strings.Fields(mustKubectl(t, s, "admin", nil, "get", "topology.kueue.x-k8s.io/gin", "-o", "jsonpath={.spec.levels[*].nodeLabel}"))
	if strings.Join(levels, " ") != nodelabels.KeySpine+" "+nodelabels.KeyLeaf+" "+nodelabels.HostnameKey {
		t.Errorf("Kueue Topology levels %v", levels)
	}
	for _, n := range names {
		for _, k := range levels {
			if k != nodelabels.HostnameKey && nodes[n].Metadata.Labels[k] == "" {
				t.Errorf("%s lacks the Topology level %s", n, k)
			}
		}
	}

	// A real agent that dies: its node is marked down, fails, and is tainted.
	agent := exec.Command(filepath.Join(bin, "gin-agent"), "--source", "sim:dgx-h100", "--node-name", "gpu-x", "--master", addr,
		"--heartbeat-interval", "1s", "--plan-socket", "", "--metrics-bind", "")
	agent.Stderr = &lockedBuffer{}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Process.Kill(); _ = agent.Wait() })
	health := func(node, want string, tainted bool) func() (bool, string) {
		return func() (bool, string) {
			n := getNodes(t, s)[node]
			taint := false
			for _, tt := range n.Spec.Taints {
				taint = taint || tt.Key == nodelabels.TaintKey && tt.Value == nodelabels.TaintValue && tt.Effect == nodelabels.TaintEffect
			}
			got := n.Metadata.Labels[nodelabels.KeyHealth]
			return got == want && taint == tainted, fmt.Sprintf("%s: health %q tainted %v", node, got, taint)
		}
	}
	waitKube(t, 60*time.Second, "gpu-x labelled", mlog, func() (bool, string) {
		v := checkVerdicts(t, bin, addr)["gpu-x"]
		ok, why := health("gpu-x", v, v == "fail")()
		return ok && v != "", why + " (ginctl check: " + v + ")"
	})
	if v := checkVerdicts(t, bin, addr)["gpu-x"]; v == "fail" {
		t.Fatalf("gpu-x fails before its agent is killed: the next step would prove nothing")
	}
	_ = agent.Process.Signal(syscall.SIGKILL)
	waitKube(t, 60*time.Second, "gpu-x fails and is tainted", mlog, health("gpu-x", "fail", true))

	// A fabric import moves node006 under node001's leaf: node006's labels
	// change, and nothing else is patched.
	before := getNodes(t, s)
	patches := metric(t, httpAddr, `gin_master_kube_node_patches_total{result="ok",what="labels"}`)
	moved := movedFabric(t, names, fabricSpec, "node006", "node001")
	importFabric(t, addr, moved)
	newLeaf := map[string]string{"node006": leafOf["node001"]}
	waitKube(t, 60*time.Second, "node006 relabelled", mlog, labelled(newLeaf))
	after := getNodes(t, s)
	for n, o := range before {
		if n != "node006" && after[n].Metadata.ResourceVersion != o.Metadata.ResourceVersion {
			t.Errorf("%s was changed by the import that moved node006 (resourceVersion %s -> %s)", n, o.Metadata.ResourceVersion, after[n].Metadata.ResourceVersion)
		}
	}
	if d := metric(t, httpAddr, `gin_master_kube_node_patches_total{result="ok",what="labels"}`) - patches; d != 1 {
		t.Errorf("%v label patches for one moved node, want 1", d)
	}

	// The API server goes away; meanwhile node006 moves back. Once it is
	// back the labels converge, patching node006 alone.
	patches = metric(t, httpAddr, `gin_master_kube_node_patches_total{result="ok",what="labels"}`)
	s.StopAPI()
	importFabric(t, addr, nil)
	s.StartAPI(t)
	waitKube(t, 120*time.Second, "node006 back under its leaf after the API server restart", mlog, labelled(leafOf))
	if d := metric(t, httpAddr, `gin_master_kube_node_patches_total{result="ok",what="labels"}`) - patches; d != 1 {
		t.Errorf("%v label patches after the API server restart, want 1 (node006)", d)
	}

	// A new master (a leader change) on the same state resumes: nothing is
	// patched, since every Node already carries what it computes.
	_ = mcmd.Process.Signal(syscall.SIGTERM)
	_ = mcmd.Wait()
	_, _, mlog = startDevAt(t, bin, dataDir, masterArgs...)
	waitKube(t, 90*time.Second, "the new master's first comparison", mlog, func() (bool, string) {
		r, n := metric(t, httpAddr, "gin_master_kube_reconciles_total"), metric(t, httpAddr, "gin_master_kube_gin_nodes")
		return r >= 1 && n == 7, fmt.Sprintf("comparisons %v, GIN nodes %v", r, n)
	})
	if p := metric(t, httpAddr, `gin_master_kube_node_patches_total{result="ok",what="labels"}`); p != 0 {
		t.Errorf("the new master patched %v nodes whose labels were right", p)
	}
	if got := getNodes(t, s)["cpu01"]; got.Metadata.ResourceVersion != cpuRV {
		t.Errorf("cpu01 (no GIN node) was changed: %v", got.Metadata.Labels)
	}
}

// kueueVersion is the Kueue release whose CRDs the test installs.
const kueueVersion = "v0.17.0"

// kueueCRDs downloads Kueue's module (the Go module proxy) and returns its
// CRD directory.
func kueueCRDs(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "sigs.k8s.io/kueue@"+kueueVersion)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	out, err := cmd.Output()
	if err != nil {
		ciSkipf(t, "Kueue's module %s not downloadable: %v", kueueVersion, err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download sigs.k8s.io/kueue: %v\n%s", err, out)
	}
	return filepath.Join(m.Dir, "config", "components", "crd", "bases")
}

// checkVerdicts is `ginctl check -o json`: each node's verdict word.
func checkVerdicts(t *testing.T, bin, addr string) map[string]string {
	t.Helper()
	out, err := runTool(t, bin, "ginctl", "--master", addr, "check", "--exit-zero", "-o", "json")
	if err != nil && !strings.HasPrefix(strings.TrimSpace(out), "{") {
		t.Fatalf("ginctl check: %v\n%s", err, out)
	}
	var resp struct {
		Nodes []struct{ Node, Verdict string }
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("ginctl check -o json: %v\n%s", err, out)
	}
	m := map[string]string{}
	for _, n := range resp.Nodes {
		m[n.Node] = n.Verdict
	}
	return m
}

// startDevAt is startDev with a given data dir (kept across restarts).
func startDevAt(t *testing.T, bin, dataDir string, args ...string) (string, *exec.Cmd, *lockedBuffer) {
	t.Helper()
	// startDev appends its own --data-dir first; the later one wins.
	return startDev(t, bin, append([]string{"--data-dir", dataDir}, args...)...)
}

// movedFabric is the dev cluster's simulated fabric with node's links
// moved to the switches of like's links (nil node: unchanged).
func movedFabric(t *testing.T, names []string, spec, node, like string) *ginv1.FabricTopology {
	t.Helper()
	fs, err := sim.ParseFabricSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	fnodes := make([]sim.FabricNode, len(names))
	for i, n := range names {
		fnodes[i] = sim.FabricNode{Name: n, Profile: "dgx-h100", Index: i}
	}
	c, err := sim.NewCluster("dev", &fs, fnodes)
	if err != nil {
		t.Fatal(err)
	}
	f := proto.Clone(c.Fabric).(*ginv1.FabricTopology)
	if node == "" {
		return f
	}
	hcaEnd := func(l *ginv1.FabricLink) (hca, sw *ginv1.FabricEndpoint) {
		if l.GetA().GetKind() == ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_HCA {
			return l.GetA(), l.GetB()
		}
		return l.GetB(), l.GetA()
	}
	target := map[string]string{}
	for _, l := range f.GetLinks() {
		if h, sw := hcaEnd(l); h.GetNodeName() == like {
			target[h.GetHca()] = sw.GetGuid()
		}
	}
	moved := 0
	for i, l := range f.GetLinks() {
		h, sw := hcaEnd(l)
		if h.GetNodeName() != node || h.GetKind() != ginv1.FabricEndpointKind_FABRIC_ENDPOINT_KIND_HCA {
			continue
		}
		g, ok := target[h.GetHca()]
		if !ok {
			t.Fatalf("%s has no link from %s", like, h.GetHca())
		}
		sw.Guid, sw.Port = g, uint32(200+i%50)
		moved++
	}
	if moved == 0 {
		t.Fatalf("no fabric link of %s", node)
	}
	return f
}

// importFabric imports f (nil: the dev cluster's own fabric) into the dev
// master at addr.
func importFabric(t *testing.T, addr string, f *ginv1.FabricTopology) {
	t.Helper()
	if f == nil {
		f = movedFabric(t, []string{"node001", "node002", "node003", "node004", "node005", "node006"}, "leaf-groups=2,spines=2,oversub=1", "", "")
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := ginv1.NewAdminServiceClient(conn).ImportFabric(ctx, &ginv1.ImportFabricRequest{Fabric: f}); err != nil {
		t.Fatalf("import fabric: %v", err)
	}
}

// waitKube polls cond until it holds, failing with its last word and the
// master's log after timeout.
func waitKube(t *testing.T, timeout time.Duration, what string, log *lockedBuffer, cond func() (bool, string)) {
	t.Helper()
	last := ""
	testkit.WaitFor(t, timeout, what, func() bool {
		ok, why := cond()
		last = why
		return ok
	}, func() string { return last + "\nmaster log:\n" + log.String() })
}
