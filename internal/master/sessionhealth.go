package master

import (
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// The gRPC health status of the service gin.v1.AgentService says whether
// this master takes agent sessions now and can answer a returning agent
// from its own state: it leads, or it is a follower whose session reports
// the leader has accepted (so it reaches the leader: it has not detached)
// and whose state machine has applied nearly all the leader has committed
// (so a Hello finds the generation the agent was acknowledged), and its
// handshake queue is at most half full. Agents
// away from their home master probe this (internal/agent, home.go) and
// move back once it is SERVING. The whole-server status ("") stays "a
// leader is known" (leadership.go).

// agentServiceName is the health service agents probe.
var agentServiceName = ginv1.AgentService_ServiceDesc.ServiceName

// maxApplyLag is how many committed entries a follower may not have
// applied yet and still count as in sync (a busy follower is a few
// entries behind; a restarted one replaying its log is far behind).
const maxApplyLag = 256

// takesSessions reports whether this master takes agent sessions now and
// answers them in sync with the leader.
func (s *Server) takesSessions() bool {
	if s.closing.Load() || s.outdated() != nil {
		return false
	}
	id, _ := s.node.Leader()
	commit, applied := s.node.Indexes()
	return sessionsWelcome(sessionReadiness{
		leads: s.node.IsLeader(), leaderKnown: id != "", reportAccepted: s.link.accepted.Load(),
		detached: s.detached() != nil, commit: commit, applied: applied,
		waiting: s.admission.waiting.Load(), queue: s.admission.queue,
	})
}

// sessionReadiness is what decides whether a master welcomes agents.
type sessionReadiness struct {
	leads, leaderKnown, reportAccepted, detached bool
	commit, applied                              uint64
	// waiting Hellos in the admission queue of queue places.
	waiting, queue int64
}

// sessionsWelcome: a master welcomes agents when it leads, or follows a
// known leader that has accepted its session reports, is not detached, and
// has applied all but maxApplyLag of the committed entries; and in either
// case while its handshake queue is at most half full (agents returning
// home wait for a later probe rather than join a storm).
func sessionsWelcome(r sessionReadiness) bool {
	if r.waiting*2 > r.queue {
		return false
	}
	if r.leads {
		return true
	}
	return r.leaderKnown && r.reportAccepted && !r.detached && r.applied+maxApplyLag >= r.commit
}

// agentHealth keeps the health status of gin.v1.AgentService current; it
// returns the status now in force (called on every leadership tick with
// the previous one).
func (s *Server) agentHealth(prev healthpb.HealthCheckResponse_ServingStatus) healthpb.HealthCheckResponse_ServingStatus {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if s.takesSessions() {
		st = healthpb.HealthCheckResponse_SERVING
	}
	if st != prev {
		s.health.SetServingStatus(agentServiceName, st)
	}
	return st
}
