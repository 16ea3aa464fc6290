package raft

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	hraft "github.com/hashicorp/raft"
)

// errNoSnapshotLoaded is hashicorp/raft's NewRaft failing because every
// snapshot in the store failed to restore (it tries them newest first, so
// an older good one is used by itself).
var errNoSnapshotLoaded = errors.New("failed to load any existing snapshots")

// errSnapshotsUnreadable maps NewRaft's error (a plain string in
// hashicorp/raft v1.7.3) to errNoSnapshotLoaded.
func errSnapshotsUnreadable(err error) error {
	if err != nil && strings.Contains(err.Error(), errNoSnapshotLoaded.Error()) {
		return errNoSnapshotLoaded
	}
	return err
}

// corruptSnapshotsDir is where unreadable snapshots are moved, under the
// data dir (kept for the operator, never read again).
const corruptSnapshotsDir = "snapshots-corrupt"

// setAsideUnreadableSnapshots moves every snapshot that fails its checksum
// or does not decode out of the snapshot store, when the log still holds
// every entry from index 1 (nothing was compacted: the log alone rebuilds
// the state). Invariant: a snapshot is set aside only when the state
// survives without it. It returns how many it moved.
func setAsideUnreadableSnapshots(dataDir string, logs hraft.LogStore, snaps hraft.SnapshotStore, log *slog.Logger) (int, error) {
	first, err := logs.FirstIndex()
	if err != nil {
		return 0, fmt.Errorf("read the log's first index: %w", err)
	}
	if first > 1 {
		return 0, fmt.Errorf("the log starts at index %d (compacted); restore the snapshots directory from a backup, or move this data dir away and let the master rejoin its cluster empty", first)
	}
	metas, err := snaps.List()
	if err != nil {
		return 0, fmt.Errorf("list snapshots: %w", err)
	}
	moved := 0
	for _, m := range metas {
		rerr := readable(snaps, m.ID)
		if rerr == nil {
			continue
		}
		{
			to := filepath.Join(dataDir, corruptSnapshotsDir, fmt.Sprintf("%s-%d", m.ID, time.Now().Unix()))
			if err := os.MkdirAll(filepath.Dir(to), 0o750); err != nil {
				return moved, err
			}
			if err := os.Rename(filepath.Join(dataDir, "snapshots", m.ID), to); err != nil {
				return moved, fmt.Errorf("set aside snapshot %s: %w", m.ID, err)
			}
			moved++
			log.Warn("a snapshot failed to restore; set aside, the state is rebuilt from the log (which holds every entry)",
				"snapshot", m.ID, "index", m.Index, "moved_to", to, "err", rerr)
		}
	}
	return moved, nil
}

func readable(snaps hraft.SnapshotStore, id string) error {
	_, rc, err := snaps.Open(id)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = ReadSnapshot(rc, nil)
	return err
}
