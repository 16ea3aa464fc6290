package apierr

import (
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// LeaderHintKey is the gRPC header/trailer key in which a master names the
// leader's client address (host:port) when it redirects a request.
const LeaderHintKey = "gin-leader-hint"

// LeaderHint is the leader hint in the first of mds that carries one
// (pass the header and the trailer of a call), or "".
func LeaderHint(mds ...metadata.MD) string {
	for _, md := range mds {
		if v := md.Get(LeaderHintKey); len(v) > 0 && v[0] != "" {
			return v[0]
		}
	}
	return ""
}

// Domain is the errdetails.ErrorInfo domain of GIN's reasons.
const Domain = "gin-topology.io"

// ReasonNotLeader marks the FailedPrecondition a follower answers a write
// or a consistent read with: a redirect (the leader hint travels in the
// LeaderHintKey trailer), not a refusal of the request itself.
const ReasonNotLeader = "NOT_LEADER"

// NotLeaderInfo is the detail a follower attaches to its redirect.
func NotLeaderInfo(leaderID string) *errdetails.ErrorInfo {
	return &errdetails.ErrorInfo{Reason: ReasonNotLeader, Domain: Domain, Metadata: map[string]string{"leader_id": leaderID}}
}

// IsNotLeader reports whether err is a follower's redirect: another master
// (the leader) may succeed where this one refused.
func IsNotLeader(err error) bool {
	return hasReason(err, codes.FailedPrecondition, ReasonNotLeader)
}

// hasReason reports whether err is a status with code carrying GIN's
// ErrorInfo reason.
func hasReason(err error, code codes.Code, reason string) bool {
	s, ok := status.FromError(err)
	if !ok || s.Code() != code {
		return false
	}
	for _, d := range s.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetReason() == reason && ei.GetDomain() == Domain {
			return true
		}
	}
	return false
}

// ReasonDataDirFull marks the ResourceExhausted a master answers a write
// with while its data dir is below the free space it keeps: the cluster's
// state, not the request, is at fault (the write may succeed on another
// master's leadership, or here once space is freed).
const ReasonDataDirFull = "DATA_DIR_FULL"

// DataDirFullInfo is the detail of a refusal for a full data dir.
func DataDirFullInfo(dataDir string) *errdetails.ErrorInfo {
	return &errdetails.ErrorInfo{Reason: ReasonDataDirFull, Domain: Domain, Metadata: map[string]string{"data_dir": dataDir}}
}

// IsDataDirFull reports whether err is a master's refusal for a full data
// dir.
func IsDataDirFull(err error) bool {
	return hasReason(err, codes.ResourceExhausted, ReasonDataDirFull)
}
