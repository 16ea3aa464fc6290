package redirect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/masteraddr"
)

// Try asks one master (its address as given or as hinted); it returns the
// leader hint the master sent with its answer ("" for none) and the error.
// ctx carries this attempt's deadline.
type Try func(ctx context.Context, addr string) (hint string, err error)

// Options shape a walk.
type Options struct {
	// FollowHints tries a master named in a leader hint next, before the
	// rest of the list (once per address).
	FollowHints bool
	// ShareDeadline gives each attempt an equal share of what is left of
	// ctx's deadline between the masters not tried yet, so that one master
	// that hangs cannot eat the whole deadline. Without it (or without a
	// deadline) each attempt gets all of ctx.
	ShareDeadline bool
	// MaxAttempts > 0 bounds the number of masters asked (e.g. 1: failover
	// off); hints count.
	MaxAttempts int
}

// MoveOn reports whether another master may succeed where this one
// failed: it is unreachable, it is a follower redirecting to the leader,
// or this attempt ran out of its share of the deadline. Any other refusal
// (bad input, a stale generation, an unknown node) would be the same on
// every master.
func MoveOn(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return apierr.IsNotLeader(err)
}

// Attempt is one master asked and how it answered.
type Attempt struct {
	Addr string
	Err  error // nil: it answered
}

func (a Attempt) String() string {
	if a.Err == nil {
		return a.Addr + ": OK"
	}
	st := status.Convert(a.Err)
	return fmt.Sprintf("%s: %s: %s", a.Addr, st.Code(), st.Message())
}

// ExhaustedError is Do's error when no master answered: every attempt
// failed in a way another master might not. It is a gRPC UNAVAILABLE.
type ExhaustedError struct {
	Attempts []Attempt
	// Skipped names masters not asked because ctx ended first.
	Skipped []string
}

func (e *ExhaustedError) Error() string {
	parts := make([]string, 0, len(e.Attempts)+len(e.Skipped))
	for _, a := range e.Attempts {
		parts = append(parts, a.String())
	}
	for _, s := range e.Skipped {
		parts = append(parts, s+": not tried, deadline passed")
	}
	return "no master answered (" + strings.Join(parts, "; ") + ")"
}

// GRPCStatus makes the error an UNAVAILABLE status for status.Code/Convert.
func (e *ExhaustedError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.Error())
}

// Do asks the masters in order (and, with FollowHints, the leaders they
// name) until one answers. It returns the address that answered; else the
// first refusal MoveOn rejects, wrapped with the masters asked before it;
// else an *ExhaustedError. An empty list is an error. ctx ending stops the
// walk with ctx's error joined to what was tried.
func Do(ctx context.Context, masters []string, o Options, try Try) (string, error) {
	if len(masters) == 0 {
		return "", errors.New("redirect: no master address")
	}
	queue := append([]string(nil), masters...)
	tried := map[string]bool{}
	var attempts []Attempt
	for len(queue) > 0 {
		addr := queue[0]
		queue = queue[1:]
		if tried[addr] {
			continue
		}
		if o.MaxAttempts > 0 && len(attempts) >= o.MaxAttempts {
			break
		}
		if ctx.Err() != nil {
			return "", &ExhaustedError{Attempts: attempts, Skipped: append([]string{addr}, untried(queue, tried)...)}
		}
		tried[addr] = true
		actx, cancel := ctx, context.CancelFunc(func() {})
		if dl, ok := ctx.Deadline(); ok && o.ShareDeadline {
			per := time.Until(dl) / time.Duration(len(untried(queue, tried))+1)
			actx, cancel = context.WithTimeout(ctx, per)
		}
		hint, err := try(actx, addr)
		cancel()
		if err == nil {
			return addr, nil
		}
		attempts = append(attempts, Attempt{Addr: addr, Err: err})
		if !MoveOn(err) {
			return "", &RefusedError{Attempts: attempts}
		}
		if o.FollowHints && hint != "" {
			if h, herr := masteraddr.One(hint); herr == nil && !tried[h] {
				queue = append([]string{h}, queue...)
			}
		}
	}
	return "", &ExhaustedError{Attempts: attempts}
}

// RefusedError is Do's error when a master refused the request: the last
// attempt's error, which it unwraps to (status.Code and errors.Is see the
// master's status), after the masters asked before it.
type RefusedError struct {
	Attempts []Attempt // the last one is the refusal
}

func (e *RefusedError) Error() string {
	parts := make([]string, len(e.Attempts))
	for i, a := range e.Attempts {
		parts[i] = a.String()
	}
	return strings.Join(parts, "; ")
}

func (e *RefusedError) Unwrap() error { return e.Attempts[len(e.Attempts)-1].Err }

// GRPCStatus is the refusing master's status, unchanged.
func (e *RefusedError) GRPCStatus() *status.Status { return status.Convert(e.Unwrap()) }

// untried lists the queued addresses not asked yet, once each.
func untried(queue []string, tried map[string]bool) []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range queue {
		if !tried[a] && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}
