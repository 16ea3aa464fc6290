package master

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/inventory"
	ginraft "github.com/gin-topology/gin/internal/raft"
	"github.com/gin-topology/gin/internal/state"
)

// badRequest is an invalid request field found at the edge.
type badRequest struct {
	field, msg string
}

func (e *badRequest) Error() string { return fmt.Sprintf("%s: %s", e.field, e.msg) }

func invalidf(field, format string, args ...any) error {
	return &badRequest{field: field, msg: fmt.Sprintf(format, args...)}
}

// errOutdated: this master skipped committed entries it cannot interpret
// (written by a newer version), so its state is incomplete; clients move on
// to another master (UNAVAILABLE).
var errOutdated = errors.New("this master skipped replicated commands written by a newer version and does not serve until it is upgraded")

// errShuttingDown: this master is stopping; clients move on (UNAVAILABLE).
var errShuttingDown = errors.New("master is shutting down")

// errFailedPrecondition marks a request the state does not allow now.
var errFailedPrecondition = errors.New("failed precondition")

// notFound is a lookup of something that does not exist: "<what> not
// found", or msg as it is when the lookup explains itself.
type notFound struct{ what, msg string }

func (e *notFound) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return e.what + " not found"
}

// precondition is a request the state does not allow now, said in one
// sentence (no internal prefix); it is errFailedPrecondition.
type precondition struct{ msg string }

func (e *precondition) Error() string        { return e.msg }
func (e *precondition) Is(target error) bool { return target == errFailedPrecondition }

// forbidden is a request the caller's identity may not make (a write for
// another node than the agent's certificate names).
type forbidden struct{ msg string }

func (e *forbidden) Error() string { return e.msg }

// exhaustedError is a limit of the master's that refuses a request
// (RESOURCE_EXHAUSTED with the apierr reason naming the limit).
type exhaustedError struct{ reason, msg string }

func (e *exhaustedError) Error() string { return e.msg }

func exhaustedf(reason, format string, args ...any) error {
	return &exhaustedError{reason: reason, msg: fmt.Sprintf(format, args...)}
}

// toStatus maps an internal error to the gRPC status clients see. It is the
// only place where that mapping is decided.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var (
		ve   *inventory.ValidationError
		br   *badRequest
		nf   *notFound
		nl   *ginraft.NotLeaderError
		full *ginraft.DataDirFullError
		fb   *forbidden
		hb   *errHandshakeBusy
		ex   *exhaustedError
	)
	switch {
	case errors.As(err, &ve):
		st := status.New(codes.InvalidArgument, err.Error())
		d := &errdetails.BadRequest{}
		for _, v := range ve.Violations {
			d.FieldViolations = append(d.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: v.Field, Description: v.Description})
		}
		if wd, derr := st.WithDetails(d); derr == nil {
			st = wd
		}
		return st.Err()
	case errors.As(err, &br):
		st := status.New(codes.InvalidArgument, err.Error())
		if wd, derr := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: br.field, Description: br.msg}}}); derr == nil {
			st = wd
		}
		return st.Err()
	case errors.As(err, &fb):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.As(err, &nf), errors.Is(err, state.ErrUnknownNode):
		return status.Error(codes.NotFound, err.Error())
	case errors.As(err, &nl):
		st := status.New(codes.FailedPrecondition, err.Error())
		if wd, derr := st.WithDetails(apierr.NotLeaderInfo(nl.LeaderID)); derr == nil {
			st = wd
		}
		return st.Err()
	case errors.Is(err, state.ErrIdentityConflict):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, state.ErrStaleGeneration), errors.Is(err, state.ErrGenerationReused):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, ginraft.ErrOutcomeUnknown), errors.Is(err, ginraft.ErrShutdown), errors.Is(err, errOutdated), errors.Is(err, errShuttingDown),
		errors.Is(err, errDetached), errors.Is(err, errNoLeader), errors.Is(err, errRelayTimedOut):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, errFailedPrecondition):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, state.ErrWatchTooOld):
		return status.Error(codes.OutOfRange, err.Error())
	case errors.As(err, &hb):
		st := status.New(codes.ResourceExhausted, err.Error())
		if wd, derr := st.WithDetails(apierr.Info(apierr.ReasonHandshakesBusy, nil), &errdetails.RetryInfo{RetryDelay: durationpb.New(hb.retryAfter)}); derr == nil {
			st = wd
		}
		return st.Err()
	case errors.As(err, &full):
		st := status.New(codes.ResourceExhausted, err.Error())
		if wd, derr := st.WithDetails(apierr.DataDirFullInfo(full.Dir)); derr == nil {
			st = wd
		}
		return st.Err()
	case errors.As(err, &ex), errors.Is(err, state.ErrTooManyDenied):
		reason := apierr.ReasonDenyListFull
		if ex != nil {
			reason = ex.reason
		}
		st := status.New(codes.ResourceExhausted, err.Error())
		if wd, derr := st.WithDetails(apierr.Info(reason, nil)); derr == nil {
			st = wd
		}
		return st.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	default:
		return status.Error(codes.Internal, err.Error())
	}
}
