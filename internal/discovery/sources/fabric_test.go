package sources

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// fakeCommand writes an executable script that prints a file.
func fakeCommand(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ibnetdiscover")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestIBNetDiscoverScanner(t *testing.T) {
	fixture, err := filepath.Abs("../fabricscan/testdata/ibnetdiscover/fat-tree-123-hosts.out")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		command string
		wantErr error
		ok      bool
	}{
		{"real dump", fakeCommand(t, "cat "+fixture), nil, true},
		{"not installed", filepath.Join(t.TempDir(), "nope"), ErrNoIBNetDiscover, false},
		{"command fails", fakeCommand(t, "echo 'ibwarn: no such device' >&2; exit 3"), nil, false},
		{"garbage output", fakeCommand(t, "echo 'Switch garbage'"), nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := IBNetDiscover(tc.command)(context.Background())
			if tc.ok {
				if err != nil || len(f.GetSwitches()) == 0 {
					t.Fatalf("scan: %v (%d switches)", err, len(f.GetSwitches()))
				}
				return
			}
			if err == nil {
				t.Fatal("scan succeeded, want an error")
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}
