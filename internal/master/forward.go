package master

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/authz"
)

// One way to reach the leader: a follower forwards the writes (admin,
// plan, calibration, deny, node delete: leaderOnly) to the leader over
// this master's one leader connection (relay.go), as Consul, Nomad and
// etcd do, and so any other unary call its handler refuses as NOT_LEADER
// (a consistent read, a plan not pinned yet, a leadership lost between
// the check and the write). The caller sees the leader's answer; it moves
// on to another master only when one is unreachable.
//
// A forwarded call carries forwardedByKey (this master's id) and, with
// TLS, the caller's identity (authz.ForwardedForKey): the leader checks
// the authorization table against that identity, and only when the peer
// is a master (internal/authz). A forwarded call is never forwarded again:
// a master that no longer leads answers it NOT_LEADER, and the forwarding
// master asks the next leader.

// forwardedByKey is the metadata key naming the master that forwarded a
// call.
const forwardedByKey = "gin-forwarded-by"

// forwardHold bounds how long a follower waits for a leader to forward a
// call to (an election) before it answers NOT_LEADER itself, as masters
// did before forwarding (older clients walk on, newer ones too). It is
// about twice a default election, well inside a client's deadline.
const forwardHold = 5 * time.Second

// forwardMaxResponse bounds a forwarded answer: the clients' own bound
// (cmd/ginctl's maxResponseBytes), so that a consistent read of a large
// matrix fits through the follower as it fits from the leader.
const forwardMaxResponse = 64 << 20

// forwarder forwards the unary calls its master's handlers refuse as
// NOT_LEADER. leader returns the connection to the current leader
// (errNoLeader while none is known).
type forwarder struct {
	id        string
	leads     func() bool
	notLeader func() error // this master's NOT_LEADER status
	leader    func() (*grpc.ClientConn, error)
	// leaderID is the leader's server id as Raft knows it ("" in an
	// election). A leader known by id whose client address this master's
	// state does not hold yet (a master that cannot apply: its data dir is
	// full, or it trails the leader's registration) is not waited for: the
	// client reaches it on its own.
	leaderID func() string
	hold     time.Duration // forwardHold
	wait     time.Duration // between attempts while no leader answers
}

// leaderOnly are the writes a follower forwards before its handler runs:
// their handlers check the request against the state (is the serial on
// the deny list, does the node exist), and a follower's copy may lag the
// leader's by the write the same client made just before. Any other call
// a follower's handler refuses as NOT_LEADER is forwarded after it
// (GetOrCreatePlan: a follower answers a pinned plan, which never
// changes, itself; consistent reads).
var leaderOnly = map[string]bool{
	ginv1.AdminService_ImportFabric_FullMethodName:            true,
	ginv1.AdminService_RemoveServer_FullMethodName:            true,
	ginv1.AdminService_DeleteNode_FullMethodName:              true,
	ginv1.AdminService_DenyCertificate_FullMethodName:         true,
	ginv1.AdminService_AllowCertificate_FullMethodName:        true,
	ginv1.CalibrationService_ImportMeasurement_FullMethodName: true,
	ginv1.CalibrationService_DeleteMeasurement_FullMethodName: true,
	ginv1.PlanService_DeletePlan_FullMethodName:               true,
	// Live job state is the leader's memory: every window of a job must
	// meet the others there, and only the leader answers for it.
	ginv1.LiveService_ReportRanks_FullMethodName: true,
	ginv1.LiveService_GetJobLive_FullMethodName:  true,
}

// unary is the server interceptor (innermost: the authorization and the
// text checks ran already, on this master).
func (f *forwarder) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if msg, ok := req.(proto.Message); ok && leaderOnly[info.FullMethod] && !f.leads() && forwardedBy(ctx) == "" {
		return f.forward(ctx, info.FullMethod, msg, nil)
	}
	resp, err := h(ctx, req)
	if err == nil || !apierr.IsNotLeader(err) || forwardedBy(ctx) != "" {
		return resp, err
	}
	msg, ok := req.(proto.Message)
	if !ok {
		return resp, err
	}
	return f.forward(ctx, info.FullMethod, msg, err)
}

// forwardedBy is the master that forwarded the call in ctx, or "".
func forwardedBy(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(forwardedByKey); len(v) > 0 {
		return v[0]
	}
	return ""
}

// forward calls method on the leader with req and returns its answer.
// While no leader is known, the master asked answers NOT_LEADER itself
// (nothing was applied) or cannot be reached (UNAVAILABLE: a leader that
// just died, one shutting down), it asks again after f.wait, for at most
// f.hold; then it returns refusal, this master's own NOT_LEADER (nil: a
// NOT_LEADER made here, for a call forwarded before its handler ran), so
// that the client walks the masters again as it does during an election.
// A call retried after an UNAVAILABLE may have reached the leader: the
// forwarded writes are idempotent (a plan, a measurement, a deny entry
// are keyed by their content; a second delete finds nothing to delete),
// as they were when clients retried them on another master themselves.
// Any other answer of the leader is returned as the leader sent it.
func (f *forwarder) forward(ctx context.Context, method string, req proto.Message, refusal error) (any, error) {
	if refusal == nil {
		refusal = f.notLeader()
	}
	newResp, err := responseType(method)
	if err != nil {
		return nil, refusal
	}
	md := metadata.Pairs(forwardedByKey, f.id)
	if id, ok := authz.Identity(ctx); ok {
		md.Set(authz.ForwardedForKey, id.String())
	}
	out := metadata.NewOutgoingContext(ctx, md)
	// Waiting takes at most half of what is left of the caller's deadline,
	// so that a client told NOT_LEADER still has time to ask the next
	// master (ginctl --timeout 5s against a 5 s hold got nothing).
	until := time.Now().Add(f.hold)
	if dl, ok := ctx.Deadline(); ok {
		if half := time.Now().Add(time.Until(dl) / 2); half.Before(until) {
			until = half
		}
	}
	for {
		conn, err := f.leader()
		if err == nil {
			resp := newResp.New().Interface()
			err = conn.Invoke(out, method, req, resp, grpc.MaxCallRecvMsgSize(forwardMaxResponse))
			if err == nil {
				return resp, nil
			}
			if !apierr.IsNotLeader(err) && status.Code(err) != codes.Unavailable {
				return nil, err
			}
		} else if !errors.Is(err, errNoLeader) {
			return nil, toStatus(fmt.Errorf("forward %s to the leader: %w", method, err))
		} else if f.leaderID != nil && f.leaderID() != "" {
			return nil, refusal
		}
		if time.Now().Add(f.wait).After(until) {
			return nil, refusal
		}
		t := time.NewTimer(f.wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, refusal
		case <-t.C:
		}
	}
}

// responseType is the response message type of a unary method
// ("/gin.v1.AdminService/DeleteNode"), from the registered descriptors.
func responseType(method string) (protoreflect.MessageType, error) {
	svc, name, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if !ok {
		return nil, fmt.Errorf("method %q: want /service/method", method)
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, fmt.Errorf("method %q: %w", method, err)
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("method %q: %s is not a service", method, svc)
	}
	m := sd.Methods().ByName(protoreflect.Name(name))
	if m == nil {
		return nil, fmt.Errorf("method %q: no such method", method)
	}
	return protoregistry.GlobalTypes.FindMessageByName(m.Output().FullName())
}
