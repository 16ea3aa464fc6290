package raft

import (
	"errors"
	"sync/atomic"

	hraft "github.com/hashicorp/raft"
)

// The log store operations whose errors are counted.
const (
	opFirstIndex = iota
	opLastIndex
	opGetLog
	opStoreLogs // StoreLog and StoreLogs
	opDeleteRange
	numOps
)

// opNames are the op label values, by operation.
func opNames() [numOps]string {
	return [numOps]string{"first_index", "last_index", "get_log", "store_logs", "delete_range"}
}

// LogStoreErrors is one operation's error count.
type LogStoreErrors struct {
	Op     string // first_index, last_index, get_log, store_logs, delete_range
	Errors uint64
}

// countingLogStore wraps the Raft log store and counts the errors of each
// operation (gin_master_raft_log_store_errors_total). A GetLog of an index
// that is not there (hraft.ErrLogNotFound) is an answer Raft expects, not a
// fault, and is not counted.
//
// It also guards appends: refuse, when set, is asked before each one (a
// non-nil error refuses it without touching the store: the data dir is full
// on a follower), and onWriteError, when set, is told every append error of
// the store itself (after which raft-wal cannot append again).
type countingLogStore struct {
	hraft.LogStore
	errs         [numOps]atomic.Uint64
	refuse       func() error
	onWriteError func(error)
	bySize       *snapshotByBytes // nil: snapshots by entry count only
}

func newCountingLogStore(s hraft.LogStore) *countingLogStore {
	return &countingLogStore{LogStore: s}
}

func (c *countingLogStore) count(op int, err error) error {
	if err != nil {
		c.errs[op].Add(1)
	}
	return err
}

func (c *countingLogStore) FirstIndex() (uint64, error) {
	i, err := c.LogStore.FirstIndex()
	return i, c.count(opFirstIndex, err)
}

func (c *countingLogStore) LastIndex() (uint64, error) {
	i, err := c.LogStore.LastIndex()
	return i, c.count(opLastIndex, err)
}

func (c *countingLogStore) GetLog(index uint64, log *hraft.Log) error {
	err := c.LogStore.GetLog(index, log)
	if errors.Is(err, hraft.ErrLogNotFound) {
		return err
	}
	return c.count(opGetLog, err)
}

func (c *countingLogStore) StoreLog(log *hraft.Log) error {
	return c.StoreLogs([]*hraft.Log{log})
}

func (c *countingLogStore) StoreLogs(logs []*hraft.Log) error {
	if c.refuse != nil {
		if err := c.refuse(); err != nil {
			return c.count(opStoreLogs, err)
		}
	}
	err := c.LogStore.StoreLogs(logs)
	if err != nil && c.onWriteError != nil {
		c.onWriteError(err)
	}
	if err == nil {
		c.bySize.stored(logs)
	}
	return c.count(opStoreLogs, err)
}

func (c *countingLogStore) DeleteRange(lo, hi uint64) error {
	err := c.LogStore.DeleteRange(lo, hi)
	if err == nil {
		c.bySize.compacted()
	}
	return c.count(opDeleteRange, err)
}

// IsMonotonic forwards hraft.MonotonicLogStore: the WAL needs Raft to
// reset the log after a snapshot install rather than leave a gap.
func (c *countingLogStore) IsMonotonic() bool {
	m, ok := c.LogStore.(hraft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// errorCounts returns the error count of every operation, zeros included.
func (c *countingLogStore) errorCounts() []LogStoreErrors {
	names := opNames()
	out := make([]LogStoreErrors, numOps)
	for i := range c.errs {
		out[i] = LogStoreErrors{Op: names[i], Errors: c.errs[i].Load()}
	}
	return out
}

var _ hraft.MonotonicLogStore = (*countingLogStore)(nil)
