// tmpfs.go gives the disk-full tests a real small filesystem: MountTmpfs
// mounts a tmpfs of a given size on a temporary directory (root only; the
// test is skipped otherwise, and fails instead when REQUIRE_FAULT_TESTS=1,
// as in CI), FillTmpfs takes its free space away with a ballast file and
// FreeTmpfs gives it back.

package testkit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// MountTmpfs mounts a tmpfs of size bytes on a new temporary directory and
// returns it; it is unmounted when the test ends.
func MountTmpfs(t testing.TB, size uint64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "it mounts a small tmpfs, which needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0750", size)); err != nil {
		unavailable(t, fmt.Sprintf("mount -t tmpfs on %s: %v", dir, err))
	}
	// Registered after t.TempDir's own cleanup, so it runs before it.
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("umount %s: %v", dir, err)
		}
	})
	return dir
}

func unavailable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("REQUIRE_FAULT_TESTS") == "1" {
		t.Fatalf("disk-full test required (REQUIRE_FAULT_TESTS=1) but %s", why)
	}
	t.Skipf("disk-full test skipped: %s (run as root, or REQUIRE_FAULT_TESTS=1 to make this a failure)", why)
}

// FreeBytes is the space an unprivileged writer may still use under dir.
func FreeBytes(t testing.TB, dir string) uint64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatalf("statfs %s: %v", dir, err)
	}
	return st.Bavail * uint64(st.Bsize)
}

// ballast is the name of the file FillTmpfs writes.
const ballast = "ballast"

// FillTmpfs allocates a ballast file in dir (on a tmpfs from MountTmpfs) so
// that at most leave bytes stay free; with leave 0 the filesystem is full. A
// second FillTmpfs grows the same ballast.
func FillTmpfs(t testing.TB, dir string, leave uint64) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, ballast), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatalf("ballast: %v", err)
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	free := FreeBytes(t, dir)
	if free <= leave {
		return
	}
	if err := unix.Fallocate(int(f.Fd()), 0, st.Size(), int64(free-leave)); err != nil {
		t.Fatalf("ballast of %d bytes in %s: %v", free-leave, dir, err)
	}
	if leave > 0 {
		return
	}
	// Whatever rounding left, written until the filesystem says it is full.
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, unix.ENOSPC) {
				return
			}
			t.Fatalf("ballast: %v", err)
		}
	}
}

// FreeTmpfs removes the ballast: the space FillTmpfs took is back.
func FreeTmpfs(t testing.TB, dir string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, ballast)); err != nil {
		t.Fatalf("remove the ballast: %v", err)
	}
}

// ResizeTmpfs changes the size of the tmpfs MountTmpfs made at dir (a disk
// grown by its operator).
func ResizeTmpfs(t testing.TB, dir string, size uint64) {
	t.Helper()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("remount the tmpfs on %s with size %d: %v", dir, size, err)
	}
}
