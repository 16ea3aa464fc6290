package archtest

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/gin-topology/gin"

// pkgInfo is what go list says about one package of the module.
type pkgInfo struct {
	imports []string // direct
	deps    []string // transitive
	dir     string
	goFiles []string // non-test
}

// listModule runs go list once over the whole module.
func listModule(t *testing.T) (root string, pkgs map[string]pkgInfo) {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root = filepath.Dir(strings.TrimSpace(string(out)))
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{join .Imports ","}}|{{join .Deps ","}}|{{.Dir}}|{{join .GoFiles ","}}`, "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs = map[string]pkgInfo{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "|")
		if len(f) != 5 {
			t.Fatalf("go list line %q", sc.Text())
		}
		pkgs[f[0]] = pkgInfo{imports: split(f[1]), deps: split(f[2]), dir: f[3], goFiles: split(f[4])}
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; the module has far more", len(pkgs))
	}
	return root, pkgs
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// under reports whether pkg is path or below it (path boundaries, so that
// internal/master does not cover internal/masteraddr).
func under(pkg, path string) bool {
	return pkg == path || strings.HasPrefix(pkg, path+"/")
}

func mod(p string) string { return module + "/" + p }

// The rules of docs/ARCHITECTURE.md, "What must never import what".
func TestLayering(t *testing.T) {
	_, pkgs := listModule(t)
	rules := []struct {
		name   string
		from   string   // the package (and those below it) the rule is about
		never  []string // no transitive dependency on these (or below)
		onlyIn []string // when set: its module dependencies must all be under these
	}{
		{name: "the graph depends only on the API, natsort and devid", from: mod("internal/graph"),
			never:  []string{mod("internal/raft"), mod("internal/discovery"), mod("internal/master"), "github.com/hashicorp/raft"},
			onlyIn: []string{mod("api/gen/gin/v1"), mod("internal/natsort"), mod("internal/devid"), mod("internal/graph")}},
		{name: "device identities are a leaf", from: mod("internal/devid"), onlyIn: []string{mod("internal/devid")}},
		{name: "the plugin never links the master side", from: mod("internal/ncclplugin"),
			never: []string{mod("internal/master"), mod("internal/raft"), mod("internal/discovery"), "github.com/hashicorp/raft",
				mod("internal/graph"), mod("internal/costmodel"), mod("internal/plan"), mod("internal/state")}},
		{name: "the generated API imports nothing of ours", from: mod("api/gen"), onlyIn: []string{mod("api/gen")}},
		{name: "the wire contract is a leaf", from: mod("internal/apierr"), onlyIn: []string{mod("internal/apierr")}},
		{name: "the failover walk needs only the wire contract (followers forward: no hint to parse)", from: mod("internal/redirect"),
			onlyIn: []string{mod("internal/redirect"), mod("internal/apierr")}},
		{name: "the exports translate the graph and discover nothing", from: mod("internal/export"),
			never: []string{mod("internal/master"), mod("internal/raft"), mod("internal/state"), mod("internal/discovery"), "github.com/hashicorp/raft"},
			onlyIn: []string{mod("internal/export"), mod("api/gen/gin/v1"), mod("internal/graph"), mod("internal/devid"), mod("internal/natsort"),
				mod("internal/hostlist"), mod("internal/inventory")}},
		{name: "the agent is a client, not a master", from: mod("internal/agent"),
			never: []string{mod("internal/master"), mod("internal/raft"), mod("internal/state"), "github.com/hashicorp/raft"}},
		{name: "gin-agent is a client, not a master", from: mod("cmd/gin-agent"),
			never: []string{mod("internal/master"), mod("internal/raft"), mod("internal/state"), "github.com/hashicorp/raft"}},
		{name: "ginctl is a client, not a master", from: mod("cmd/ginctl"),
			never: []string{mod("internal/master"), mod("internal/raft"), mod("internal/state"), "github.com/hashicorp/raft"}},
		{name: "the NCCL Inspector reader is a leaf", from: mod("internal/inspector"), onlyIn: []string{mod("internal/inspector")}},
		{name: "discovery knows nothing of agents, masters or Raft", from: mod("internal/discovery"),
			never: []string{mod("internal/agent"), mod("internal/master"), mod("internal/raft"), mod("internal/state"), "github.com/hashicorp/raft"}},
		{name: "the pictures draw from the API and the graph only", from: mod("internal/webui/draw"),
			onlyIn: []string{mod("internal/webui/draw"), mod("api/gen/gin/v1"), mod("internal/graph"), mod("internal/render"),
				mod("internal/natsort"), mod("internal/devid")}},
		{name: "node verdicts are rules over the API alone", from: mod("internal/health"),
			onlyIn: []string{mod("api/gen/gin/v1"), mod("internal/health")}},
		{name: "gin-agent does not link Kubernetes' client", from: mod("cmd/gin-agent"), never: []string{"k8s.io", "sigs.k8s.io"}},
		{name: "ginctl does not link Kubernetes' client", from: mod("cmd/ginctl"), never: []string{"k8s.io", "sigs.k8s.io"}},
		{name: "the master's core does not link Kubernetes' client (leader tasks bring it)", from: mod("internal/master"), never: []string{"k8s.io", "sigs.k8s.io"}},
		{name: "the Node label contract is a leaf", from: mod("internal/nodelabels"), onlyIn: []string{mod("internal/nodelabels")}},
		{name: "the NCCL log reader needs only the API and the verdict rules", from: mod("internal/nccllog"),
			onlyIn: []string{mod("api/gen/gin/v1"), mod("internal/health"), mod("internal/nccllog")}},
		{name: "the replicated state does not know Raft or the master", from: mod("internal/state"),
			never: []string{mod("internal/raft"), mod("internal/master"), "github.com/hashicorp/raft"}},
	}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			matched := 0
			for path, p := range pkgs {
				if !under(path, r.from) {
					continue
				}
				matched++
				for _, d := range p.deps {
					for _, n := range r.never {
						if under(d, n) {
							t.Errorf("%s imports %s (directly or through another package)", path, d)
						}
					}
					if r.onlyIn != nil && under(d, module) {
						ok := false
						for _, a := range r.onlyIn {
							ok = ok || under(d, a)
						}
						if !ok {
							t.Errorf("%s depends on %s; allowed: %v", path, d, r.onlyIn)
						}
					}
				}
			}
			if matched == 0 {
				t.Fatalf("no package under %s: the rule guards nothing (moved? update the rule and docs/ARCHITECTURE.md)", r.from)
			}
		})
	}
}

// Raft is behind one package: only internal/raft imports hashicorp/raft,
// and only the master side imports internal/raft.
func TestRaftStaysBehindOnePackage(t *testing.T) {
	_, pkgs := listModule(t)
	rules := []struct {
		pkg     string
		allowed []string
	}{
		{"github.com/hashicorp/raft", []string{mod("internal/raft")}},
		{mod("internal/raft"), []string{mod("internal/master"), mod("internal/raft"), mod("cmd/gin-master")}},
	}
	for _, r := range rules {
		var importers []string
		for path, p := range pkgs {
			for _, i := range p.imports {
				if i != r.pkg {
					continue
				}
				importers = append(importers, path)
				ok := false
				for _, a := range r.allowed {
					ok = ok || under(path, a)
				}
				if !ok {
					t.Errorf("%s imports %s; only %v may", path, r.pkg, r.allowed)
				}
			}
		}
		if len(importers) == 0 {
			t.Errorf("nothing imports %s: the rule guards nothing", r.pkg)
		}
	}
}

// The wire contract has one home: the leader-hint key is spelled only in
// internal/apierr, and in internal/master only errors.go turns errors into
// gRPC statuses (toStatus), so no handler bypasses the one mapping.
func TestWireContractInOnePlace(t *testing.T) {
	_, pkgs := listModule(t)
	statusCtor := regexp.MustCompile(`\bstatus\.(Error|Errorf|New|Newf)\(`)
	var hintSpelled, ctors []string
	for path, p := range pkgs {
		for _, f := range p.goFiles {
			b, err := os.ReadFile(filepath.Join(p.dir, f))
			if err != nil {
				t.Fatal(err)
			}
			src := string(b)
			if strings.Contains(src, `"gin-leader-hint"`) && path != mod("internal/apierr") {
				hintSpelled = append(hintSpelled, path+"/"+f)
			}
			if path == mod("internal/master") && f != "errors.go" && statusCtor.MatchString(src) {
				ctors = append(ctors, f)
			}
		}
	}
	sort.Strings(hintSpelled)
	sort.Strings(ctors)
	if len(hintSpelled) > 0 {
		t.Errorf("the leader-hint key is spelled outside internal/apierr (use apierr.LeaderHintKey): %v", hintSpelled)
	}
	if len(ctors) > 0 {
		t.Errorf("internal/master builds gRPC statuses outside errors.go (return an error, let toStatus map it): %v", ctors)
	}
}

// One way to reach the leader (issue #25): in internal/master only the
// leader link (leaderlink.go: relays, session reports, forwarded calls)
// and cluster formation (cluster.go: Join, cluster info) dial other
// masters, and the forwarded caller's key is spelled only in
// internal/authz, which honours it.
func TestOneWayToTheLeader(t *testing.T) {
	_, pkgs := listModule(t)
	dials := map[string]bool{"leaderlink.go": true, "cluster.go": true}
	var dialling, spelled []string
	found := false
	for path, p := range pkgs {
		for _, f := range p.goFiles {
			b, err := os.ReadFile(filepath.Join(p.dir, f))
			if err != nil {
				t.Fatal(err)
			}
			src := string(b)
			if path == mod("internal/master") && strings.Contains(src, "grpc.NewClient(") {
				if !dials[f] {
					dialling = append(dialling, f)
				}
				found = found || f == "leaderlink.go"
			}
			if strings.Contains(src, `"gin-forwarded-for"`) && path != mod("internal/authz") {
				spelled = append(spelled, path+"/"+f)
			}
		}
	}
	sort.Strings(dialling)
	sort.Strings(spelled)
	if !found {
		t.Error("internal/master/leaderlink.go dials no leader: the rule guards nothing (moved?)")
	}
	if len(dialling) > 0 {
		t.Errorf("internal/master dials other masters outside leaderlink.go and cluster.go (use the leader link): %v", dialling)
	}
	if len(spelled) > 0 {
		t.Errorf("the forwarded-for key is spelled outside internal/authz (use authz.ForwardedForKey): %v", spelled)
	}
}

// Kubernetes' client is behind one package: only internal/kubelabels
// imports k8s.io/..., so its size and its dependencies stay out of
// everything else (gin-master links it through that package alone).
func TestKubernetesClientBehindOnePackage(t *testing.T) {
	_, pkgs := listModule(t)
	importers := 0
	for path, p := range pkgs {
		for _, i := range p.imports {
			if !under(i, "k8s.io") && !under(i, "sigs.k8s.io") {
				continue
			}
			importers++
			if path != mod("internal/kubelabels") {
				t.Errorf("%s imports %s; only internal/kubelabels may", path, i)
			}
		}
	}
	if importers == 0 {
		t.Error("nothing imports k8s.io: the rule guards nothing")
	}
}

// The exports are engines over one model (issue #25, topograph's shape):
// in internal/export only the model (model.go, tree.go) and the graph's
// entry points (export.go) import internal/graph; each engine renders the
// Topology alone, so no engine walks the graph by itself.
func TestExportEnginesRenderTheModel(t *testing.T) {
	_, pkgs := listModule(t)
	p, ok := pkgs[mod("internal/export")]
	if !ok {
		t.Fatal("no internal/export: the rule guards nothing (moved? update the rule and docs/ARCHITECTURE.md)")
	}
	modelFiles := map[string]bool{"model.go": true, "tree.go": true, "export.go": true}
	engines := map[string]bool{"slurm.go": false, "nccl.go": false, "json.go": false, "dot.go": false}
	fset := token.NewFileSet()
	for _, f := range p.goFiles {
		file, err := parser.ParseFile(fset, filepath.Join(p.dir, f), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := engines[f]; ok {
			engines[f] = true
		}
		for _, imp := range file.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); under(path, mod("internal/graph")) && !modelFiles[f] {
				t.Errorf("internal/export/%s imports %s: engines render the Topology (model.go), they do not read the graph", f, path)
			}
		}
	}
	for f, seen := range engines {
		if !seen {
			t.Errorf("internal/export/%s is gone: the rule guards nothing (moved? update the rule)", f)
		}
	}
}

// The gRPC services of a master are parts of their own (issue #25): a type
// of internal/master named ...Service holds no *Server but what its
// constructor is given.
func TestMasterServicesHoldNoServer(t *testing.T) {
	_, pkgs := listModule(t)
	p, ok := pkgs[mod("internal/master")]
	if !ok {
		t.Fatal("internal/master not found")
	}
	fset := token.NewFileSet()
	services := 0
	holds := map[string]bool{}
	for _, f := range p.goFiles {
		file, err := parser.ParseFile(fset, filepath.Join(p.dir, f), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || !strings.HasSuffix(ts.Name.Name, "Service") {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			services++
			for _, fl := range st.Fields.List {
				if star, ok := fl.Type.(*ast.StarExpr); ok {
					if id, ok := star.X.(*ast.Ident); ok && id.Name == "Server" {
						holds[ts.Name.Name] = true
					}
				}
			}
			return true
		})
	}
	if services < 6 {
		t.Fatalf("found %d service types in internal/master; the rule guards nothing (renamed?)", services)
	}
	for name := range holds {
		t.Errorf("internal/master.%s holds *Server: give it what it needs in its constructor (parts.go)", name)
	}
}
