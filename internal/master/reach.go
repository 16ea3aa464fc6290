package master

import (
	"context"
	"time"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// reach reports, on the leader, whether master id is reachable and how
// long ago its last session report was applied; known is false when this
// leader has had no report from it since it was elected. A master is
// reachable while its reports arrive within reportLost (two report
// periods at most), the same bound after which liveness treats its nodes'
// silence as its own.
func (l *liveness) reach(id string) (reachable bool, since time.Duration, known bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.contacted[id]
	if !ok {
		return false, 0, false
	}
	since = max(l.now().Sub(at), 0)
	return since <= l.reportLost(), since, true
}

// fillReach sets m's reachability as the leader sees it. It is the
// leader's to say: a follower copies the leader's (leaderReach).
func (a *adminService) fillReach(m *ginv1.Member) {
	if !a.node.IsLeader() {
		return
	}
	if m.GetId() == a.id {
		m.Reachable, m.LastContactMs = new(true), new(uint64(0))
		return
	}
	ok, since, known := a.reach(m.GetId())
	m.Reachable = new(ok)
	if known {
		m.LastContactMs = new(uint64(since.Milliseconds()))
	}
}

// leaderReachWait bounds a follower's question to the leader: its answer
// without the leader's view is still an answer.
const leaderReachWait = time.Second

// leaderReach fills a follower's answer with the leader's view of each
// master's reachability (the leader is the one that hears from every
// master); without a leader to ask, the follower says only that it is up
// itself and when it last heard from the leader.
func (a *adminService) leaderReach(ctx context.Context, resp *ginv1.GetClusterInfoResponse) {
	if a.node.IsLeader() {
		return
	}
	var view map[string]*ginv1.Member
	if a.leaderInfo != nil && resp.GetLeaderId() != "" {
		ctx, cancel := context.WithTimeout(ctx, leaderReachWait)
		li, err := a.leaderInfo(ctx)
		cancel()
		if err == nil && li.GetServerId() == resp.GetLeaderId() {
			view = make(map[string]*ginv1.Member, len(li.GetMembers()))
			for _, m := range li.GetMembers() {
				view[m.GetId()] = m
			}
		}
	}
	for _, m := range resp.GetMembers() {
		if l, ok := view[m.GetId()]; ok && l.Reachable != nil {
			m.Reachable, m.LastContactMs = l.Reachable, l.LastContactMs
			continue
		}
		if m.GetId() == a.id {
			m.Reachable, m.LastContactMs = new(true), new(uint64(0))
		}
	}
}
