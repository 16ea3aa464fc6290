package testkit

import (
	"testing"
)

func TestFillFreeResize(t *testing.T) {
	dir := MountTmpfs(t, 8<<20)
	if free := FreeBytes(t, dir); free < 7<<20 || free > 8<<20 {
		t.Fatalf("a fresh 8 MiB tmpfs has %d bytes free", free)
	}
	tests := []struct {
		name  string
		leave uint64
	}{
		{"leave 1 MiB", 1 << 20},
		{"full", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			FillTmpfs(t, dir, tc.leave)
			if free := FreeBytes(t, dir); free > tc.leave {
				t.Fatalf("after FillTmpfs(%d): %d bytes free", tc.leave, free)
			}
			FreeTmpfs(t, dir)
			if free := FreeBytes(t, dir); free < 7<<20 {
				t.Fatalf("after Free: %d bytes free", free)
			}
		})
	}
	ResizeTmpfs(t, dir, 16<<20)
	if free := FreeBytes(t, dir); free < 15<<20 {
		t.Fatalf("after Resize to 16 MiB: %d bytes free", free)
	}
}
