package plansock

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nobody is the uid the "other local user" of these tests runs as.
const nobody = 65534

// asOtherUser starts this test binary as uid nobody running
// TestOtherUserHelper in mode (hold: open n connections to path and keep
// them; serve: listen on path), and waits for it to be ready. Needs root.
func asOtherUser(t *testing.T, mode, path string, n int) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	// The test binary may sit in a directory only root can enter.
	dir, err := os.MkdirTemp("", "gpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "plansock.test")
	if err := os.WriteFile(exe, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestOtherUserHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GIN_PLANSOCK_HELPER="+mode, "GIN_PLANSOCK_PATH="+path, "GIN_PLANSOCK_N="+strconv.Itoa(n))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if sc.Text() == "READY" {
			return
		}
	}
	t.Fatalf("helper as uid %d not ready", nobody)
}

// TestOtherUserHelper is the other local user's process (started by
// asOtherUser only).
func TestOtherUserHelper(t *testing.T) {
	mode, path := os.Getenv("GIN_PLANSOCK_HELPER"), os.Getenv("GIN_PLANSOCK_PATH")
	if mode == "" {
		t.Skip("started by asOtherUser only")
	}
	n, _ := strconv.Atoi(os.Getenv("GIN_PLANSOCK_N"))
	switch mode {
	case "hold":
		var held []net.Conn
		for range n {
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
		}
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
	case "ask":
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := Fetch(ctx, path, Request{JobID: "1", Nodes: "n[1-2]", GPUsPerNode: 8}); err != nil {
			t.Fatal(err)
		}
	case "serve":
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				// Pose as an agent: answer every request with a "plan".
				_, _ = ReadRequest(c)
				b, _ := AppendResponse(nil, Response{Status: StatusOK, Hash: "forged", Body: []byte("forged")})
				_, _ = c.Write(b)
				_ = c.Close()
			}
		}()
	}
	fmt.Println("READY")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// Another local user holding connections cannot take the slots a job's
// ranks need: past MaxConnsPerUID, that user's connections are closed and
// everyone else is still served.
func TestOneUserCannotHoldEverySlot(t *testing.T) {
	path := sockPath(t)
	serve(t, path, &fakeSource{plans: map[string][]byte{"1": []byte("p")}})
	if err := os.Chmod(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(filepath.Dir(path)), 0o755); err != nil {
		t.Fatal(err)
	}
	// More than the server's connection slots: without the per-user cap
	// they would all wait connTimeout for a request, and so would a rank.
	hold := maxConns + MaxConnsPerUID
	asOtherUser(t, "hold", path, hold)
	ctx, cancel := context.WithTimeout(context.Background(), connTimeout/2)
	defer cancel()
	for i := range 8 {
		if r, err := Fetch(ctx, path, Request{JobID: "1"}); err != nil || r.Status != StatusOK {
			t.Fatalf("request %d while another user holds %d connections: %+v, %v", i, hold, r, err)
		}
	}
}

// A socket served by another (non-root) user is not trusted: a local user
// cannot pose as the agent.
func TestAnotherUsersSocketIsNotTrusted(t *testing.T) {
	dir, err := os.MkdirTemp("", "gpi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "agent.sock")
	asOtherUser(t, "serve", path, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Fetch(ctx, path, Request{JobID: "1"})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("served by uid %d", nobody)) || !strings.Contains(err.Error(), "not trusted") {
		t.Fatalf("Fetch from another user's socket = %v", err)
	}
}

// A local user other than root cannot have a plan created through the
// agent (for another user's job, on nodes of its choosing): the node list
// of its request is dropped; root's (the prolog's) is kept.
func TestOnlyRootMayHaveAPlanCreated(t *testing.T) {
	path := sockPath(t)
	src := &fakeSource{plans: map[string][]byte{"1": []byte("p")}}
	serve(t, path, src)
	for _, d := range []string{filepath.Dir(path), filepath.Dir(filepath.Dir(path))} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	asOtherUser(t, "ask", path, 0)
	src.mu.Lock()
	got := src.last
	src.mu.Unlock()
	if got.JobID != "1" || got.Nodes != "" || got.GPUsPerNode != 0 {
		t.Fatalf("another user's request reached the store as %+v", got)
	}
	if _, err := Fetch(context.Background(), path, Request{JobID: "1", Nodes: "n[1-2]", GPUsPerNode: 8}); err != nil {
		t.Fatal(err)
	}
	src.mu.Lock()
	got = src.last
	src.mu.Unlock()
	if got.Nodes != "n[1-2]" || got.GPUsPerNode != 8 {
		t.Fatalf("root's request reached the store as %+v", got)
	}
}
