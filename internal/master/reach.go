package master

import (
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
// leader's to say: a follower's answer leaves both fields unset.
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
