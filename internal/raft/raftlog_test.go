package raft

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestRaftLoggerLeavesOutTheFirstBootWarning: the fresh master's "no known
// peers" is not logged; raft's other warnings are.
func TestRaftLoggerLeavesOutTheFirstBootWarning(t *testing.T) {
	tests := []struct {
		msg  string
		kept bool
	}{
		{"no known peers, aborting election", false},
		{"not part of stable configuration, aborting election", true},
		{"heartbeat timeout reached, starting election", true},
		{"failed to contact", true},
	}
	for _, tc := range tests {
		var b bytes.Buffer
		raftLogger(hclog.Warn, &b).Warn(tc.msg)
		if got := strings.Contains(b.String(), tc.msg); got != tc.kept {
			t.Errorf("%q logged: %v, want %v (%q)", tc.msg, got, tc.kept, b.String())
		}
	}
}
