package state

import (
	"errors"
	"testing"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// TestWatchSinceReplaysWithoutGap: the kept events after the index come
// first, then new ones on the channel; each event says what changed.
func TestWatchSinceReplaysWithoutGap(t *testing.T) {
	s := New(nil)
	if _, err := s.PutInventory(1, putCmd("a", "m", 1, "h")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetNodeState(2, &statev1.SetNodeState{NodeName: "a", State: ginv1.NodeState_NODE_STATE_DOWN, Reason: "missed heartbeats"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutPlan(3, &statev1.PutPlan{Plan: &ginv1.Plan{JobId: "42"}}); err != nil {
		t.Fatal(err)
	}
	replay, ch, cancel, err := s.WatchSince(1)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if _, err := s.DeletePlan(4, &statev1.DeletePlan{JobId: "42", Reason: "expired"}); err != nil {
		t.Fatal(err)
	}
	got := append(replay, <-ch)
	want := []Event{
		{Index: 2, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_NODE_STATE, Node: "a", OldState: ginv1.NodeState_NODE_STATE_UP, NewState: ginv1.NodeState_NODE_STATE_DOWN, Reason: "missed heartbeats"},
		{Index: 3, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_PLAN_PINNED, Job: "42"},
		{Index: 4, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_PLAN_DELETED, Job: "42", Reason: "expired"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		g := got[i]
		if g.At.IsZero() {
			t.Errorf("event %d has no time", i)
		}
		g.At = want[i].At
		if g != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, g, want[i])
		}
	}
	// since 0: new events only; a node's first inventory is generation 0 → 1.
	first, ch2, cancel2, err := s.WatchSince(0)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel2()
	if first != nil {
		t.Errorf("since 0 replays %d events; want new ones only", len(first))
	}
	if _, err := s.PutInventory(5, putCmd("b", "m2", 1, "h")); err != nil {
		t.Fatal(err)
	}
	if e := <-ch2; e.Node != "b" || e.OldGeneration != 0 || e.NewGeneration != 1 {
		t.Errorf("new node event %+v, want b generation 0 → 1", e)
	}
}

func TestWatchSinceRefusesAGap(t *testing.T) {
	s := New(nil)
	if _, err := s.PutInventory(1, putCmd("a", "m", 1, "h")); err != nil {
		t.Fatal(err)
	}
	for i := range HistorySize + 1 {
		st := ginv1.NodeState_NODE_STATE_DOWN
		if i%2 == 1 {
			st = ginv1.NodeState_NODE_STATE_UP
		}
		if _, err := s.SetNodeState(uint64(2+i), &statev1.SetNodeState{NodeName: "a", State: st}); err != nil {
			t.Fatal(err)
		}
	}
	// Events 1 and 2 were dropped from the history: since 1 would miss 2.
	if _, _, _, err := s.WatchSince(1); !errors.Is(err, ErrWatchTooOld) {
		t.Fatalf("WatchSince(1) after %d events: err %v, want ErrWatchTooOld", HistorySize+2, err)
	}
	replay, _, cancel, err := s.WatchSince(2)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if len(replay) != HistorySize || replay[0].Index != 3 {
		t.Fatalf("WatchSince(2): %d events from %d, want %d from 3", len(replay), replay[0].Index, HistorySize)
	}
	// After a snapshot restore the earlier events are gone.
	if err := s.Restore(10_000, s.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.WatchSince(9_999); !errors.Is(err, ErrWatchTooOld) {
		t.Fatalf("WatchSince before the restored index: err %v, want ErrWatchTooOld", err)
	}
}
