package state

import (
	"sync"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// Event is one change of the state.
type Event struct {
	Index uint64
	Kind  ginv1.WatchEventKind
	// Node is empty for fabric imports and restores.
	Node string
}

// watchBuffer is how many events a watcher may lag before it is dropped.
const watchBuffer = 1024

type watchers struct {
	mu   sync.Mutex
	next int
	subs map[int]chan Event
}

// publish never blocks: a watcher whose buffer is full is closed, and its
// reader sees the channel end (and must re-read the state).
func (w *watchers) publish(e Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, ch := range w.subs {
		select {
		case ch <- e:
		default:
			close(ch)
			delete(w.subs, id)
		}
	}
}

// Watch returns a channel of events and a function that stops the watch. The
// channel is closed when the watcher falls behind by more than watchBuffer
// events or when cancel is called.
func (s *Store) Watch() (<-chan Event, func()) {
	w := &s.watchers
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.subs == nil {
		w.subs = map[int]chan Event{}
	}
	id := w.next
	w.next++
	ch := make(chan Event, watchBuffer)
	w.subs[id] = ch
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if c, ok := w.subs[id]; ok {
			close(c)
			delete(w.subs, id)
		}
	}
}
