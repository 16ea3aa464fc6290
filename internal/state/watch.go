package state

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// Event is one change of the state.
type Event struct {
	Index uint64
	Kind  ginv1.WatchEventKind
	// At is when the change happened: the command's own time when it
	// carries one, else when this store applied it.
	At time.Time
	// Node is empty for fabric imports, restores and plans.
	Node string
	// OldState and NewState: NODE_STATE.
	OldState, NewState ginv1.NodeState
	// OldGeneration and NewGeneration: NODE_UPDATED (old 0 for a new node).
	OldGeneration, NewGeneration uint64
	// Job: PLAN_*.
	Job string
	// Reason: the new state's reason (NODE_STATE), why a plan went (PLAN_DELETED).
	Reason string
}

// watchBuffer is how many events a watcher may lag before it is dropped.
const watchBuffer = 1024

// HistorySize is how many recent events a store keeps for WatchSince.
const HistorySize = 4096

// ErrWatchTooOld: the events after the asked index are no longer all kept.
var ErrWatchTooOld = errors.New("changes from that index are no longer kept")

type watchers struct {
	mu   sync.Mutex
	next int
	subs map[int]chan Event
	// history holds the last HistorySize events in index order; floor is the
	// highest index whose event may be missing from it (dropped, or before a
	// snapshot restore): a watch since an index below floor has a gap.
	history []Event
	floor   uint64
}

// publish never blocks: a watcher whose buffer is full is closed, and its
// reader sees the channel end (and must re-read the state).
func (w *watchers) publish(e Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.history) == HistorySize {
		w.floor = max(w.floor, w.history[0].Index)
		w.history = append(w.history[:0], w.history[1:]...)
	}
	w.history = append(w.history, e)
	for id, ch := range w.subs {
		select {
		case ch <- e:
		default:
			close(ch)
			delete(w.subs, id)
		}
	}
}

// restored marks that the events up to index (a snapshot's) are not kept.
func (w *watchers) restored(index uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.history = w.history[:0]
	w.floor = max(w.floor, index)
}

// Watch returns a channel of new events and a function that stops the
// watch. The channel is closed when the watcher falls behind by more than
// watchBuffer events or when cancel is called.
func (s *Store) Watch() (<-chan Event, func()) {
	_, ch, cancel, _ := s.WatchSince(0)
	return ch, cancel
}

// WatchSince is Watch that first returns the kept events after index since
// (none for 0), with no gap and no duplicate between them and the channel.
// It fails with ErrWatchTooOld when some of those events are not kept.
func (s *Store) WatchSince(since uint64) ([]Event, <-chan Event, func(), error) {
	w := &s.watchers
	w.mu.Lock()
	defer w.mu.Unlock()
	var replay []Event
	if since > 0 {
		if since < w.floor {
			return nil, nil, nil, fmt.Errorf("%w: index %d is older than the oldest change this master keeps (after index %d)", ErrWatchTooOld, since, w.floor)
		}
		for _, e := range w.history {
			if e.Index > since {
				replay = append(replay, e)
			}
		}
	}
	if w.subs == nil {
		w.subs = map[int]chan Event{}
	}
	id := w.next
	w.next++
	ch := make(chan Event, watchBuffer)
	w.subs[id] = ch
	return replay, ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if c, ok := w.subs[id]; ok {
			close(c)
			delete(w.subs, id)
		}
	}, nil
}

// eventTime is a command's time, or now when it carries none.
func eventTime(ts *timestamppb.Timestamp) time.Time {
	if ts != nil {
		return ts.AsTime()
	}
	return time.Now()
}
