package raft

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/state"
	"github.com/gin-topology/gin/internal/testkit"
)

// Few large entries trigger a snapshot by their bytes, with the entry
// threshold far away (issue #21: snapshots by entry count only let the log
// grow to many GB): the log is compacted and the count starts again.
func TestSnapshotBytesTakesSnapshots(t *testing.T) {
	tests := []struct {
		name      string
		bytes     uint64
		wantSnaps bool
	}{
		{"64 KiB of log bytes", 64 << 10, true},
		{"the default, far above what is written", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tun := Tuning{SnapshotThreshold: 1 << 30, SnapshotInterval: 24 * time.Hour, TrailingLogs: 4, SnapshotBytes: tt.bytes}
			n, err := Open(Config{ID: "m1", Bind: "127.0.0.1:0", DataDir: dir, Bootstrap: true, Fast: true, Tuning: tun}, state.New(nil))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = n.Shutdown() })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := n.WaitLeader(ctx); err != nil {
				t.Fatal(err)
			}
			const writes = 40 // 40 × 8 KiB: 320 KiB of log
			for i := range writes {
				cmd := put(fmt.Sprintf("s%02d", i), 1, "h")
				cmd.GetPutInventory().GetInventory().Source = strings.Repeat("x", 8<<10)
				if _, err := n.Apply(ctx, cmd); err != nil {
					t.Fatalf("apply %d: %v", i, err)
				}
			}
			if !tt.wantSnaps {
				if err := n.Barrier(ctx); err != nil {
					t.Fatal(err)
				}
				snaps, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "meta.json"))
				if len(snaps) != 0 || n.SnapshotsForBytes() != 0 {
					t.Fatalf("%d snapshots (%d for bytes) below the default threshold", len(snaps), n.SnapshotsForBytes())
				}
				if got := n.LogBytesSinceCompaction(); got < writes*8<<10 {
					t.Fatalf("log bytes since compaction %d, want at least %d", got, writes*8<<10)
				}
				return
			}
			testkit.WaitFor(t, 30*time.Second, "a snapshot for the log's bytes", func() bool {
				snaps, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "meta.json"))
				return len(snaps) > 0 && n.SnapshotsForBytes() > 0
			})
			if got := n.LogBytesSinceCompaction(); got >= writes*8<<10 {
				t.Fatalf("log bytes since compaction %d after a snapshot, want the count restarted", got)
			}
		})
	}
}
