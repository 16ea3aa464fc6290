package state

import (
	"errors"
	"testing"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

func putCmd(name, machine string, gen uint64, hash string) *statev1.PutInventory {
	return &statev1.PutInventory{ContentHash: hash, Inventory: &ginv1.NodeInventory{
		NodeName: name, Generation: gen, Host: &ginv1.Host{MachineId: machine},
	}}
}

func TestPutInventoryRules(t *testing.T) {
	tests := []struct {
		name    string
		cmd     *statev1.PutInventory
		wantErr error
		wantGen uint64
	}{
		{"register", putCmd("n", "m", 3, "a"), nil, 3},
		{"idempotent", putCmd("n", "m", 3, "a"), nil, 3},
		{"reuse", putCmd("n", "m", 3, "b"), ErrGenerationReused, 3},
		{"stale", putCmd("n", "m", 2, "c"), ErrStaleGeneration, 3},
		{"other machine", putCmd("n", "other", 4, "d"), ErrIdentityConflict, 3},
		{"advance", putCmd("n", "m", 9, "e"), nil, 9},
	}
	s := New(nil)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.PutInventory(uint64(i+1), tc.cmd)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if res.Generation != tc.wantGen {
				t.Fatalf("generation = %d, want %d", res.Generation, tc.wantGen)
			}
			rec, _ := s.Node("n")
			if rec.GetInventory().GetGeneration() != tc.wantGen {
				t.Fatalf("held generation = %d, want %d", rec.GetInventory().GetGeneration(), tc.wantGen)
			}
		})
	}
}

func TestViewIsImmutable(t *testing.T) {
	s := New(nil)
	if _, err := s.PutInventory(1, putCmd("a", "m", 1, "h")); err != nil {
		t.Fatal(err)
	}
	v := s.View()
	if _, err := s.PutInventory(2, putCmd("b", "m2", 1, "h")); err != nil {
		t.Fatal(err)
	}
	if v.Len() != 1 || v.Index != 1 {
		t.Fatalf("old view changed: %d nodes at %d", v.Len(), v.Index)
	}
	if nv := s.View(); nv.Len() != 2 || nv.Index != 2 {
		t.Fatalf("new view: %d nodes at %d", nv.Len(), nv.Index)
	}
}

func TestWatchDeliversAndDropsLaggards(t *testing.T) {
	s := New(nil)
	ch, cancel := s.Watch()
	defer cancel()
	if _, err := s.PutInventory(1, putCmd("a", "m", 1, "h")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetNodeState(2, &statev1.SetNodeState{NodeName: "a", State: ginv1.NodeState_NODE_STATE_DOWN}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []ginv1.WatchEventKind{ginv1.WatchEventKind_WATCH_EVENT_KIND_NODE_UPDATED, ginv1.WatchEventKind_WATCH_EVENT_KIND_NODE_STATE} {
		e := <-ch
		if e.Kind != want || e.Index != uint64(i+1) || e.Node != "a" {
			t.Fatalf("event %d = %+v, want %v at %d", i, e, want, i+1)
		}
	}
	// A watcher that never reads is closed once its buffer is full, and
	// writers never block on it.
	slow, cancelSlow := s.Watch()
	defer cancelSlow()
	for i := 0; i <= watchBuffer; i++ {
		st := ginv1.NodeState_NODE_STATE_DOWN // the node is DOWN: start with UP
		if i%2 == 0 {
			st = ginv1.NodeState_NODE_STATE_UP
		}
		if _, err := s.SetNodeState(uint64(10+i), &statev1.SetNodeState{NodeName: "a", State: st}); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for range slow {
		n++
	}
	if n != watchBuffer {
		t.Fatalf("slow watcher got %d events before being closed, want %d", n, watchBuffer)
	}
}
