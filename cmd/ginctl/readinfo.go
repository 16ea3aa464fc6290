package main

import (
	"fmt"
	"time"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// offLeader is what a summary adds for a read a follower served: how long
// since it heard from the leader and how many committed entries it knows
// it has not applied (ReadInfo.staleness and lag); nothing on the leader.
// The lag counts from the leader's commit index as its last append to the
// follower carried it (raft.Node.Lag), entries the follower could not
// store included: a follower whose data dir is full is shown that far
// behind, not 0.
func offLeader(r *ginv1.ReadInfo) string {
	if r == nil || r.GetLeader() {
		return ""
	}
	return fmt.Sprintf(" (a follower: last heard from the leader %s ago, %d committed entries behind)",
		r.GetStaleness().AsDuration().Round(time.Millisecond), r.GetLag())
}
