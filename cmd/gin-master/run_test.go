package main

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/gin-topology/gin/internal/master"
	ginraft "github.com/gin-topology/gin/internal/raft"
)

// TestExitStatus: the exit status of each kind of error, in the order of
// precedence the docs' table gives (docs/OPERATIONS.md, Exit status).
func TestExitStatus(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"none", nil, 0},
		{"any other error", errors.New("boom"), 1},
		{"usage", usageError{errors.New("--x: bad")}, exitUsage},
		{"positional argument", errors.New(`unknown command "serve" for "gin-master"`), exitUsage},
		{"config", configError{errors.New("no TLS certificates")}, exitConfig},
		{"log store", fmt.Errorf("serve: %w", ginraft.ErrLogStoreFailed), exitLogStore},
		{"data dir full at start", fmt.Errorf("open: %w", syscall.ENOSPC), exitLogStore},
		{"address in use", fmt.Errorf("listen: %w", syscall.EADDRINUSE), 1},
		{"compacted log, no readable snapshot", fmt.Errorf("raft: data dir /d: %w: the log starts at index 9", ginraft.ErrIncompleteState), exitDataDir},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var errb bytes.Buffer
			if got := exitStatus(tc.err, &errb); got != tc.want {
				t.Errorf("exitStatus(%v) = %d, want %d", tc.err, got, tc.want)
			}
			if (tc.err == nil) != (errb.Len() == 0) {
				t.Errorf("stderr %q for error %v", errb.String(), tc.err)
			}
		})
	}
}

// TestBootstrapWanted: --bootstrap-expect 1 bootstraps, a larger one or
// --join forms or joins a cluster instead, else --bootstrap decides.
func TestBootstrapWanted(t *testing.T) {
	tests := []struct {
		bootstrap bool
		expect    int
		join      []string
		want      bool
	}{
		{true, 0, nil, true},
		{false, 0, nil, false},
		{true, 3, nil, false},
		{true, 0, []string{"m2:5000"}, false},
		{false, 1, []string{"m2:5000"}, true},
		{false, 1, nil, true},
	}
	for _, tc := range tests {
		o := options{bootstrap: tc.bootstrap, cfg: master.Config{BootstrapExpect: tc.expect}}
		if got := bootstrapWanted(o, tc.join); got != tc.want {
			t.Errorf("bootstrap %v, expect %d, join %v: %v, want %v", tc.bootstrap, tc.expect, tc.join, got, tc.want)
		}
	}
}
