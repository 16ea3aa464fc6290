package apierr

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestRetryHint(t *testing.T) {
	withHint := func(d time.Duration) error {
		st, err := status.New(codes.ResourceExhausted, "busy").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Errorf("session: %w", st.Err())
	}
	tests := []struct {
		name string
		err  error
		want time.Duration
	}{
		{"hint", withHint(2 * time.Second), 2 * time.Second},
		{"negative", withHint(-time.Second), 0},
		{"capped", withHint(time.Hour), maxRetryHint},
		{"no details", status.Error(codes.ResourceExhausted, "busy"), 0},
		{"not a status", errors.New("broken pipe"), 0},
		{"nil", nil, 0},
	}
	for _, tc := range tests {
		if got := RetryHint(tc.err); got != tc.want {
			t.Errorf("%s: RetryHint = %s, want %s", tc.name, got, tc.want)
		}
	}
}
