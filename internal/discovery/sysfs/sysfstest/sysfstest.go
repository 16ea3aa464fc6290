// Package sysfstest materialises fake sysfs trees for tests: a text archive
// in txtar style ("-- path --" a file, "-- path/ --" an empty directory,
// "-- path -> target --" a relative symlink) written into a temporary
// directory, so fixtures keep the kernel's exact layout, symlinks included,
// while living in git as text. internal/discovery/sysfs/testdata/node.txtar
// is a whole GPU node.
package sysfstest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Materialize writes the archives, in order (later entries overwrite
// earlier ones), into a new temporary directory and returns it.
func Materialize(t testing.TB, archives ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, a := range archives {
		WriteArchive(t, root, a)
	}
	return root
}

// WriteArchive writes one archive over an existing root (an overlay).
func WriteArchive(t testing.TB, root, archive string) {
	t.Helper()
	type rec struct {
		name string
		body strings.Builder
	}
	var recs []*rec
	for line := range strings.Lines(archive) {
		l := strings.TrimSuffix(line, "\n")
		if strings.HasPrefix(l, "-- ") && strings.HasSuffix(l, " --") && len(l) > 6 {
			recs = append(recs, &rec{name: l[3 : len(l)-3]})
			continue
		}
		if len(recs) > 0 {
			recs[len(recs)-1].body.WriteString(line)
		}
	}
	for _, r := range recs {
		name, target, isLink := strings.Cut(r.name, " -> ")
		if filepath.IsAbs(name) || strings.Contains(name, "..") {
			t.Fatalf("archive entry %q escapes the root", name)
		}
		p := filepath.Join(root, filepath.FromSlash(name))
		switch {
		case isLink:
			mkdirAll(t, filepath.Dir(p))
			_ = os.RemoveAll(p)
			if err := os.Symlink(filepath.FromSlash(target), p); err != nil {
				t.Fatal(err)
			}
		case strings.HasSuffix(name, "/"):
			mkdirAll(t, p)
		default:
			mkdirAll(t, filepath.Dir(p))
			if err := os.WriteFile(p, []byte(r.body.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func mkdirAll(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}
