package redirect

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gin-topology/gin/internal/apierr"
)

// answer is how a fake master answers (nil: success).
type answer = error

func notLeader(t *testing.T) error {
	st, err := status.New(codes.FailedPrecondition, "not the leader").WithDetails(apierr.NotLeaderInfo("m9"))
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func dataDirFull(t *testing.T) error {
	st, err := status.New(codes.ResourceExhausted, "data dir /d is full").WithDetails(apierr.DataDirFullInfo("/d"))
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestDo(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "connection refused")
	refused := status.Error(codes.InvalidArgument, "nodes: unknown node n9")
	stale := status.Error(codes.FailedPrecondition, "stale generation")    // no NOT_LEADER detail: a refusal
	tooLarge := status.Error(codes.ResourceExhausted, "message too large") // no DATA_DIR_FULL detail: a refusal
	var ok answer
	tests := []struct {
		name       string
		masters    []string
		opts       Options
		noDeadline bool
		// answers: what each master answers at its 1st, 2nd, ... call (the
		// last one again after that); a master not named answers OK.
		answers  map[string][]answer
		wantAddr string
		wantCode codes.Code
		wantFull bool   // the error is the DATA_DIR_FULL refusal
		wantAsk  string // the masters asked, in order
	}{
		{"the first answers", []string{"a:5000", "b:5000"}, Options{}, false,
			nil, "a:5000", codes.OK, false, "a:5000"},
		{"an older master's NOT_LEADER: the next one", []string{"a:5000", "b:5000"}, Options{}, false,
			map[string][]answer{"a:5000": {notLeader(t)}}, "b:5000", codes.OK, false, "a:5000 b:5000"},
		{"unreachable, then the next", []string{"a:5000", "b:5000"}, Options{}, false,
			map[string][]answer{"a:5000": {unavailable}}, "b:5000", codes.OK, false, "a:5000 b:5000"},
		{"a refusal is final", []string{"a:5000", "b:5000"}, Options{}, false,
			map[string][]answer{"a:5000": {refused}}, "", codes.InvalidArgument, false, "a:5000"},
		{"a stale generation is a refusal, not a redirect", []string{"a:5000", "b:5000"}, Options{}, false,
			map[string][]answer{"a:5000": {stale}}, "", codes.FailedPrecondition, false, "a:5000"},
		{"RESOURCE_EXHAUSTED without DATA_DIR_FULL is a refusal", []string{"a:5000", "b:5000"}, Options{}, false,
			map[string][]answer{"a:5000": {tooLarge}}, "", codes.ResourceExhausted, false, "a:5000"},
		{"every master unreachable: no second walk", []string{"a:5000", "b:5000"}, Options{}, false,
			map[string][]answer{"a:5000": {unavailable}, "b:5000": {unavailable}}, "", codes.Unavailable, false, "a:5000 b:5000"},
		{"an election: walked again until a leader answers", []string{"a:5000", "b:5000"}, Options{}, false,
			map[string][]answer{"a:5000": {notLeader(t)}, "b:5000": {notLeader(t), notLeader(t), ok}}, "b:5000", codes.OK, false, "a:5000 b:5000 a:5000 b:5000 a:5000 b:5000"},
		{"the leader died, the others elect", []string{"a:5000", "b:5000"}, Options{}, false,
			map[string][]answer{"a:5000": {unavailable}, "b:5000": {notLeader(t), ok}}, "b:5000", codes.OK, false, "a:5000 b:5000 a:5000 b:5000"},
		{"a full leader hands over", []string{"a:5000", "b:5000"}, Options{}, false,
			map[string][]answer{"a:5000": {dataDirFull(t), notLeader(t)}, "b:5000": {notLeader(t), ok}}, "b:5000", codes.OK, false, "a:5000 b:5000 a:5000 b:5000"},
		{"a full single master: its refusal once the walks are spent", []string{"a:5000"}, Options{MaxAttempts: 3}, false,
			map[string][]answer{"a:5000": {dataDirFull(t)}}, "", codes.ResourceExhausted, true, "a:5000 a:5000 a:5000"},
		{"a full leader and an unreachable follower", []string{"a:5000", "b:5000"}, Options{MaxAttempts: 4}, false,
			map[string][]answer{"a:5000": {dataDirFull(t)}, "b:5000": {unavailable}}, "", codes.ResourceExhausted, true, "a:5000 b:5000 a:5000 b:5000"},
		{"without a deadline: one walk", []string{"a:5000"}, Options{}, true,
			map[string][]answer{"a:5000": {dataDirFull(t), ok}}, "", codes.ResourceExhausted, true, "a:5000"},
		{"no time left for the pause: one walk", []string{"a:5000", "b:5000"}, Options{RetryDelay: 2 * time.Minute}, false,
			map[string][]answer{"a:5000": {notLeader(t), ok}, "b:5000": {notLeader(t), ok}}, "", codes.Unavailable, false, "a:5000 b:5000"},
		{"MaxAttempts 1: failover off", []string{"a:5000", "b:5000"}, Options{MaxAttempts: 1}, false,
			map[string][]answer{"a:5000": {notLeader(t)}}, "", codes.Unavailable, false, "a:5000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var asked []string
			calls := map[string]int{}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if tc.noDeadline {
				ctx, cancel = context.WithCancel(context.Background())
			}
			defer cancel()
			if tc.opts.RetryDelay == 0 {
				tc.opts.RetryDelay = time.Millisecond
			}
			addr, err := Do(ctx, tc.masters, tc.opts, func(_ context.Context, addr string) error {
				asked = append(asked, addr)
				seq := tc.answers[addr]
				if len(seq) == 0 {
					return nil
				}
				a := seq[min(calls[addr], len(seq)-1)]
				calls[addr]++
				return a
			})
			if addr != tc.wantAddr || status.Code(err) != tc.wantCode {
				t.Fatalf("Do = %q, %v; want %q, code %v", addr, err, tc.wantAddr, tc.wantCode)
			}
			if apierr.IsDataDirFull(status.Convert(err).Err()) != tc.wantFull {
				t.Fatalf("Do = %v; DATA_DIR_FULL refusal %v, want %v", err, !tc.wantFull, tc.wantFull)
			}
			if got := strings.Join(asked, " "); got != tc.wantAsk {
				t.Fatalf("asked %q, want %q", got, tc.wantAsk)
			}
		})
	}
}

