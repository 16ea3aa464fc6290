package raft

import (
	"bytes"
	"errors"
	"fmt"
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

// TestRaftLoggerFoldsGuardRefusals: the transport's decode ERROR is left
// out when its error is the guard's refusal (the guard logged it, rate
// limited), wrapped or not; every other decode error is kept.
func TestRaftLoggerFoldsGuardRefusals(t *testing.T) {
	refusal := &rpcRefusal{rpc: "AppendEntries", reason: refusedNotMember, msg: "raft AppendEntries refused: not a member"}
	tests := []struct {
		name string
		args []any
		kept bool
	}{
		{"guard refusal", []any{"error", refusal}, false},
		{"wrapped guard refusal", []any{"error", fmt.Errorf("decode: %w", refusal)}, false},
		{"other decode error", []any{"error", errors.New("msgpack: invalid code")}, true},
		{"no error", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			raftLogger(hclog.Warn, &b).Error("failed to decode incoming command", tc.args...)
			if got := strings.Contains(b.String(), "failed to decode incoming command"); got != tc.kept {
				t.Errorf("logged: %v, want %v (%q)", got, tc.kept, b.String())
			}
		})
	}
}
