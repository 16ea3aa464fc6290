package raft

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// snapshotsSubdir and tempSnapshotSuffix are hashicorp/raft's
// FileSnapshotStore layout: DataDir/snapshots/<id>/ for a complete
// snapshot, <id>.tmp/ while it is being written (renamed when complete).
const (
	snapshotsSubdir    = "snapshots"
	tempSnapshotSuffix = ".tmp"
)

// removeTempSnapshots removes the directories an interrupted snapshot left
// in dataDir/snapshots: a master killed, or whose disk filled, while writing
// a snapshot leaves "<id>.tmp", which FileSnapshotStore skips on every List
// and never removes, so each one holds its space for good. Complete
// snapshots and anything else are left alone. It returns the directories
// removed; a data dir without snapshots is not an error.
func removeTempSnapshots(dataDir string, log *slog.Logger) ([]string, error) {
	dir := filepath.Join(dataDir, snapshotsSubdir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("raft: list snapshots in %s: %w", dir, err)
	}
	var removed []string
	for _, e := range entries {
		if !e.IsDir() || !strings.HasSuffix(e.Name(), tempSnapshotSuffix) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.RemoveAll(p); err != nil {
			return removed, fmt.Errorf("raft: remove the interrupted snapshot %s: %w", p, err)
		}
		log.Warn("removed an interrupted snapshot (a master stopped while writing it)", slog.String("path", p))
		removed = append(removed, p)
	}
	return removed, nil
}
