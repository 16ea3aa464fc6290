package raft

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/state"
	"github.com/gin-topology/gin/internal/testkit"
)

// TestBadSnapshotWithTheLogPresentStartsFromTheLog: on a real data dir a
// snapshot is taken while the log keeps every entry (trailing logs above
// the writes); a byte of its state.bin is changed (its checksum fails);
// the restart sets the snapshot aside under snapshots-corrupt/ and
// rebuilds the whole state from the log instead of refusing to start.
func TestBadSnapshotWithTheLogPresentStartsFromTheLog(t *testing.T) {
	dir := t.TempDir()
	tun := Tuning{SnapshotThreshold: 16, SnapshotInterval: 100 * time.Millisecond, TrailingLogs: 10240}
	open := func() (*Node, *state.Store, error) {
		st := state.New(nil)
		n, err := Open(Config{ID: "m1", Bind: "127.0.0.1:0", DataDir: dir, Bootstrap: true, Fast: true, Tuning: tun}, st)
		return n, st, err
	}
	n, _, err := open()
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "m1 leads", n.IsLeader)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const writes = 40
	for i := range writes {
		if _, err := n.Apply(ctx, put(fmt.Sprintf("s%02d", i), 1, "h")); err != nil {
			t.Fatal(err)
		}
	}
	// complete are the finished snapshots' state files (not the .tmp
	// directory of one being written).
	complete := func() []string {
		m, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "state.bin"))
		var out []string
		for _, p := range m {
			if !strings.HasSuffix(filepath.Dir(p), ".tmp") {
				out = append(out, p)
			}
		}
		return out
	}
	testkit.WaitFor(t, 30*time.Second, "a snapshot", func() bool { return len(complete()) > 0 })
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	_ = n.CloseTransport()
	bad := complete()
	for _, p := range bad { // every snapshot fails its checksum
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0xff
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	n, st, err := open()
	if err != nil {
		t.Fatalf("restart with a bad snapshot and the whole log: %v", err)
	}
	defer func() { _ = n.Shutdown(); _ = n.CloseTransport() }()
	testkit.WaitFor(t, 30*time.Second, "the state rebuilt from the log", func() bool { return len(st.View().NodeNames()) == writes })
	if set, _ := filepath.Glob(filepath.Join(dir, corruptSnapshotsDir, "*", "state.bin")); len(set) != len(bad) {
		t.Fatalf("the bad snapshot is not under %s: %v", corruptSnapshotsDir, set)
	}
}
