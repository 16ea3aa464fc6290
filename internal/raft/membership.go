package raft

import (
	"errors"
	"fmt"
	"sync"

	hraft "github.com/hashicorp/raft"
)

// ErrMembershipChanged: the configuration a change was decided on is no
// longer the latest (another change committed in between); decide again.
var ErrMembershipChanged = errors.New("the Raft configuration changed since it was read")

// configRecord is the latest committed Raft configuration this FSM has
// applied and the log index it was written at. hashicorp/raft v1.7.3's
// GetConfiguration reports no index (its future's Index is always 0), and
// a change conditioned on a configuration (AddVoter's prevIndex) needs
// both, read together.
type configRecord struct {
	mu      sync.Mutex
	index   uint64
	members []Member
}

func (c *configRecord) set(index uint64, conf hraft.Configuration) {
	ms := make([]Member, 0, len(conf.Servers))
	for _, srv := range conf.Servers {
		ms = append(ms, Member{ID: string(srv.ID), Address: string(srv.Address), Voter: srv.Suffrage == hraft.Voter})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if index < c.index {
		return // a replay older than what a snapshot already gave
	}
	c.index, c.members = index, ms
}

func (c *configRecord) get() ([]Member, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Member(nil), c.members...), c.index
}

// StoreConfiguration implements hraft.ConfigurationStore: Raft calls it on
// the FSM goroutine for each committed configuration entry.
func (f *FSM) StoreConfiguration(index uint64, conf hraft.Configuration) {
	f.conf.set(index, conf)
}

var _ hraft.ConfigurationStore = (*FSM)(nil)

// seedConfiguration takes the configuration of the newest snapshot: after
// a restart the entries before it are not replayed, so without it the
// record would stay empty until the next change.
func (f *FSM) seedConfiguration(snaps hraft.SnapshotStore) {
	metas, err := snaps.List()
	if err != nil || len(metas) == 0 {
		return
	}
	f.conf.set(metas[0].ConfigurationIndex, metas[0].Configuration)
}

// Membership is the latest committed configuration this server has applied
// and the log index it was written at: the prevIndex of a change decided
// on it (AddVoter). Index 0 means none is known yet (a fresh server, or a
// restarted one still replaying); a change decided on it is unconditioned.
// On the leader it can trail Raft's own latest configuration by the
// moments its FSM takes to apply a commit: a change decided on it then
// fails with ErrMembershipChanged and is decided again.
func (n *Node) Membership() ([]Member, uint64, error) {
	ms, index := n.fsm.conf.get()
	if index > 0 {
		return ms, index, nil
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, 0, fmt.Errorf("raft: configuration: %w", err)
	}
	var rec configRecord
	rec.set(0, f.Configuration())
	ms, _ = rec.get()
	return ms, 0, nil
}
