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
// (so a Hello finds the generation the agent was acknowledged). Agents
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
	if s.node.IsLeader() {
		return true
	}
	if id, _ := s.node.Leader(); id == "" || !s.reportAccepted.Load() || s.detached() != nil {
		return false
	}
	commit, applied := s.node.Indexes()
	return applied+maxApplyLag >= commit
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
