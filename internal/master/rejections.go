package master

import (
	"context"
	"log/slog"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/ratelog"
)

// rejectLogRate and rejectLogBurst bound the "rejected request" lines: a
// burst of 10, then one a second, each line after a gap saying how many
// were left out.
const (
	rejectLogRate  = 1
	rejectLogBurst = 10
)

// rejections is a gRPC stats handler that counts and logs every RPC the
// master answers with an error blaming the request. Being a stats handler,
// it also sees what grpc-go refuses before any handler or interceptor runs:
// messages over MaxMessageBytes (ResourceExhausted) and bytes that do not
// parse as the request message (Internal, "grpc: failed to unmarshal",
// the code gRPC's status-code table assigns to "error parsing request
// proto"). Every rejection is counted; the lines are rate limited, and a
// line echoes at most ratelog.MaxEcho bytes of the error, which may quote
// the request (a 1 MiB hostlist).
type rejections struct{ s *Server }

type methodKey struct{}

func (r rejections) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, methodKey{}, info.FullMethodName)
}

func (r rejections) HandleRPC(ctx context.Context, st stats.RPCStats) {
	end, ok := st.(*stats.End)
	if !ok || end.Error == nil {
		return
	}
	s := status.Convert(end.Error)
	reason := rejectionReason(s)
	if reason == "" {
		return
	}
	r.s.metrics.rejected.WithLabelValues(s.Code().String(), reason).Inc()
	method, _ := ctx.Value(methodKey{}).(string)
	from := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		from = p.Addr.String()
	}
	r.s.rejectLog.Log(ctx, r.s.log, slog.LevelWarn, "rejected request",
		"method", method, "peer", from, "code", s.Code().String(), "reason", reason, "err", ratelog.Clip(s.Message()))
}

func (rejections) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (rejections) HandleConn(context.Context, stats.ConnStats)                       {}

// rejectionReason says why s rejects a request ("" when it does not: a
// success, a redirect to the leader, an unavailable cluster, a full data
// dir, a lookup that found nothing, a cancelled call). It is the reason
// label of gin_master_rejected_messages_total; a RESOURCE_EXHAUSTED is
// told by its apierr reason (a limit of the master's: node_limit,
// plan_limit, agent_plan_limit, deny_list_full, handshakes_busy, stream_limit, watch_behind,
// names_limit, read_limit, inventory_too_large, inventory_rate)
// or, without one, is grpc-go's message size limit (too_large).
func rejectionReason(s *status.Status) string {
	switch s.Code() {
	case codes.InvalidArgument:
		return "invalid"
	case codes.AlreadyExists:
		return "conflict"
	case codes.ResourceExhausted:
		switch r := apierr.Reason(s.Err()); r {
		case apierr.ReasonDataDirFull:
			return "" // the master's disk, not the request
		case "":
			return "too_large"
		default:
			return strings.ToLower(r)
		}
	case codes.FailedPrecondition:
		if apierr.IsNotLeader(s.Err()) {
			return ""
		}
		return "precondition"
	case codes.Internal:
		if strings.HasPrefix(s.Message(), "grpc: failed to unmarshal") {
			return "malformed"
		}
	}
	return ""
}
