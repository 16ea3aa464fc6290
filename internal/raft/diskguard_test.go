package raft

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	"github.com/gin-topology/gin/internal/state"
	"github.com/gin-topology/gin/internal/testtmpfs"
)

// bigPut is an inventory write of about 4 KiB, so that a small WAL segment
// fills in a few dozen writes.
func bigPut(name string) *statev1.Command {
	cmd := put(name, 1, "h")
	cmd.GetPutInventory().GetInventory().GetGpus()[0].Model = strings.Repeat("m", 4000)
	return cmd
}

// openOn opens a single-voter node on dir and waits for its leadership.
func openOn(t *testing.T, cfg Config) (*Node, *state.Store) {
	t.Helper()
	cfg.ID, cfg.Bind, cfg.Bootstrap, cfg.Fast = "m1", "127.0.0.1:0", true, true
	st := state.New(nil)
	n, err := Open(cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, n)
	return n, st
}

// Below the free space it keeps, the leader refuses writes with an error
// naming the data dir, keeps its leadership, and takes writes again once
// space is back; nothing acknowledged is lost.
func TestDataDirFullRefusesWritesUntilSpaceReturns(t *testing.T) {
	dir := testtmpfs.Mount(t, 16<<20)
	const minFree = 4 << 20
	n, st := openOn(t, Config{DataDir: dir, MinFreeBytes: minFree, walSegmentSize: 1 << 20})
	defer n.Shutdown()
	ctx := context.Background()
	for i := range 3 {
		if _, err := n.Apply(ctx, bigPut(fmt.Sprintf("a%d", i))); err != nil {
			t.Fatalf("apply with space: %v", err)
		}
	}
	term := n.Stats().Term

	testtmpfs.Fill(t, dir, minFree/2)
	for i := range 5 {
		_, err := n.Apply(ctx, bigPut(fmt.Sprintf("refused%d", i)))
		var full *DataDirFullError
		if !errors.As(err, &full) || !errors.Is(err, ErrDataDirFull) {
			t.Fatalf("apply on a full data dir: err = %v, want a DataDirFullError", err)
		}
		if !strings.Contains(err.Error(), "data dir "+dir+" is full") {
			t.Fatalf("error %q does not name the data dir %s", err, dir)
		}
	}
	if !n.IsLeader() || n.Stats().Term != term {
		t.Fatalf("leadership changed while writes were refused: leader %v, term %d → %d", n.IsLeader(), term, n.Stats().Term)
	}
	if free, min, err := n.DataDirSpace(); err != nil || free >= min || min != minFree {
		t.Fatalf("DataDirSpace = %d free, %d min, %v; want less than %d free", free, min, err, minFree)
	}
	select {
	case <-n.Failed():
		t.Fatalf("the log store failed: %v", n.Err())
	default:
	}

	testtmpfs.Free(t, dir)
	if _, err := n.Apply(ctx, bigPut("after")); err != nil {
		t.Fatalf("apply after space returned: %v", err)
	}
	names := st.View().NodeNames()
	if len(names) != 4 || n.Stats().Term != term {
		t.Fatalf("nodes %v (term %d → %d), want a0..a2 and after, no refused write, same term", names, term, n.Stats().Term)
	}
}

// When the log store fails a write anyway (here the guard is told there is
// space, and the disk fills while raft-wal rotates a segment), raft-wal
// cannot append again: the node reports it, naming the data dir, stops, and
// a restart with space back has every acknowledged write.
func TestLogStoreFailureStopsTheNodeAndARestartKeepsAcknowledgedWrites(t *testing.T) {
	dir := testtmpfs.Mount(t, 8<<20)
	plenty := func(string) (uint64, error) { return 1 << 40, nil }
	n, _ := openOn(t, Config{DataDir: dir, walSegmentSize: 256 << 10, statfs: plenty})
	testtmpfs.Fill(t, dir, 0)

	ctx := context.Background()
	var acked []string
	var lastErr error
	for i := 0; i < 1000 && n.Err() == nil; i++ {
		name := fmt.Sprintf("w%03d", i)
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := n.Apply(actx, bigPut(name))
		cancel()
		if err == nil {
			acked = append(acked, name)
		} else {
			lastErr = err
		}
	}
	select {
	case <-n.Failed():
	case <-time.After(30 * time.Second):
		t.Fatalf("the log store never failed after %d writes on a full disk (last error %v)", len(acked), lastErr)
	}
	err := n.Err()
	if !errors.Is(err, ErrLogStoreFailed) || !strings.Contains(err.Error(), "data dir "+dir+" is full") {
		t.Fatalf("Err = %v; want ErrLogStoreFailed naming the full data dir %s", err, dir)
	}
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged before the segment filled")
	}
	if _, err := n.Apply(ctx, bigPut("after-failure")); err == nil {
		t.Fatal("a write was acknowledged after the log store failed")
	}
	_ = n.Shutdown()

	testtmpfs.Free(t, dir)
	n2, st2 := openOn(t, Config{DataDir: dir, walSegmentSize: 256 << 10, MinFreeBytes: 1 << 20})
	defer n2.Shutdown()
	if err := n2.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	v := st2.View()
	for _, name := range acked {
		if _, ok := v.Node(name); !ok {
			t.Errorf("acknowledged write %s lost after the restart", name)
		}
	}
	if _, err := n2.Apply(ctx, bigPut("after-restart")); err != nil {
		t.Fatalf("write after the restart: %v", err)
	}
	t.Logf("%d writes acknowledged before the segment rotation failed; all kept", len(acked))
}

func TestMinFreeBytesBounds(t *testing.T) {
	for _, v := range []uint64{MinMinFreeBytes - 1, MaxMinFreeBytes + 1} {
		_, err := Open(Config{ID: "m1", Bind: "127.0.0.1:0", DataDir: t.TempDir(), MinFreeBytes: v}, state.New(nil))
		if err == nil || !strings.Contains(err.Error(), "minimum free space") {
			t.Errorf("MinFreeBytes %d: err = %v, want it refused", v, err)
		}
	}
}
