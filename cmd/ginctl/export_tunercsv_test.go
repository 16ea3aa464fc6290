package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestExportTunerCSV pins a plan on an in-process dev cluster and exports
// it as the example NCCL tuner's config: to stdout and, with --out, to a
// file replaced atomically (same bytes, no temp file left), every line a
// comment or a 10-field row of the job's shape; and the usage errors.
func TestExportTunerCSV(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dev cluster")
	}
	cl := startDev(t)
	addr := cl.Master.Addr()
	ctx := context.Background()
	if r := ctl(ctx, addr, "", "plan", "--job", "42", "--nodes", "node[001-002]"); r.code != 0 {
		t.Fatalf("plan: exit %d: %s", r.code, r.stderr)
	}
	r := ctl(ctx, addr, "", "export", "nccl-tuner-csv", "--job", "42")
	if r.code != 0 {
		t.Fatalf("export: exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"# NCCL example tuner config", "# written by ginctl ", "# job 42, plan hash ", "nodes: node001,node002", "# collective_type,min_bytes,max_bytes,"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in\n%s", want, r.stdout)
		}
	}
	rows := 0
	for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		if len(l) > 255 {
			t.Errorf("%d-byte line: %q", len(l), l)
		}
		if strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.Split(l, ",")
		if len(f) != 10 || f[8] != "-1" || f[9] != "-1" {
			t.Errorf("not a row: %q", l)
			continue
		}
		// The plan's shapes on 2 nodes × 8 GPUs: 16/2, 8/1, 2/2 (never -1).
		if sh := f[6] + "/" + f[7]; sh != "2/16" && sh != "1/8" && sh != "2/2" {
			t.Errorf("row for %s nodes/ranks: %q", sh, l)
		}
		rows++
	}
	// A dev cluster without calibration pins a plan that leaves every
	// rule to NCCL: no rows, but a comment for every rule.
	m := regexp.MustCompile(`, (\d+) rules\n`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no rule count in\n%s", r.stdout)
	}
	n, _ := strconv.Atoi(m[1])
	for i := range n {
		if !strings.Contains(r.stdout, "\n# rule "+strconv.Itoa(i)+": ") {
			t.Errorf("no comment for rule %d", i)
		}
	}
	t.Logf("%d rules, %d rows", n, rows)

	dir := t.TempDir()
	out := filepath.Join(dir, "nccl_tuner.conf")
	if err := os.WriteFile(out, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if w := ctl(ctx, addr, "", "export", "nccl-tuner-csv", "--job", "42", "--out", out); w.code != 0 || w.stdout != "" {
		t.Fatalf("export --out: exit %d, stdout %q: %s", w.code, w.stdout, w.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != r.stdout {
		t.Errorf("--out wrote\n%s\nstdout was\n%s", b, r.stdout)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("--out file: %v, %v", fi.Mode(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("left in the directory: %v", ents)
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"export", "nccl-tuner-csv"}, exitUsage, "needs --job"},
		{[]string{"export", "nccl-tuner-csv", "--job", "nope"}, exitErr, `job "nope" has no plan`},
		{[]string{"export", "nccl-tuner-csv", "--job", "42", "-o", "json"}, exitUsage, "does not apply to export"},
		{[]string{"export", "nccl-tuner-csv", "--job", "42", "--out", filepath.Join(dir, "missing", "x.conf")}, exitErr, "--out"},
		{[]string{"export", "nope"}, exitUsage, "prometheus-sd, kueue or nccl-tuner-csv"},
	} {
		e := ctl(ctx, addr, "", c.args...)
		if e.code != c.code || !strings.Contains(e.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, e.code, e.stderr, c.code, c.want)
		}
	}
}
