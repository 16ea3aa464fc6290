package raft

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestRemoveTempSnapshots(t *testing.T) {
	tests := []struct {
		name     string
		dirs     []string // under snapshots/
		files    []string // under snapshots/
		noSnaps  bool     // no snapshots/ at all
		wantGone []string
		wantKept []string
	}{
		{name: "fresh data dir", noSnaps: true},
		{name: "only complete snapshots", dirs: []string{"2-10-1", "3-20-2"}, wantKept: []string{"2-10-1", "3-20-2"}},
		{
			name:     "interrupted snapshots next to complete ones",
			dirs:     []string{"2-10-1", "3-20-2.tmp", "4-30-3.tmp"},
			files:    []string{"notes.tmp"},
			wantGone: []string{"3-20-2.tmp", "4-30-3.tmp"},
			wantKept: []string{"2-10-1", "notes.tmp"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			snaps := filepath.Join(data, "snapshots")
			if !tc.noSnaps {
				for _, d := range tc.dirs {
					if err := os.MkdirAll(filepath.Join(snaps, d), 0o750); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(snaps, d, "state.bin"), []byte("x"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				for _, f := range tc.files {
					if err := os.WriteFile(filepath.Join(snaps, f), []byte("x"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			removed, err := removeTempSnapshots(data, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, g := range tc.wantGone {
				want = append(want, filepath.Join(snaps, g))
				if _, err := os.Stat(filepath.Join(snaps, g)); !os.IsNotExist(err) {
					t.Errorf("%s still there (stat: %v)", g, err)
				}
			}
			if !slices.Equal(removed, want) {
				t.Errorf("removed %v, want %v", removed, want)
			}
			for _, k := range tc.wantKept {
				if _, err := os.Stat(filepath.Join(snaps, k)); err != nil {
					t.Errorf("%s was removed: %v", k, err)
				}
			}
		})
	}
}
