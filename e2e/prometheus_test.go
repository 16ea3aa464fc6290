package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// promDir is where the shipped Prometheus files live.
const promDir = "../deploy/prometheus"

// needTool returns the path of a Debian tool a test needs: skipped when it
// is missing, failed when REQUIRE_PROMETHEUS=1 (CI installs Debian's
// prometheus package and sets it) or CI=true.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("REQUIRE_PROMETHEUS") == "1" {
		t.Fatalf("%s is required (REQUIRE_PROMETHEUS=1): apt-get install %s", name, pkg)
	}
	ciSkipf(t, "%s not installed (apt-get install %s)", name, pkg)
	return ""
}

// TestPrometheusRulesAndConfig: the shipped rules pass `promtool check
// rules` (lint fatal) and their unit tests (`promtool test rules`: every
// alert fires on its fault after its for:, and not before or without it),
// and the shipped prometheus.yml is valid with them.
func TestPrometheusRulesAndConfig(t *testing.T) {
	promtool := needTool(t, "promtool", "prometheus")
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %v: %v\n%s", args, err, out)
		}
		t.Logf("promtool %v:\n%s", args, out)
	}
	run(promDir, "check", "rules", "--lint-fatal", "gin-rules.yml")
	run(promDir, "test", "rules", "gin-rules.test.yml")

	// prometheus.yml reads gin/*.json next to it, as installed.
	dir := t.TempDir()
	for _, f := range []string{"prometheus.yml", "gin-rules.yml"} {
		b, err := os.ReadFile(filepath.Join(promDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(dir, "check", "config", "--lint-fatal", "prometheus.yml")
}
