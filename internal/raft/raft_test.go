package raft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/state"
	"github.com/gin-topology/gin/internal/testkit"
)

func inv(name string, gen uint64) *ginv1.NodeInventory {
	return &ginv1.NodeInventory{NodeName: name, Generation: gen, Host: &ginv1.Host{MachineId: "m-" + name},
		Gpus: []*ginv1.Gpu{{Uuid: "GPU-" + name, Index: 0, Model: "m"}}}
}

func put(name string, gen uint64, hash string) *statev1.Command {
	return &statev1.Command{Command: &statev1.Command_PutInventory{PutInventory: &statev1.PutInventory{Inventory: inv(name, gen), ContentHash: hash}}}
}

func sns(node string, st ginv1.NodeState) *statev1.SetNodeState {
	return &statev1.SetNodeState{NodeName: node, State: st}
}

func states(changes ...*statev1.SetNodeState) *statev1.Command {
	return &statev1.Command{Command: &statev1.Command_SetNodeStates{SetNodeStates: &statev1.SetNodeStates{Changes: changes}}}
}

func entry(t *testing.T, index uint64, cmd *statev1.Command) *hraft.Log {
	t.Helper()
	b, err := proto.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return &hraft.Log{Index: index, Type: hraft.LogCommand, Data: b}
}

func TestFSMApplyIsIdempotentAndOrdered(t *testing.T) {
	tests := []struct {
		name    string
		cmd     *statev1.Command
		wantErr error
		changed bool
	}{
		{"first inventory", put("n1", 1, "h1"), nil, true},
		{"same entry again", put("n1", 1, "h1"), nil, false},
		{"generation reused", put("n1", 1, "other"), state.ErrGenerationReused, false},
		{"next generation", put("n1", 2, "h2"), nil, true},
		{"stale generation", put("n1", 1, "h1"), state.ErrStaleGeneration, false},
		{"down", &statev1.Command{Command: &statev1.Command_SetNodeState{SetNodeState: &statev1.SetNodeState{NodeName: "n1", State: ginv1.NodeState_NODE_STATE_DOWN}}}, nil, true},
		{"down again", &statev1.Command{Command: &statev1.Command_SetNodeState{SetNodeState: &statev1.SetNodeState{NodeName: "n1", State: ginv1.NodeState_NODE_STATE_DOWN}}}, nil, false},
		{"state of unknown node", &statev1.Command{Command: &statev1.Command_SetNodeState{SetNodeState: &statev1.SetNodeState{NodeName: "zz", State: ginv1.NodeState_NODE_STATE_DOWN}}}, state.ErrUnknownNode, false},
		{"states: up, an unknown node skipped", states(sns("n1", ginv1.NodeState_NODE_STATE_UP), sns("zz", ginv1.NodeState_NODE_STATE_DOWN)), state.ErrUnknownNode, true},
		{"states: down", states(sns("n1", ginv1.NodeState_NODE_STATE_DOWN)), nil, true},
		{"states: down again", states(sns("n1", ginv1.NodeState_NODE_STATE_DOWN)), nil, false},
		{"unknown command (newer version)", &statev1.Command{}, ErrUnknownCommand, false},
	}
	store := state.New(nil)
	f := NewFSM(store, nil)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idx := uint64(i + 1)
			resp, ok := f.Apply(entry(t, idx, tc.cmd)).(*ApplyResponse)
			if !ok {
				t.Fatal("Apply did not return *ApplyResponse")
			}
			if !errors.Is(resp.Err, tc.wantErr) || (tc.wantErr == nil && resp.Err != nil) {
				t.Fatalf("err = %v, want %v", resp.Err, tc.wantErr)
			}
			if resp.Result.Changed != tc.changed {
				t.Fatalf("changed = %v, want %v", resp.Result.Changed, tc.changed)
			}
			if store.Index() != idx {
				t.Fatalf("store index = %d, want %d", store.Index(), idx)
			}
		})
	}
	rec, _ := store.Node("n1")
	if rec.GetInventory().GetGeneration() != 2 || rec.GetState() != ginv1.NodeState_NODE_STATE_DOWN {
		t.Fatalf("record = %v", rec)
	}
}

