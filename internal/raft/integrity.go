package raft

import (
	"errors"
	"fmt"
	"sync"
)

// ErrCorruptState: a committed entry's content no longer matched its
// content hash when this server applied it (a byte changed on disk in the
// log): this server's state lacks what the others have and it does not
// serve.
var ErrCorruptState = errors.New("this master's Raft log holds a corrupted entry")

// corruption is the first corrupted entry an FSM met.
type corruption struct {
	mu    sync.Mutex
	index uint64 // 0: none
	err   error
}

// mark records the first corrupted entry; later ones are only logged.
func (c *corruption) mark(index uint64, err error) (first bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.index != 0 {
		return false
	}
	c.index, c.err = index, err
	return true
}

// state is the first corrupted entry's error, nil when none: it names the
// index and the operator's step.
func (c *corruption) state(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.index == 0 {
		return nil
	}
	return fmt.Errorf("%w: entry %d: %v; this master does not serve. To recover: stop it, move its data dir away, "+
		"run ginctl members remove %s and ginctl members add %s, and start it again: it receives the state from the leader",
		ErrCorruptState, c.index, c.err, id, id)
}

// CorruptState is nil while every entry this server applied matched its
// content hash; otherwise it names the first corrupted entry's index and
// how to recover (wrapping ErrCorruptState).
func (n *Node) CorruptState() error { return n.fsm.corrupt.state(n.cfg.ID) }