func TestDoErrorsSayWhatWasTried(t *testing.T) {
	ctx := context.Background()
	refusal := status.Error(codes.NotFound, "job j1 not found")
	_, err := Do(ctx, []string{"a:5000", "b:5000"}, Options{}, func(_ context.Context, addr string) error {
		if addr == "a:5000" {
			return status.Error(codes.Unavailable, "down")
		}
		return refusal
	})
	var re *RefusedError
	if !errors.As(err, &re) || !errors.Is(err, refusal) || status.Convert(err).Message() != "job j1 not found" {
		t.Fatalf("refusal = %#v; want a RefusedError unwrapping to the master's status", err)
	}
	if want := "a:5000: Unavailable: down; b:5000: NotFound: job j1 not found"; err.Error() != want {
		t.Fatalf("refusal text %q, want %q", err.Error(), want)
	}

	_, err = Do(ctx, []string{"a:5000"}, Options{}, func(context.Context, string) error {
		return status.Error(codes.Unavailable, "down")
	})
	var ex *ExhaustedError
	if !errors.As(err, &ex) || status.Code(err) != codes.Unavailable || err.Error() != "no master answered (a:5000: Unavailable: down)" {
		t.Fatalf("exhausted = %v", err)
	}

	// Walked again: the error says how often and names the last walk.
	dctx, dcancel := context.WithTimeout(ctx, time.Minute)
	defer dcancel()
	_, err = Do(dctx, []string{"a:5000"}, Options{MaxAttempts: 2, RetryDelay: time.Millisecond}, func(context.Context, string) error {
		return notLeader(t)
	})
	if want := "no master answered in 2 tries, the last (a:5000: FailedPrecondition: not the leader)"; err == nil || err.Error() != want {
		t.Fatalf("exhausted after two walks = %v, want %q", err, want)
	}
	// A full leader's refusal comes last, after the masters asked besides.
	_, err = Do(dctx, []string{"a:5000", "b:5000"}, Options{MaxAttempts: 2}, func(_ context.Context, addr string) error {
		if addr == "a:5000" {
			return dataDirFull(t)
		}
		return status.Error(codes.Unavailable, "down")
	})
	if want := "b:5000: Unavailable: down; a:5000: ResourceExhausted: data dir /d is full"; !errors.As(err, &re) || err.Error() != want {
		t.Fatalf("full refusal = %v, want a RefusedError %q", err, want)
	}

	if _, err := Do(ctx, nil, Options{}, nil); err == nil {
		t.Fatal("an empty master list accepted")
	}
}

// With ShareDeadline each attempt gets an equal share of what is left; an
// ended ctx stops the walk and names the masters not asked.
func TestDoDeadlines(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	parent, _ := ctx.Deadline()
	var shares []time.Duration
	_, err := Do(ctx, []string{"a:5000", "b:5000", "c:5000"}, Options{ShareDeadline: true}, func(actx context.Context, _ string) error {
		dl, ok := actx.Deadline()
		if !ok {
			t.Fatal("attempt without a deadline")
		}
		shares = append(shares, time.Until(dl))
		return status.Error(codes.DeadlineExceeded, "slow")
	})
	if status.Code(err) != codes.Unavailable || len(shares) != 3 {
		t.Fatalf("Do = %v after %d attempts", err, len(shares))
	}
	// About 1/3, 1/2 and all of an hour (minus the little time spent here).
	left := time.Until(parent)
	for i, frac := range []float64{1.0 / 3, 1.0 / 2, 1} {
		want := time.Duration(frac * float64(left))
		if d := shares[i] - want; d > time.Minute || d < -time.Minute {
			t.Fatalf("attempt %d got %v, want about %v", i+1, shares[i], want)
		}
	}

	cctx, ccancel := context.WithCancel(context.Background())
	_, err = Do(cctx, []string{"a:5000", "b:5000"}, Options{}, func(context.Context, string) error {
		ccancel()
		return status.Error(codes.Unavailable, "down")
	})
	var ex *ExhaustedError
	if !errors.As(err, &ex) || len(ex.Skipped) != 1 || ex.Skipped[0] != "b:5000" {
		t.Fatalf("canceled walk = %v; want b:5000 skipped", err)
	}
}