func TestFSMGarbageEntryIsSkipped(t *testing.T) {
	store := state.New(nil)
	f := NewFSM(store, nil)
	resp := f.Apply(&hraft.Log{Index: 7, Type: hraft.LogCommand, Data: []byte{0xff, 0xff, 0xff}}).(*ApplyResponse)
	if resp.Err == nil || store.Index() != 7 || store.View().Len() != 0 {
		t.Fatalf("garbage entry: err %v, index %d, nodes %d", resp.Err, store.Index(), store.View().Len())
	}
}

func TestSnapshotRoundTripAndCorruption(t *testing.T) {
	store := state.New(nil)
	f := NewFSM(store, nil)
	for i, n := range []string{"a", "b", "c"} {
		f.Apply(entry(t, uint64(i+1), put(n, 1, "h-"+n)))
	}
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, store.Capture()); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()

	restored := state.New(nil)
	if err := NewFSM(restored, nil).Restore(nopCloser{bytes.NewReader(good)}); err != nil {
		t.Fatal(err)
	}
	if got := restored.View().NodeNames(); len(got) != 3 || !proto.Equal(restored.Snapshot(), store.Snapshot()) {
		t.Fatalf("restored nodes %v differ from the original", got)
	}

	corruptions := map[string][]byte{
		"truncated": good[:len(good)-3],
		"bad magic": append([]byte("XXXXXXXX"), good[8:]...),
		"flipped":   flip(good, len(good)-1),
		"empty":     {},
		"huge length": func() []byte {
			b := bytes.Clone(good)
			b[8] = 0x7f
			return b
		}(),
	}
	for name, b := range corruptions {
		t.Run(name, func(t *testing.T) {
			s := state.New(nil)
			err := NewFSM(s, nil).Restore(nopCloser{bytes.NewReader(b)})
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("err = %v, want ErrCorruptSnapshot", err)
			}
			if s.View().Len() != 0 {
				t.Fatal("a corrupt snapshot changed the state")
			}
		})
	}
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x01
	return c
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// A node restarted from its data directory has every committed write.
func TestNodeRestartKeepsCommittedWrites(t *testing.T) {
	dir := t.TempDir()
	open := func() (*Node, *state.Store) {
		t.Helper()
		st := state.New(nil)
		n, err := Open(Config{ID: "m1", Bind: "127.0.0.1:0", DataDir: dir, Bootstrap: true, Fast: true}, st)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for !n.IsLeader() {
			select {
			case <-ctx.Done():
				t.Fatal("no leader")
			case <-time.After(10 * time.Millisecond):
			}
		}
		return n, st
	}
	n, _ := open()
	ctx := context.Background()
	for i, name := range []string{"x1", "x2"} {
		res, err := n.Apply(ctx, put(name, 1, "h"))
		if err != nil || !res.Changed {
			t.Fatalf("apply %d: %v %v", i, res, err)
		}
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	n2, st2 := open()
	defer n2.Shutdown()
	if err := n2.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	if got := st2.View().NodeNames(); len(got) != 2 {
		t.Fatalf("after restart nodes = %v, want x1 x2", got)
	}
}

func TestTuningValidate(t *testing.T) {
	tests := []struct {
		name string
		t    Tuning
		ok   bool
	}{
		{"zero keeps defaults", Tuning{}, true},
		{"tuned for fast failover", Tuning{HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond, LeaderLeaseTimeout: 150 * time.Millisecond}, true},
		{"heartbeat below the floor", Tuning{HeartbeatTimeout: time.Millisecond}, false},
		{"election timeout above the ceiling", Tuning{ElectionTimeout: time.Hour}, false},
		{"snapshot interval too short", Tuning{SnapshotInterval: time.Millisecond}, false},
		{"absurd trailing logs", Tuning{TrailingLogs: 1 << 40}, false},
		{"snapshot bytes below 64 KiB", Tuning{SnapshotBytes: 1000}, false},
		{"snapshot bytes of 1 GiB", Tuning{SnapshotBytes: 1 << 30}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.t.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	// hashicorp/raft's own rule (lease <= heartbeat) is reported by Open,
	// before it writes anything into the data dir.
	dir := t.TempDir()
	_, err := Open(Config{ID: "m1", Bind: "127.0.0.1:0", DataDir: dir, Bootstrap: true,
		Tuning: Tuning{HeartbeatTimeout: 100 * time.Millisecond, LeaderLeaseTimeout: 200 * time.Millisecond}}, state.New(nil))
	if err == nil {
		t.Fatal("Open accepted a leader lease longer than the heartbeat timeout")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a refused configuration left %d entries in the data dir", len(entries))
	}
}

// A small snapshot threshold makes the node snapshot and compact its log;
// a restart restores the snapshot plus the trailing entries.
func TestSnapshotThresholdTakesSnapshotsAndRestartRestores(t *testing.T) {
	dir := t.TempDir()
	tun := Tuning{SnapshotThreshold: 16, SnapshotInterval: 100 * time.Millisecond, TrailingLogs: 4}
	open := func() (*Node, *state.Store) {
		t.Helper()
		st := state.New(nil)
		n, err := Open(Config{ID: "m1", Bind: "127.0.0.1:0", DataDir: dir, Bootstrap: true, Fast: true, Tuning: tun}, st)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
		return n, st
	}
	n, _ := open()
	ctx := context.Background()
	const writes = 40
	for i := range writes {
		if _, err := n.Apply(ctx, put(fmt.Sprintf("s%02d", i), 1, "h")); err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
	}
	testkit.WaitFor(t, 30*time.Second, "a snapshot (threshold 16 entries, 40 writes)", func() bool {
		snaps, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "meta.json"))
		return len(snaps) > 0
	})
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	// A snapshot interrupted mid-write (the master killed, the disk full)
	// left its temporary directory: the restart removes it and keeps the
	// complete snapshots.
	tmp := filepath.Join(dir, "snapshots", "3-99-1700000000000.tmp")
	if err := os.MkdirAll(tmp, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "state.bin"), []byte("half a snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	n2, st2 := open()
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the interrupted snapshot %s is still there after a restart (stat: %v)", tmp, err)
	}
	if err := n2.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	if got := st2.View().NodeNames(); len(got) != writes {
		t.Fatalf("after restart from a snapshot: %d nodes, want %d", len(got), writes)
	}
	if err := n2.Shutdown(); err != nil {
		t.Fatal(err)
	}

	// The log is compacted now: without a good snapshot the state would be
	// incomplete, and Open must say so instead of starting.
	damage := []struct {
		name string
		do   func(t *testing.T, dir string)
	}{
		{"snapshots removed", func(t *testing.T, dir string) {
			if err := os.RemoveAll(filepath.Join(dir, "snapshots")); err != nil {
				t.Fatal(err)
			}
		}},
		{"every snapshot corrupt", func(t *testing.T, dir string) {
			states, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "state.bin"))
			if len(states) == 0 {
				t.Fatal("no state.bin to corrupt")
			}
			for _, f := range states {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f, flip(b, len(b)/2), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, tc := range damage {
		t.Run(tc.name, func(t *testing.T) {
			cp := t.TempDir()
			if err := os.CopyFS(cp, os.DirFS(dir)); err != nil {
				t.Fatal(err)
			}
			tc.do(t, cp)
			n, err := Open(Config{ID: "m1", Bind: "127.0.0.1:0", DataDir: cp, Bootstrap: true, Fast: true, Tuning: tun}, state.New(nil))
			if err == nil {
				_ = n.Shutdown()
				t.Fatal("Open started from a compacted log without a readable snapshot")
			}
			if !strings.Contains(err.Error(), "no readable snapshot") || !errors.Is(err, ErrIncompleteState) {
				t.Fatalf("Open error = %v; want it to name the missing snapshot", err)
			}
		})
	}
}

func TestValidateServerID(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"", false},
		{"m1", true},
		{strings.Repeat("m", MaxServerIDLen), true},
		{strings.Repeat("m", MaxServerIDLen+1), false},
	}
	for _, tc := range tests {
		if err := ValidateServerID(tc.id); (err == nil) != tc.ok {
			t.Errorf("ValidateServerID(%d bytes) = %v, want ok=%v", len(tc.id), err, tc.ok)
		}
	}
}

// A bind on every interface without an advertise address is refused before
// anything is written (it used to leave a 64 MiB WAL segment behind).
func TestOpenRefusesUnadvertisableBindBeforeTouchingDataDir(t *testing.T) {
	for _, bind := range []string{":0", "0.0.0.0:0", "[::]:0"} {
		t.Run(bind, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			_, err := Open(Config{ID: "m1", Bind: bind, DataDir: dir, Bootstrap: true, Fast: true}, state.New(nil))
			if err == nil || !strings.Contains(err.Error(), "every interface") {
				t.Fatalf("Open(bind %s) = %v, want an every-interface error", bind, err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("data dir was created (%v)", err)
			}
		})
	}
}
