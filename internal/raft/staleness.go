package raft

import "time"

// Staleness is how long this server's state may lag the cluster's: 0 on
// the leader; on any other server the time since it last heard from a
// leader (an append or a snapshot it accepted), or, when it has not heard
// from one since it opened (a restarted master without a quorum), the time
// since it opened. Never 0 off the leader: a read served from a state that
// has not heard from a leader says so.
func (n *Node) Staleness() time.Duration {
	if n.IsLeader() {
		return 0
	}
	since := n.raft.LastContact()
	if since.IsZero() || since.Before(n.opened) {
		since = n.opened
	}
	return max(time.Since(since), time.Nanosecond)
}
