package raft

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	hraft "github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"golang.org/x/sys/unix"
)

// Free space under the data dir. raft-wal preallocates each 64 MiB log
// segment and, when one fills, seals it and creates the next; if that
// creation fails (the disk is full) the error is only logged inside
// raft-wal and every later append answers "segment is sealed" until the
// process reopens the log. Nothing in raft-wal retries the rotation, so the
// master keeps the space a rotation and a snapshot need free, refusing new
// writes before the log store can fail:
//   - the leader refuses proposals (Node.Apply) while the data dir has less
//     than MinFreeBytes free, with a DataDirFullError (RESOURCE_EXHAUSTED);
//     nothing is written and leadership is kept, and writes are taken again
//     as soon as space returns;
//     A leader of several voters also hands leadership over once (and
//     again at most every fullHandoffEvery): the most up-to-date follower
//     takes it. A follower whose own disk is full lags from the first
//     append it refuses, so it is passed over (Raft elects no lagging
//     server); one chosen before that hands over in turn. Writes go on
//     elsewhere while this master keeps replicating;
//   - a follower refuses to append replicated entries under the same
//     threshold: it stays a follower (heartbeats carry no entries) and
//     catches up from the leader once space returns;
//   - a write error of the log store that happens anyway (the disk filled
//     faster than the check, or any other I/O error) leaves raft-wal unable
//     to append again in this process: the Node stops Raft at once (a
//     server that cannot write its log would only win elections and step
//     down again), reports it on Failed, and gin-master exits (status 75) for its supervisor to
//     restart it; the restarted master reopens the log with every entry it
//     had acknowledged.
const (
	// DefaultMinFreeBytes is Config.MinFreeBytes's default: a segment
	// rotation (64 MiB), a snapshot of a large cluster and slack.
	DefaultMinFreeBytes = 256 << 20
	// MinMinFreeBytes and MaxMinFreeBytes bound Config.MinFreeBytes. The
	// floor is raft-wal's segment size: the free space kept must hold the
	// segment a rotation preallocates, or the rotation fails for lack of
	// space and the log stays sealed ("segment is sealed") until the
	// process restarts (issue #21: a follower died that way with 16 MiB).
	// Open checks against the segment size it opens the log with.
	MinMinFreeBytes = 64 << 20 // wal.DefaultSegmentSize (TestMinFreeBytesBounds)
	MaxMinFreeBytes = 1 << 40
)

// ErrDataDirFull is in the chain of every DataDirFullError.
var ErrDataDirFull = errors.New("data dir is full")

// ErrLogStoreFailed is in the chain of the error Node.Err returns after
// the log store failed a write.
var ErrLogStoreFailed = errors.New("raft log store failed")

// ErrIncompleteState is in the chain of Open's error when the data dir's
// log was compacted and no readable snapshot holds the entries before it:
// the state cannot be rebuilt from this data dir, and no restart changes
// that (gin-master exits 65 for systemd not to loop on it).
var ErrIncompleteState = errors.New("incomplete Raft state")

// DataDirFullError: the data dir has less free space than the master keeps.
type DataDirFullError struct {
	Dir           string
	Free, MinFree uint64
}

func (e *DataDirFullError) Error() string {
	return fmt.Sprintf("data dir %s is full: %s free, less than the %s kept free for the Raft log and snapshots "+
		"(--data-dir-min-free-mib); writes are refused until space is freed there", e.Dir, mib(e.Free), mib(e.MinFree))
}

func (e *DataDirFullError) Unwrap() error { return ErrDataDirFull }

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// diskGuard watches the free space of the data dir. Safe for concurrent use.
type diskGuard struct {
	dir     string
	minFree uint64
	statfs  func(dir string) (free uint64, err error)
	log     *slog.Logger
	full    atomic.Bool // as of the last check; transitions are logged
}

// freeBytes is the space an unprivileged writer may still use under dir.
func freeBytes(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// free returns the free bytes under the data dir.
func (g *diskGuard) free() (uint64, error) { return g.statfs(g.dir) }

// check returns a DataDirFullError while the data dir has less than
// minFree free. When the free space cannot be read it does not refuse
// (the log store reports real failures).
func (g *diskGuard) check() error {
	free, err := g.free()
	if err != nil {
		return nil
	}
	if free >= g.minFree {
		if g.full.Swap(false) {
			g.log.Info("data dir has space again; writes are taken", slog.String("data_dir", g.dir), slog.String("free", mib(free)))
		}
		return nil
	}
	e := &DataDirFullError{Dir: g.dir, Free: free, MinFree: g.minFree}
	if !g.full.Swap(true) {
		g.log.Error("data dir is full; refusing writes until space is freed", slog.String("data_dir", g.dir),
			slog.String("free", mib(free)), slog.String("min_free", mib(g.minFree)))
	}
	return e
}

// failure records the first write error of the log store.
type failure struct {
	once sync.Once
	ch   chan struct{}
	err  error
}

func newFailure() *failure { return &failure{ch: make(chan struct{})} }

// set records err and closes ch; it reports whether err was the first.
func (f *failure) set(err error) (first bool) {
	f.once.Do(func() {
		f.err = err
		close(f.ch)
		first = true
	})
	return first
}

// logStoreFailure wraps a write error of the log store under dir.
func logStoreFailure(dir string, err error) error {
	what := "failed a write"
	if diskFull(err) {
		what = "is full"
	}
	return fmt.Errorf("%w: data dir %s %s: %w; the log cannot take writes again in this process, restart the master "+
		"(its acknowledged entries are on disk)", ErrLogStoreFailed, dir, what, err)
}

// diskFull reports whether err says the disk is full: ENOSPC, EDQUOT, or
// raft-wal's sealed segment (a segment rotation that failed, for lack of
// space in every case seen).
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, wal.ErrSealed)
}

// fullHandoffEvery bounds how often a leader whose data dir is full hands
// leadership over: should every master's disk be full, leadership moves at
// most this often, not at every write.
const fullHandoffEvery = time.Minute

// handOffFull hands leadership to another voter, in the background, when
// this leader's data dir is full and it has not done so within
// fullHandoffEvery. A single-voter cluster keeps its leader (it refuses
// writes until space returns).
func (n *Node) handOffFull() {
	now := time.Now().UnixNano()
	last := n.fullHandoff.Load()
	if last != 0 && time.Duration(now-last) < fullHandoffEvery {
		return
	}
	if !n.fullHandoff.CompareAndSwap(last, now) {
		return // another proposal is handing over
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	others := 0
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage == hraft.Voter && string(srv.ID) != n.cfg.ID {
			others++
		}
	}
	if others == 0 {
		return
	}
	n.log.Warn("data dir is full: handing leadership to another master", slog.String("data_dir", n.cfg.DataDir))
	go func() {
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			n.log.Warn("leadership hand-over (data dir full) failed; writes stay refused here until space returns", slog.Any("err", err))
			return
		}
		n.log.Warn("leadership handed over: this master's data dir is full", slog.String("data_dir", n.cfg.DataDir))
	}()
}
