package raft

import (
	"errors"
	"fmt"
	"testing"

	hraft "github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
)

// faultyLogStore is a real in-memory log store whose operations fail while
// fail names them, as a full or broken disk fails the WAL's.
type faultyLogStore struct {
	*hraft.InmemStore
	fail map[string]bool
}

var errDisk = errors.New("write wal/00001.wal: no space left on device")

func (f *faultyLogStore) err(op string) error {
	if f.fail[op] {
		return fmt.Errorf("%s: %w", op, errDisk)
	}
	return nil
}

func (f *faultyLogStore) FirstIndex() (uint64, error) {
	if err := f.err("first_index"); err != nil {
		return 0, err
	}
	return f.InmemStore.FirstIndex()
}

func (f *faultyLogStore) LastIndex() (uint64, error) {
	if err := f.err("last_index"); err != nil {
		return 0, err
	}
	return f.InmemStore.LastIndex()
}

func (f *faultyLogStore) GetLog(i uint64, l *hraft.Log) error {
	if err := f.err("get_log"); err != nil {
		return err
	}
	return f.InmemStore.GetLog(i, l)
}

func (f *faultyLogStore) StoreLog(l *hraft.Log) error { return f.StoreLogs([]*hraft.Log{l}) }

func (f *faultyLogStore) StoreLogs(ls []*hraft.Log) error {
	if err := f.err("store_logs"); err != nil {
		return err
	}
	return f.InmemStore.StoreLogs(ls)
}

func (f *faultyLogStore) DeleteRange(lo, hi uint64) error {
	if err := f.err("delete_range"); err != nil {
		return err
	}
	return f.InmemStore.DeleteRange(lo, hi)
}

func counts(c *countingLogStore) map[string]uint64 {
	out := map[string]uint64{}
	for _, e := range c.errorCounts() {
		out[e.Op] = e.Errors
	}
	return out
}

func TestCountingLogStoreCountsErrorsByOp(t *testing.T) {
	tests := []struct {
		name string
		fail string // op that fails; "" none
		do   func(s hraft.LogStore) error
		want map[string]uint64 // non-zero counts
	}{
		{"store ok", "", func(s hraft.LogStore) error { return s.StoreLog(&hraft.Log{Index: 1, Term: 1}) }, nil},
		{"store fails", "store_logs", func(s hraft.LogStore) error { return s.StoreLog(&hraft.Log{Index: 1, Term: 1}) },
			map[string]uint64{"store_logs": 1}},
		{"store batch fails", "store_logs", func(s hraft.LogStore) error {
			return s.StoreLogs([]*hraft.Log{{Index: 1, Term: 1}, {Index: 2, Term: 1}})
		}, map[string]uint64{"store_logs": 1}},
		{"read fails", "get_log", func(s hraft.LogStore) error { return s.GetLog(1, new(hraft.Log)) },
			map[string]uint64{"get_log": 1}},
		{"missing entry is not an error", "", func(s hraft.LogStore) error {
			if err := s.GetLog(99, new(hraft.Log)); !errors.Is(err, hraft.ErrLogNotFound) {
				return fmt.Errorf("GetLog(99) = %v, want ErrLogNotFound", err)
			}
			return errDisk // the call did fail, as expected
		}, nil},
		{"first index fails", "first_index", func(s hraft.LogStore) error { _, err := s.FirstIndex(); return err },
			map[string]uint64{"first_index": 1}},
		{"last index fails", "last_index", func(s hraft.LogStore) error { _, err := s.LastIndex(); return err },
			map[string]uint64{"last_index": 1}},
		{"compaction fails", "delete_range", func(s hraft.LogStore) error { return s.DeleteRange(1, 1) },
			map[string]uint64{"delete_range": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			under := &faultyLogStore{InmemStore: hraft.NewInmemStore(), fail: map[string]bool{tt.fail: true}}
			c := newCountingLogStore(under)
			err := tt.do(c)
			if tt.want != nil && !errors.Is(err, errDisk) {
				t.Fatalf("err = %v, want the store's error passed through", err)
			}
			got := counts(c)
			if len(got) != 5 {
				t.Fatalf("ops reported = %v, want all five", got)
			}
			for op, n := range got {
				if n != tt.want[op] {
					t.Errorf("%s errors = %d, want %d", op, n, tt.want[op])
				}
			}
		})
	}
}

func TestCountingLogStoreKeepsMonotonic(t *testing.T) {
	if newCountingLogStore(hraft.NewInmemStore()).IsMonotonic() {
		t.Error("in-memory store reported monotonic")
	}
	if !newCountingLogStore(monotonic{hraft.NewInmemStore()}).IsMonotonic() {
		t.Error("monotonic store (the WAL) lost IsMonotonic through the wrapper")
	}
}

type monotonic struct{ *hraft.InmemStore }

func (monotonic) IsMonotonic() bool { return true }

// TestCountingLogStoreOverTheWAL runs the wrapper over the real log store
// (raft-wal): a missing entry is not counted, writes and reads of a closed
// WAL are.
func TestCountingLogStoreOverTheWAL(t *testing.T) {
	w, err := wal.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := newCountingLogStore(w)
	if !c.IsMonotonic() {
		t.Error("the WAL is monotonic; the wrapper hides it")
	}
	if err := c.StoreLogs([]*hraft.Log{{Index: 1, Term: 1, Type: hraft.LogCommand, Data: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if err := c.GetLog(2, new(hraft.Log)); !errors.Is(err, hraft.ErrLogNotFound) {
		t.Fatalf("GetLog(2) = %v, want ErrLogNotFound", err)
	}
	if got := counts(c); got["get_log"] != 0 || got["store_logs"] != 0 {
		t.Fatalf("healthy WAL: errors %v, want none", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.StoreLogs([]*hraft.Log{{Index: 2, Term: 1, Type: hraft.LogCommand, Data: []byte("y")}}); err == nil {
		t.Fatal("a closed WAL stored an entry")
	}
	if err := c.GetLog(1, new(hraft.Log)); err == nil {
		t.Fatal("a closed WAL read an entry")
	}
	if got := counts(c); got["store_logs"] != 1 || got["get_log"] != 1 {
		t.Fatalf("closed WAL: errors %v, want store_logs 1, get_log 1", got)
	}
}
