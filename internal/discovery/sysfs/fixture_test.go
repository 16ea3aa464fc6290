package sysfs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gin-topology/gin/internal/discovery/sysfs/sysfstest"
)

// materialize writes a txtar-style archive into a new temporary directory
// and returns its path. Records:
//
//	-- path --            a file; its content is the lines up to the next marker
//	-- path/ --           an empty directory
//	-- path -> target --  a symlink (relative targets, as sysfs has them)
//
// Text before the first marker is a comment. Later records overwrite
// earlier ones, so a test can overlay a variation on testdata/node.txtar.
func materialize(t testing.TB, archives ...string) string {
	t.Helper()
	return sysfstest.Materialize(t, archives...)
}

// nodeArchive is testdata/node.txtar.
func nodeArchive(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "node.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// nodeFixture materialises testdata/node.txtar plus overlays.
func nodeFixture(t testing.TB, overlays ...string) string {
	t.Helper()
	return materialize(t, append([]string{nodeArchive(t)}, overlays...)...)
}

// remove deletes paths (relative to root) from a materialised fixture.
func remove(t testing.TB, root string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.RemoveAll(filepath.Join(root, filepath.FromSlash(p))); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMaterialize(t *testing.T) {
	root := materialize(t, "comment\n-- a/b/file --\nline1\nline2\n-- a/empty --\n-- d/ --\n-- a/link -> b/file --\n")
	b, err := os.ReadFile(filepath.Join(root, "a", "b", "file"))
	if err != nil || string(b) != "line1\nline2\n" {
		t.Errorf("file = %q, %v; want \"line1\\nline2\\n\"", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "a", "empty")); err != nil || len(b) != 0 {
		t.Errorf("empty file = %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "d")); err != nil || !fi.IsDir() {
		t.Errorf("d: %v, %v; want a directory", fi, err)
	}
	if tgt, err := os.Readlink(filepath.Join(root, "a", "link")); err != nil || tgt != filepath.FromSlash("b/file") {
		t.Errorf("link -> %q, %v", tgt, err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "a", "link")); err != nil || string(b) != "line1\nline2\n" {
		t.Errorf("through link = %q, %v", b, err)
	}
}

// The node fixture is in the kernel's layout: class entries and the PCI
// device links are relative symlinks that resolve.
func TestNodeFixtureLayout(t *testing.T) {
	root := nodeFixture(t)
	for _, p := range []string{
		"sys/class/infiniband/mlx5_0/ports/1/rate",
		"sys/class/infiniband/mlx5_0/device/numa_node",
		"sys/bus/pci/devices/0000:07:00.0/current_link_speed",
		"sys/class/net/ens1f0np0/address",
	} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	tgt, err := os.Readlink(filepath.Join(root, "sys/class/infiniband/mlx5_0/device"))
	if err != nil || tgt != "../../../0000:17:00.0" {
		t.Errorf("device -> %q, %v; want ../../../0000:17:00.0", tgt, err)
	}
}
