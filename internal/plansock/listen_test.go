package plansock

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListenFollowsNoPath: the socket is made 0666 where no other user
// can reach it and renamed into place. A racer that swaps path for a
// symlink to a private file between the bind and the chmod (what the red
// team did to a socket in a directory it could write to) changes nothing
// of that file: the rename replaces the link, and the socket serves.
func TestListenFollowsNoPath(t *testing.T) {
	path := sockPath(t)
	secret := filepath.Join(filepath.Dir(filepath.Dir(path)), "secret")
	if err := os.WriteFile(secret, []byte("root's"), 0o600); err != nil {
		t.Fatal(err)
	}
	raced := false
	s, err := listen(path, &fakeSource{plans: map[string][]byte{"1": []byte("p")}}, nil, func() {
		raced = true
		_ = os.Remove(path)
		if err := os.Symlink(secret, path); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !raced {
		t.Fatal("the racer never ran")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	if st, err := os.Stat(secret); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the link's target after Listen: %v, %v; want mode 0600 untouched", st.Mode(), err)
	}
	st, err := os.Lstat(path)
	if err != nil || st.Mode().Type() != os.ModeSocket || st.Mode().Perm() != 0o666 {
		t.Fatalf("at %s: %v, %v; want the socket, mode 0666", path, st.Mode(), err)
	}
	if r, err := Fetch(ctx, path, Request{JobID: "1"}); err != nil || r.Status != StatusOK {
		t.Fatalf("%+v, %v", r, err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".gs*")); len(left) != 0 {
		t.Fatalf("private directories left: %v", left)
	}
}

// TestListenRefusesADirectoryOthersControl: the socket's directory is
// checked as the plan directory is, and a refusal creates nothing.
func TestListenRefusesADirectoryOthersControl(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"writable by others", func(t *testing.T, dir string) {
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		}, "writable by others"},
		{"group-writable", func(t *testing.T, dir string) {
			if err := os.Chmod(dir, 0o775); err != nil {
				t.Fatal(err)
			}
		}, "writable by others"},
		{"owned by another user", func(t *testing.T, dir string) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give the directory to another user")
			}
			if err := os.Chown(dir, nobody, nobody); err != nil {
				t.Fatal(err)
			}
		}, "owned by uid 65534"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := sockPath(t)
			dir := filepath.Dir(path)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, dir)
			if _, err := Listen(path, &fakeSource{}, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Listen = %v, want an error saying %q", err, tc.want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("a refused Listen left %v", ents)
			}
		})
	}
}
