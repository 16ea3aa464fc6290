package master

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/gin-topology/gin/internal/apierr"
)

// The leader hint: an RPC this master still refuses with NOT_LEADER (no
// leader known within forwardHold, forward.go; an agent session's stream)
// carries the leader's client address in the apierr.LeaderHintKey
// trailer. The agent's session loop reads it; clients older than
// forwarding follow it. Set here, in one place, for every service.

func (s *Server) leaderHintUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	s.setLeaderHint(ctx, err)
	return resp, err
}

func (s *Server) leaderHintStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	err := h(srv, ss)
	if apierr.IsNotLeader(err) {
		if hint := s.leaderHint(); hint != "" {
			ss.SetTrailer(metadata.Pairs(apierr.LeaderHintKey, hint))
		}
	}
	return err
}

func (s *Server) setLeaderHint(ctx context.Context, err error) {
	if !apierr.IsNotLeader(err) {
		return
	}
	if hint := s.leaderHint(); hint != "" {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(apierr.LeaderHintKey, hint))
	}
}
