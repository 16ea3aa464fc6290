package raft

import (
	"fmt"
	"time"
)

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

// Lag is how many committed entries this server knows of and has not
// applied: the commit index the leader's AppendEntries carried minus its
// applied index. The commit index is the leader's as sent (the highest
// LeaderCommitIndex a member's AppendEntries carried, rpcguard.go), not
// hashicorp/raft's CommitIndex, which on a follower is capped at the
// entries it holds: a follower that cannot append (its data dir full,
// diskguard.go) would otherwise report commit == applied, 0 behind, while
// the cluster commits on without it. Entries the leader has not committed yet, or
// committed after the last AppendEntries this server received, are not
// counted: a follower cut off from the leader reports the lag it last
// knew, and Staleness says how long ago that was. Without TLS there is no
// RPC guard to read the requests, and the commit index is hashicorp/raft's
// (capped). The leader reports none: its commit runs ahead of its applied
// index only by the batch being applied.
func (n *Node) Lag() (applied, commit uint64) {
	applied = n.raft.AppliedIndex()
	if n.IsLeader() {
		return applied, applied
	}
	return applied, max(n.followerCommit(), applied)
}

// followerCommit is the commit index this server learned from a leader:
// the higher of hashicorp/raft's (capped at the entries it holds, and the
// only one without TLS) and the highest a member's AppendEntries carried.
// CaughtUp reads it on the leader too: a new leader holds every committed
// entry (a server missing one wins no election), but until its own term's
// first entry commits its CommitIndex may still be the capped one it had
// as a follower, so the figure from the previous leader still counts.
func (n *Node) followerCommit() uint64 {
	commit := n.raft.CommitIndex()
	if n.rpcGuard != nil {
		commit = max(commit, n.rpcGuard.leaderCommitSeen())
	}
	return commit
}

// CatchingUpError refuses a read on a server that has not caught up with
// the leader since it opened: it heard from no leader yet (NoLeader), or
// it has applied Applied of the Commit entries the leader committed.
type CatchingUpError struct {
	Applied, Commit uint64
	NoLeader        bool
}

func (e *CatchingUpError) Error() string {
	if e.NoLeader {
		return fmt.Sprintf("catching up: heard from no leader since it started (applied index %d); ask another master", e.Applied)
	}
	return fmt.Sprintf("catching up with the leader: applied index %d of %d; ask another master", e.Applied, e.Commit)
}

// CaughtUp is nil once this server has caught up since it opened: it
// learned a commit index (a leader's AppendEntries, or as the leader its
// own term's first entry committing) and applied up to the first one it
// learned, a follower after hearing from a leader since it opened; a
// leader also once its leadership Barrier returned. Once caught up it
// stays so (a later lag is reported by Lag and Staleness, not refused):
// the latch guards a restarted or joining master whose state predates what
// the cluster committed. The target is the first commit index learned, not
// the latest: under steady writes applied trails commit by the batch in
// flight, and a master chasing the latest would refuse reads until a
// pause. The commit index is followerCommit's, the leader's as it sent it:
// hashicorp/raft's is capped at the entries this server holds, so a joiner
// receiving the log a batch at a time, or a restarted follower whose data
// dir is full, would take the little it holds for the cluster's commit
// and latch. The store may trail AppliedIndex by the batch the FSM
// goroutine is applying.
func (n *Node) CaughtUp() error {
	if n.caughtUp.Load() {
		return nil
	}
	applied, commit := n.raft.AppliedIndex(), n.followerCommit()
	if !n.IsLeader() {
		if c := n.raft.LastContact(); c.IsZero() || c.Before(n.opened) {
			return &CatchingUpError{Applied: applied, Commit: commit, NoLeader: true}
		}
	}
	// A heartbeat carries no commit index: contact alone does not say how
	// far the leader is, so the commit index must have been learned.
	if commit == 0 {
		return &CatchingUpError{Applied: applied, Commit: commit}
	}
	n.catchUpTo.CompareAndSwap(0, commit)
	if target := n.catchUpTo.Load(); applied < target {
		return &CatchingUpError{Applied: applied, Commit: target}
	}
	n.caughtUp.Store(true)
	return nil
}
