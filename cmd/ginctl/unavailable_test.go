package main

import (
	"strings"
	"testing"
)

// TestUnavailableSaysWhy: a failed dial is explained by its cause; a
// certificate of another CA is said to be one, not "is gin-master running?".
func TestUnavailableSaysWhy(t *testing.T) {
	tests := []struct {
		name, msg, want, not string
	}{
		{"master's certificate of another CA", `no master answered (m1:5000: connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority")`,
			"the certificates are of another CA", "is gin-master running"},
		{"client's certificate of another CA", `no master answered (m1:5000: connection error: desc = "transport: authentication handshake failed: remote error: tls: unknown certificate authority")`,
			"the certificates are of another CA", "is gin-master running"},
		{"nothing listens", `no master answered (127.0.0.1:5000: connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:5000: connect: connection refused")`,
			"is gin-master running", "another CA"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := unavailable(tc.msg)
			if !strings.Contains(got, tc.want) || strings.Contains(got, tc.not) {
				t.Errorf("unavailable(...) = %q, want %q and not %q", got, tc.want, tc.not)
			}
		})
	}
}

// TestCatchingUp: a restarted follower's empty or lagging indexes come with
// a hint; a leader's and an up-to-date follower's do not.
func TestCatchingUp(t *testing.T) {
	tests := []struct {
		state           string
		commit, applied uint64
		want            string
	}{
		{"Follower", 0, 0, "heard from no leader"},
		{"Candidate", 0, 0, "heard from no leader"},
		{"Follower", 120, 80, "40 committed entries not applied yet"},
		{"Follower", 120, 120, ""},
		{"Leader", 0, 0, ""},
	}
	for _, tc := range tests {
		got := catchingUp(tc.state, tc.commit, tc.applied)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("catchingUp(%s, %d, %d) = %q, want %q", tc.state, tc.commit, tc.applied, got, tc.want)
		}
	}
}
