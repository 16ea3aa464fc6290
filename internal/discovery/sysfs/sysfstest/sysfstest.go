// Package sysfstest materialises fake sysfs trees for tests: a text archive
// in txtar style ("-- path --" a file, "-- path/ --" an empty directory,
// "-- path -> target --" a relative symlink) written into a temporary
// directory, so fixtures keep the kernel's exact layout, symlinks included,
// while living in git as text. internal/discovery/sysfs/testdata/node.txtar
// is a whole GPU node.
//
// A binary file (a PCI config space) is written "-- path (hex) --" with a
// body in `lspci -xxxx` form: lines "<hex offset>: <hex bytes>"; offsets not
// listed are zero and the file is as long as the highest line rounds up to
// (256 bytes for the legacy space, 4096 for PCI Express), as the kernel's
// config file is.
package sysfstest

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
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
		name, isHex := strings.CutSuffix(name, " (hex)")
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
		case isHex:
			mkdirAll(t, filepath.Dir(p))
			if err := os.WriteFile(p, HexDump(t, r.body.String()), 0o644); err != nil {
				t.Fatal(err)
			}
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

// HexDump decodes `lspci -xxxx` lines ("100: 0d 00 01 00 ...") into bytes,
// zero where no line is given, sized to 256 or 4096 bytes.
func HexDump(t testing.TB, body string) []byte {
	t.Helper()
	buf := make([]byte, 4096)
	end := 0
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		off, bytes, ok := strings.Cut(line, ":")
		o, err := strconv.ParseUint(strings.TrimSpace(off), 16, 16)
		if !ok || err != nil {
			t.Fatalf("hex dump line %q: want \"<offset>: <bytes>\"", line)
		}
		b, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(bytes), " ", ""))
		if err != nil || int(o)+len(b) > len(buf) {
			t.Fatalf("hex dump line %q: %v", line, err)
		}
		copy(buf[o:], b)
		end = max(end, int(o)+len(b))
	}
	if end <= 256 {
		return buf[:256]
	}
	return buf
}
