package apierr

import (
	"errors"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestIsNotLeader(t *testing.T) {
	redirect, err := status.New(codes.FailedPrecondition, "not the leader; leader is m2").WithDetails(NotLeaderInfo("m2"))
	if err != nil {
		t.Fatal(err)
	}
	wrongCode, _ := status.New(codes.Unavailable, "x").WithDetails(NotLeaderInfo("m2"))
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"a follower's redirect", redirect.Err(), true},
		{"a stale generation is a refusal", status.Error(codes.FailedPrecondition, "stale generation"), false},
		{"the reason on another code", wrongCode.Err(), false},
		{"not a status", errors.New("not the leader"), false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsNotLeader(tc.err); got != tc.want {
				t.Fatalf("IsNotLeader = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLeaderHint(t *testing.T) {
	tests := []struct {
		name string
		mds  []metadata.MD
		want string
	}{
		{"none", nil, ""},
		{"in the trailer", []metadata.MD{nil, metadata.Pairs(LeaderHintKey, "m2:5000")}, "m2:5000"},
		{"the header first", []metadata.MD{metadata.Pairs(LeaderHintKey, "m1:5000"), metadata.Pairs(LeaderHintKey, "m2:5000")}, "m1:5000"},
		{"an empty value is no hint", []metadata.MD{metadata.Pairs(LeaderHintKey, ""), metadata.Pairs(LeaderHintKey, "m3:5000")}, "m3:5000"},
		{"other keys", []metadata.MD{metadata.Pairs("gin-leader", "m2:5000")}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := LeaderHint(tc.mds...); got != tc.want {
				t.Fatalf("LeaderHint = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestIsDataDirFull(t *testing.T) {
	full, err := status.New(codes.ResourceExhausted, "data dir /d is full").WithDetails(DataDirFullInfo("/d"))
	if err != nil {
		t.Fatal(err)
	}
	wrongCode, _ := status.New(codes.Unavailable, "x").WithDetails(DataDirFullInfo("/d"))
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"a full data dir", full.Err(), true},
		{"a cap is another refusal", status.Error(codes.ResourceExhausted, "--max-nodes reached"), false},
		{"the reason on another code", wrongCode.Err(), false},
		{"not a status", errors.New("data dir /d is full"), false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsDataDirFull(tc.err); got != tc.want {
				t.Fatalf("IsDataDirFull = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReason(t *testing.T) {
	withInfo := func(code codes.Code, reason, domain string) error {
		st, err := status.New(code, "x").WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: domain})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	plan, _ := status.New(codes.ResourceExhausted, "x").WithDetails(Info(ReasonPlanLimit, nil))
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"a plan limit", plan.Err(), ReasonPlanLimit},
		{"a full data dir", withInfo(codes.ResourceExhausted, ReasonDataDirFull, Domain), ReasonDataDirFull},
		{"another domain's reason", withInfo(codes.ResourceExhausted, ReasonPlanLimit, "example.org"), ""},
		{"no detail", status.Error(codes.ResourceExhausted, "grpc: received message larger than max"), ""},
		{"not a status", errors.New("x"), ""},
		{"nil", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Reason(tc.err); got != tc.want {
				t.Fatalf("Reason = %q, want %q", got, tc.want)
			}
		})
	}
}
