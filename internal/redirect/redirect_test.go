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

// answer is how a fake master answers: an error (nil: success) and a hint.
type answer struct {
	err  error
	hint string
}

func notLeader(t *testing.T) error {
	st, err := status.New(codes.FailedPrecondition, "not the leader").WithDetails(apierr.NotLeaderInfo("m9"))
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestDo(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "connection refused")
	refused := status.Error(codes.InvalidArgument, "nodes: unknown node n9")
	stale := status.Error(codes.FailedPrecondition, "stale generation") // no NOT_LEADER detail: a refusal
	tests := []struct {
		name     string
		masters  []string
		opts     Options
		answers  map[string]answer
		wantAddr string
		wantCode codes.Code
		wantAsk  string // the masters asked, in order
	}{
		{"the first answers", []string{"a:5000", "b:5000"}, Options{FollowHints: true},
			map[string]answer{}, "a:5000", codes.OK, "a:5000"},
		{"a follower names a leader missing from the list", []string{"a:5000", "b:5000"}, Options{FollowHints: true},
			map[string]answer{"a:5000": {notLeader(t), "leader"}}, "leader:5000", codes.OK, "a:5000 leader:5000"},
		{"hints not followed without FollowHints", []string{"a:5000", "b:5000"}, Options{},
			map[string]answer{"a:5000": {notLeader(t), "leader"}}, "b:5000", codes.OK, "a:5000 b:5000"},
		{"a malformed hint is ignored", []string{"a:5000", "b:5000"}, Options{FollowHints: true},
			map[string]answer{"a:5000": {notLeader(t), "[::1"}}, "b:5000", codes.OK, "a:5000 b:5000"},
		{"unreachable, then the next", []string{"a:5000", "b:5000"}, Options{FollowHints: true},
			map[string]answer{"a:5000": {err: unavailable}}, "b:5000", codes.OK, "a:5000 b:5000"},
		{"a refusal is final", []string{"a:5000", "b:5000"}, Options{FollowHints: true},
			map[string]answer{"a:5000": {err: refused}}, "", codes.InvalidArgument, "a:5000"},
		{"a stale generation is a refusal, not a redirect", []string{"a:5000", "b:5000"}, Options{FollowHints: true},
			map[string]answer{"a:5000": {err: stale}}, "", codes.FailedPrecondition, "a:5000"},
		{"masters naming each other are each asked once", []string{"a:5000", "b:5000"}, Options{FollowHints: true},
			map[string]answer{"a:5000": {notLeader(t), "b:5000"}, "b:5000": {notLeader(t), "a:5000"}}, "", codes.Unavailable, "a:5000 b:5000"},
		{"MaxAttempts 1: failover off", []string{"a:5000", "b:5000"}, Options{FollowHints: true, MaxAttempts: 1},
			map[string]answer{"a:5000": {notLeader(t), "b:5000"}}, "", codes.Unavailable, "a:5000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var asked []string
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			addr, err := Do(ctx, tc.masters, tc.opts, func(_ context.Context, addr string) (string, error) {
				asked = append(asked, addr)
				a := tc.answers[addr]
				return a.hint, a.err
			})
			if addr != tc.wantAddr || status.Code(err) != tc.wantCode {
				t.Fatalf("Do = %q, %v; want %q, code %v", addr, err, tc.wantAddr, tc.wantCode)
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
	_, err := Do(ctx, []string{"a:5000", "b:5000"}, Options{}, func(_ context.Context, addr string) (string, error) {
		if addr == "a:5000" {
			return "", status.Error(codes.Unavailable, "down")
		}
		return "", refusal
	})
	var re *RefusedError
	if !errors.As(err, &re) || !errors.Is(err, refusal) || status.Convert(err).Message() != "job j1 not found" {
		t.Fatalf("refusal = %#v; want a RefusedError unwrapping to the master's status", err)
	}
	if want := "a:5000: Unavailable: down; b:5000: NotFound: job j1 not found"; err.Error() != want {
		t.Fatalf("refusal text %q, want %q", err.Error(), want)
	}

	_, err = Do(ctx, []string{"a:5000"}, Options{}, func(context.Context, string) (string, error) {
		return "", status.Error(codes.Unavailable, "down")
	})
	var ex *ExhaustedError
	if !errors.As(err, &ex) || status.Code(err) != codes.Unavailable || err.Error() != "no master answered (a:5000: Unavailable: down)" {
		t.Fatalf("exhausted = %v", err)
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
	_, err := Do(ctx, []string{"a:5000", "b:5000", "c:5000"}, Options{ShareDeadline: true}, func(actx context.Context, _ string) (string, error) {
		dl, ok := actx.Deadline()
		if !ok {
			t.Fatal("attempt without a deadline")
		}
		shares = append(shares, time.Until(dl))
		return "", status.Error(codes.DeadlineExceeded, "slow")
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
	_, err = Do(cctx, []string{"a:5000", "b:5000"}, Options{}, func(context.Context, string) (string, error) {
		ccancel()
		return "", status.Error(codes.Unavailable, "down")
	})
	var ex *ExhaustedError
	if !errors.As(err, &ex) || len(ex.Skipped) != 1 || ex.Skipped[0] != "b:5000" {
		t.Fatalf("canceled walk = %v; want b:5000 skipped", err)
	}
}
