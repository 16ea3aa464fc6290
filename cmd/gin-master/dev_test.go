package main

import (
	"errors"
	"path/filepath"
	"testing"
)

// TestGinctlCommand: the dev banner names a ginctl that runs as printed.
func TestGinctlCommand(t *testing.T) {
	notFound := func(string) (string, error) { return "", errors.New("not found") }
	found := func(string) (string, error) { return "/usr/bin/ginctl", nil }
	repo := filepath.FromSlash("/src/gin")
	tests := []struct {
		name     string
		exeDir   string
		cwd      string
		lookPath func(string) (string, error)
		files    []string
		want     string
	}{
		{"make dev: ./bin/ginctl beside gin-master", repo + "/bin", repo, found, []string{repo + "/bin/ginctl", repo + "/cmd/ginctl"}, "./bin/ginctl"},
		{"installed elsewhere, run from another directory", "/opt/gin/bin", "/home/u", notFound, []string{"/opt/gin/bin/ginctl"}, "/opt/gin/bin/ginctl"},
		{"go run: no ginctl beside it, one on PATH", "/tmp/go-build1/exe", repo, found, []string{repo + "/cmd/ginctl"}, "ginctl"},
		{"go run in a checkout, no ginctl anywhere", "/tmp/go-build1/exe", repo, notFound, []string{repo + "/cmd/ginctl"}, "go run ./cmd/ginctl"},
		{"nothing known", "", "", notFound, nil, "ginctl"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			have := map[string]bool{}
			for _, f := range tc.files {
				have[filepath.FromSlash(f)] = true
			}
			got := ginctlCommand(ginctlPlaces{exeDir: filepath.FromSlash(tc.exeDir), cwd: tc.cwd, lookPath: tc.lookPath,
				exists: func(p string) bool { return have[p] }})
			if got != tc.want {
				t.Errorf("ginctlCommand = %q, want %q", got, tc.want)
			}
		})
	}
}
