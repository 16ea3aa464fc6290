package raft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/inventory"
	"github.com/gin-topology/gin/internal/state"
	"github.com/gin-topology/gin/internal/testkit"
)

// TestCorruptedSealedSegmentIsDetectedNotServed: on a real data dir, a
// committed inventory (a DGX-like node with H100 GPUs and its real content
// hash) is followed by enough entries to seal its raft-wal segment; the
// master stops; one byte group inside the sealed segment is changed
// (H100 -> H666, the proto stays valid); at the restart the replay finds
// the entry no longer matching its hash: the node is not stored, and the
// node reports the corrupted state naming the entry's index and the
// recovery step (the master refuses to serve from it). The entries after
// it still apply.
func TestCorruptedSealedSegmentIsDetectedNotServed(t *testing.T) {
	dir := t.TempDir()
	open := func(st *state.Store) *Node {
		t.Helper()
		n, err := Open(Config{ID: "m1", Bind: "127.0.0.1:0", DataDir: dir, Bootstrap: true, Fast: true, walSegmentSize: 64 << 10}, st)
		if err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 30*time.Second, "m1 leads", n.IsLeader)
		return n
	}
	n := open(state.New(nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	real := &ginv1.NodeInventory{NodeName: "node001", Generation: 1, Host: &ginv1.Host{MachineId: "m-node001"},
		Gpus: []*ginv1.Gpu{{Uuid: "GPU-0001", Index: 0, Model: "NVIDIA H100 80GB HBM3"}}}
	hash, err := inventory.ContentHash(real)
	if err != nil {
		t.Fatal(err)
	}
	res, err := n.Apply(ctx, &statev1.Command{Command: &statev1.Command_PutInventory{PutInventory: &statev1.PutInventory{Inventory: real, ContentHash: hash}}})
	if err != nil {
		t.Fatal(err)
	}
	corruptIndex := res.Index
	var last uint64
	for i := range 80 { // ~2 KiB each: the 64 KiB segment seals
		fill := inv(fmt.Sprintf("fill%03d", i), 1)
		fill.Gpus[0].Model = strings.Repeat("x", 2048)
		r, err := n.Apply(ctx, &statev1.Command{Command: &statev1.Command_PutInventory{PutInventory: &statev1.PutInventory{Inventory: fill}}})
		if err != nil {
			t.Fatal(err)
		}
		last = r.Index
	}
	if err := n.CorruptState(); err != nil {
		t.Fatalf("before the edit: %v", err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	_ = n.CloseTransport()

	segs, err := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	if err != nil || len(segs) < 2 {
		t.Fatalf("want a sealed segment and the tail: %v, %v", segs, err)
	}
	sort.Strings(segs)
	edited := ""
	for _, seg := range segs[:len(segs)-1] { // sealed ones only
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, []byte("H100")); i >= 0 {
			copy(b[i:], "H666")
			if err := os.WriteFile(seg, b, 0o600); err != nil {
				t.Fatal(err)
			}
			edited = seg
			break
		}
	}
	if edited == "" {
		t.Fatal("no sealed segment holds the H100 entry")
	}

	st := state.New(nil)
	n = open(st)
	defer func() { _ = n.Shutdown(); _ = n.CloseTransport() }()
	// The state's own index: the FSM applies after Raft counts an entry
	// as applied.
	testkit.WaitFor(t, 30*time.Second, "the log replayed", func() bool { return st.Index() >= last })
	err = n.CorruptState()
	if !errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), fmt.Sprintf("entry %d", corruptIndex)) ||
		!strings.Contains(err.Error(), "ginctl members remove m1") {
		t.Fatalf("after the edit of %s: CorruptState = %v, want ErrCorruptState naming entry %d and the recovery", filepath.Base(edited), err, corruptIndex)
	}
	if _, ok := st.Node("node001"); ok {
		t.Fatal("the corrupted inventory was stored")
	}
	if _, ok := st.Node("fill079"); !ok {
		t.Fatalf("the entries after the corrupted one were not applied (%d nodes stored)", st.View().Len())
	}
}
