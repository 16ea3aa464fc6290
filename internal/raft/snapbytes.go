package raft

import (
	"log/slog"
	"sync/atomic"

	hraft "github.com/hashicorp/raft"
)

// DefaultSnapshotBytes is the log bytes appended since the last compaction
// that trigger a snapshot when Tuning.SnapshotBytes is 0. hashicorp/raft
// snapshots by entry count only, so entries of a few MB each (issue #21:
// one agent certificate committed 2.1 MB inventories at 10 MB/s) let the
// log grow to many GB between two snapshots; with this the log on disk is
// bounded by bytes too (inventories are bounded in size at the edge as
// well).
const DefaultSnapshotBytes = 256 << 20

// maxSnapshotBytes bounds Tuning.SnapshotBytes.
const maxSnapshotBytes = 1 << 40

// snapshotByBytes triggers a user snapshot (which compacts the log) once
// the bytes appended since the last compaction pass a threshold, one
// snapshot at a time. The log store tells it every append and every
// compaction.
type snapshotByBytes struct {
	threshold uint64
	log       *slog.Logger
	raft      atomic.Pointer[hraft.Raft]
	appended  atomic.Uint64
	running   atomic.Bool
	taken     atomic.Uint64
}

// stored counts a successful append of logs.
func (s *snapshotByBytes) stored(logs []*hraft.Log) {
	if s == nil || s.threshold == 0 {
		return
	}
	var n uint64
	for _, l := range logs {
		n += uint64(len(l.Data) + len(l.Extensions))
	}
	if s.appended.Add(n) < s.threshold || !s.running.CompareAndSwap(false, true) {
		return
	}
	r := s.raft.Load()
	if r == nil {
		s.running.Store(false)
		return
	}
	at := s.appended.Load()
	// Not on the log store's goroutine (Raft's own): the snapshot waits
	// for the FSM, which waits for the entries being stored.
	go func() {
		defer s.running.Store(false)
		if err := r.Snapshot().Error(); err != nil {
			s.log.Warn("raft: snapshot for the log's bytes failed", slog.Uint64("appended_bytes", at), slog.Uint64("threshold_bytes", s.threshold), slog.Any("err", err))
			return
		}
		s.taken.Add(1)
		s.log.Info("raft: snapshot taken for the log's bytes", slog.Uint64("appended_bytes", at), slog.Uint64("threshold_bytes", s.threshold))
	}()
}

// compacted records a compaction (after any snapshot): the count starts
// again.
func (s *snapshotByBytes) compacted() {
	if s != nil {
		s.appended.Store(0)
	}
}

// SnapshotsForBytes is how many snapshots the log's bytes triggered since
// the node opened (besides hashicorp/raft's by entry count).
func (n *Node) SnapshotsForBytes() uint64 { return n.counted.bySize.taken.Load() }

// LogBytesSinceCompaction is the log bytes appended since the last
// compaction (what Tuning.SnapshotBytes is compared with).
func (n *Node) LogBytesSinceCompaction() uint64 { return n.counted.bySize.appended.Load() }

// SnapshotBytesThreshold is the log bytes since the last compaction that
// trigger a snapshot.
func (n *Node) SnapshotBytesThreshold() uint64 { return n.counted.bySize.threshold }
