package apierr

import (
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// LeaderHintKey is the gRPC header/trailer key in which a master names the
// leader's client address (host:port) when it answers NOT_LEADER.
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

// ReasonNotLeader marks the FailedPrecondition a master answers a write or
// a consistent read with when it cannot reach a leader to forward it to
// (an election; a master older than forwarding answers it on every
// follower): another master may answer, the request itself is not refused.
const ReasonNotLeader = "NOT_LEADER"

// NotLeaderInfo is the detail of a NOT_LEADER answer.
func NotLeaderInfo(leaderID string) *errdetails.ErrorInfo {
	return Info(ReasonNotLeader, map[string]string{"leader_id": leaderID})
}

// IsNotLeader reports whether err is a NOT_LEADER answer: another master
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
	return Info(ReasonDataDirFull, map[string]string{"data_dir": dataDir})
}

// IsDataDirFull reports whether err is a master's refusal for a full data
// dir.
func IsDataDirFull(err error) bool {
	return hasReason(err, codes.ResourceExhausted, ReasonDataDirFull)
}

// The ErrorInfo reasons of the other ResourceExhausted refusals: a limit
// of the master's, not the request's content, each named so that clients
// and the master's rejection count tell them apart.
const (
	// ReasonNodeLimit: a new node past gin-master --max-nodes.
	ReasonNodeLimit = "NODE_LIMIT"
	// ReasonPlanLimit: a new job's plan past gin-master --max-plans.
	ReasonPlanLimit = "PLAN_LIMIT"
	// ReasonAgentPlanLimit: a plan an agent certificate asks for past the
	// agent's quota (plans naming its node, or its share of --max-plans).
	ReasonAgentPlanLimit = "AGENT_PLAN_LIMIT"
	// ReasonDenyListFull: a serial past the deny list's bound.
	ReasonDenyListFull = "DENY_LIST_FULL"
	// ReasonHandshakesBusy: an agent Hello past --max-handshakes and
	// --handshake-queue (a RetryInfo says when to try again).
	ReasonHandshakesBusy = "HANDSHAKES_BUSY"
	// ReasonStreamLimit: a stream past the open streams one identity may
	// hold.
	ReasonStreamLimit = "STREAM_LIMIT"
	// ReasonWatchBehind: a topology watcher that fell behind the changes.
	ReasonWatchBehind = "WATCH_BEHIND"
	// ReasonNamesLimit: a hostlist naming more hosts than one request may
	// (the cluster's size, or a stated cap).
	ReasonNamesLimit = "NAMES_LIMIT"
	// ReasonReadLimit: a heavy read past the ones one identity may run at
	// once.
	ReasonReadLimit = "READ_LIMIT"
	// ReasonInventoryTooLarge: an inventory over the bytes one node's may
	// hold.
	ReasonInventoryTooLarge = "INVENTORY_TOO_LARGE"
	// ReasonInventoryRate: an inventory change past the changes one node
	// may commit per minute (a RetryInfo says when to try again).
	ReasonInventoryRate = "INVENTORY_RATE"
	// ReasonLiveLimit: a rank window past the live jobs or ranks the
	// leader keeps (gin-master's live bounds).
	ReasonLiveLimit = "LIVE_LIMIT"
)

// Info is the ErrorInfo of GIN's reason (metadata may be nil).
func Info(reason string, metadata map[string]string) *errdetails.ErrorInfo {
	return &errdetails.ErrorInfo{Reason: reason, Domain: Domain, Metadata: metadata}
}

// Reason is the ErrorInfo reason of GIN's domain that err carries, or "".
func Reason(err error) string {
	s, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range s.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == Domain {
			return ei.GetReason()
		}
	}
	return ""
}
