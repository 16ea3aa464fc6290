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
)

// Try asks one master; ctx carries this attempt's deadline.
type Try func(ctx context.Context, addr string) error

// Options shape a walk.
type Options struct {
	// ShareDeadline gives each attempt an equal share of what is left of
	// ctx's deadline between the masters not tried yet, so that one master
	// that hangs cannot eat the whole deadline. Without it (or without a
	// deadline) each attempt gets all of ctx.
	ShareDeadline bool
	// MaxAttempts > 0 bounds the number of masters asked (e.g. 1: failover
	// off); walks again count.
	MaxAttempts int
	// RetryDelay is the first pause before a walk is repeated because a
	// master answered that the cluster is between leaders (NOT_LEADER, or
	// DATA_DIR_FULL); it doubles up to MaxRetryDelay. 0: DefaultRetryDelay.
	RetryDelay time.Duration
}

// DefaultRetryDelay is the first pause between walks; MaxRetryDelay the
// longest.
const (
	DefaultRetryDelay = 100 * time.Millisecond
	MaxRetryDelay     = time.Second
)

// MoveOn reports whether another master may succeed where this one
// failed: it is unreachable, this attempt ran out of its share of the
// deadline, it knows no leader to forward to (NOT_LEADER: an election, or
// a master older than forwarding), or it is a leader whose data dir is
// full (it hands leadership over to a master with space).
// Any other refusal (bad input, a stale generation, an unknown node) would
// be the same on every master.
func MoveOn(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return apierr.IsNotLeader(err) || apierr.IsDataDirFull(err)
}

// inTransition reports whether err says the cluster is between leaders
// rather than that the master is gone: a follower or candidate that knows
// no leader yet (an election), or a leader whose data dir is full and that
// has not handed over yet (or a single master waiting for space). A walk
// whose every master answered so, or was unreachable, is walked again
// after a pause while ctx's deadline allows.
func inTransition(err error) bool {
	return apierr.IsNotLeader(err) || apierr.IsDataDirFull(err)
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
	// Walks is how many times the list was walked (more than one while
	// the masters said they were between leaders); Attempts are the last
	// walk's.
	Walks int
}

func (e *ExhaustedError) Error() string {
	parts := make([]string, 0, len(e.Attempts)+len(e.Skipped))
	for _, a := range e.Attempts {
		parts = append(parts, a.String())
	}
	for _, s := range e.Skipped {
		parts = append(parts, s+": not tried, deadline passed")
	}
	after := ""
	if e.Walks > 1 {
		after = fmt.Sprintf(" in %d tries, the last", e.Walks)
	}
	return "no master answered" + after + " (" + strings.Join(parts, "; ") + ")"
}

// GRPCStatus makes the error an UNAVAILABLE status for status.Code/Convert.
func (e *ExhaustedError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.Error())
}

// Do asks the masters in order until one answers (a follower forwards
// writes to the leader itself, internal/master/forward.go). It returns the address that answered; else the
// first refusal MoveOn rejects, wrapped with the masters asked before it.
// When every master was unreachable, Do returns an *ExhaustedError at once.
// When one answered that the cluster is between leaders (NOT_LEADER during
// an election, DATA_DIR_FULL from a leader that has not handed over yet),
// Do walks the list again after a pause (RetryDelay, doubling) for as long
// as ctx's deadline leaves time for it (without a deadline, once); when it
// gives up, the error is the last walk's DATA_DIR_FULL refusal, if a master
// sent one (a *RefusedError), else an *ExhaustedError. An empty list is an
// error. ctx ending stops the walk with what was tried.
func Do(ctx context.Context, masters []string, o Options, try Try) (string, error) {
	if len(masters) == 0 {
		return "", errors.New("redirect: no master address")
	}
	delay := o.RetryDelay
	if delay <= 0 {
		delay = DefaultRetryDelay
	}
	asked := 0
	for walks := 1; ; walks++ {
		w := walker{ctx: ctx, o: o, try: try, asked: asked}
		addr, err := w.walk(masters)
		asked = w.asked
		if err == nil {
			return addr, nil
		}
		var ex *ExhaustedError
		if errors.As(err, &ex) {
			ex.Walks = walks
		}
		if !w.transition {
			return "", err
		}
		dl, ok := ctx.Deadline()
		if !ok || time.Until(dl) <= delay || (o.MaxAttempts > 0 && asked >= o.MaxAttempts) {
			return "", err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", err
		case <-t.C:
		}
		delay = min(2*delay, MaxRetryDelay)
	}
}

// walker is one walk over the master list.
type walker struct {
	ctx   context.Context
	o     Options
	try   Try
	asked int // masters asked by every walk so far (for MaxAttempts)

	attempts   []Attempt
	full       int  // 1 + the index in attempts of the last DATA_DIR_FULL refusal
	transition bool // a master said the cluster is between leaders
}

// walk asks each master of the list once.
func (w *walker) walk(masters []string) (string, error) {
	queue := once(masters)
	for i, addr := range queue {
		if w.o.MaxAttempts > 0 && w.asked >= w.o.MaxAttempts {
			break
		}
		if w.ctx.Err() != nil {
			if w.full > 0 {
				return "", w.refusedFull()
			}
			return "", &ExhaustedError{Attempts: w.attempts, Skipped: queue[i:]}
		}
		w.asked++
		actx, cancel := w.ctx, context.CancelFunc(func() {})
		if dl, ok := w.ctx.Deadline(); ok && w.o.ShareDeadline {
			per := time.Until(dl) / time.Duration(len(queue)-i)
			actx, cancel = context.WithTimeout(w.ctx, per)
		}
		err := w.try(actx, addr)
		cancel()
		if err == nil {
			return addr, nil
		}
		w.attempts = append(w.attempts, Attempt{Addr: addr, Err: err})
		if !MoveOn(err) {
			return "", &RefusedError{Attempts: w.attempts}
		}
		if inTransition(err) {
			w.transition = true
		}
		if apierr.IsDataDirFull(err) {
			w.full = len(w.attempts)
		}
	}
	if w.full > 0 {
		return "", w.refusedFull()
	}
	return "", &ExhaustedError{Attempts: w.attempts}
}

// refusedFull is the walk's last DATA_DIR_FULL refusal, as the master sent
// it, after the other masters asked.
func (w *walker) refusedFull() *RefusedError {
	full := w.attempts[w.full-1]
	others := append(append([]Attempt(nil), w.attempts[:w.full-1]...), w.attempts[w.full:]...)
	return &RefusedError{Attempts: append(others, full)}
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

// once lists each address of list once, in order.
func once(list []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range list {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}
