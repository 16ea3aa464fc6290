package archtest

import (
	"path"
	"strings"
	"testing"
)

// testHelper reports whether pkg is one of the module's test helpers:
// internal/testkit, internal/fakemaster, or a package whose name ends in
// "test" (internal/kubetest, sysfstest, schematest, agenttest, ...).
func testHelper(pkg string) bool {
	if !under(pkg, module) {
		return false
	}
	base := path.Base(pkg)
	return base == "testkit" || base == "fakemaster" || strings.HasSuffix(base, "test")
}

// Production code does not link the test helpers: only tests (and the
// harnesses under e2e/, whose non-test files serve its tests) import them,
// so a binary never carries a fake master or a tmpfs mounter. go list's
// deps are those of the non-test files; a _test.go file may import any
// helper.
func TestTestHelpersStayInTests(t *testing.T) {
	_, pkgs := listModule(t)
	if _, ok := pkgs[mod("internal/testkit")]; !ok {
		t.Fatal("no internal/testkit: the rule guards nothing (moved? update the rule and docs/ARCHITECTURE.md)")
	}
	for p, info := range pkgs {
		if testHelper(p) || under(p, mod("e2e")) {
			continue
		}
		for _, d := range info.deps {
			if testHelper(d) {
				t.Errorf("%s imports the test helper %s (directly or through another package); only tests may", p, d)
			}
		}
	}
}
