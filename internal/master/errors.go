package master

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
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

// toStatus maps an internal error to the gRPC status clients see: the
// first row of statusTable that matches it. It is the only place where
// that mapping is decided.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	for _, r := range statusTable {
		if !r.match(err) {
			continue
		}
		st := status.New(r.code, err.Error())
		if r.details != nil {
			if wd, derr := st.WithDetails(r.details(err)...); derr == nil {
				st = wd
			}
		}
		return st.Err()
	}
	return status.Error(codes.Internal, err.Error())
}

// statusRow is one row of the error table: the errors it matches, their
// code and the details clients read (apierr reasons, field violations,
// retry hints).
type statusRow struct {
	match   func(error) bool
	code    codes.Code
	details func(error) []protoadapt.MessageV1 // nil: none
}

// statusTable is the master's error table (etcd's shape: one table from
// error to status), in order: the first matching row wins. Anything else
// is INTERNAL.
var statusTable = []statusRow{
	{isA[*inventory.ValidationError], codes.InvalidArgument, func(err error) []protoadapt.MessageV1 {
		d := &errdetails.BadRequest{}
		for _, v := range asA[*inventory.ValidationError](err).Violations {
			d.FieldViolations = append(d.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: v.Field, Description: v.Description})
		}
		return []protoadapt.MessageV1{d}
	}},
	{isA[*badRequest], codes.InvalidArgument, func(err error) []protoadapt.MessageV1 {
		br := asA[*badRequest](err)
		return []protoadapt.MessageV1{&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: br.field, Description: br.msg}}}}
	}},
	{isA[*forbidden], codes.PermissionDenied, nil},
	{anyOf(isA[*notFound], is(state.ErrUnknownNode)), codes.NotFound, nil},
	{isA[*ginraft.NotLeaderError], codes.FailedPrecondition, func(err error) []protoadapt.MessageV1 {
		return []protoadapt.MessageV1{apierr.NotLeaderInfo(asA[*ginraft.NotLeaderError](err).LeaderID)}
	}},
	{is(state.ErrIdentityConflict), codes.AlreadyExists, nil},
	{anyOf(is(state.ErrStaleGeneration), is(state.ErrGenerationReused)), codes.FailedPrecondition, nil},
	{anyOf(is(ginraft.ErrOutcomeUnknown), is(ginraft.ErrShutdown), is(errOutdated), is(ginraft.ErrCorruptState), is(errShuttingDown),
		is(errDetached), is(errNoLeader), is(errRelayTimedOut), is(errNotRegistered), isA[*ginraft.CatchingUpError]), codes.Unavailable, nil},
	{is(errFailedPrecondition), codes.FailedPrecondition, nil},
	// Not UNAVAILABLE or DEADLINE_EXCEEDED: clients move on to another
	// master on those and would repeat a write that committed.
	{anyOf(isA[*notAppliedError], is(ginraft.ErrMembershipChanged)), codes.Aborted, nil},
	{is(state.ErrWatchTooOld), codes.OutOfRange, nil},
	{isA[*errHandshakeBusy], codes.ResourceExhausted, func(err error) []protoadapt.MessageV1 {
		return []protoadapt.MessageV1{apierr.Info(apierr.ReasonHandshakesBusy, nil),
			&errdetails.RetryInfo{RetryDelay: durationpb.New(asA[*errHandshakeBusy](err).retryAfter)}}
	}},
	{isA[*ginraft.DataDirFullError], codes.ResourceExhausted, func(err error) []protoadapt.MessageV1 {
		return []protoadapt.MessageV1{apierr.DataDirFullInfo(asA[*ginraft.DataDirFullError](err).Dir)}
	}},
	{isA[*exhaustedError], codes.ResourceExhausted, func(err error) []protoadapt.MessageV1 {
		return []protoadapt.MessageV1{apierr.Info(asA[*exhaustedError](err).reason, nil)}
	}},
	{is(state.ErrTooManyDenied), codes.ResourceExhausted, func(error) []protoadapt.MessageV1 {
		return []protoadapt.MessageV1{apierr.Info(apierr.ReasonDenyListFull, nil)}
	}},
	{is(context.DeadlineExceeded), codes.DeadlineExceeded, nil},
	{is(context.Canceled), codes.Canceled, nil},
}

// isA matches errors that wrap a T; asA is that T (the row matched).
func isA[T error](err error) bool { var t T; return errors.As(err, &t) }

func asA[T error](err error) T {
	var t T
	errors.As(err, &t)
	return t
}

// is matches errors that wrap target.
func is(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

// anyOf matches errors any of ms matches.
func anyOf(ms ...func(error) bool) func(error) bool {
	return func(err error) bool {
		for _, m := range ms {
			if m(err) {
				return true
			}
		}
		return false
	}
}
