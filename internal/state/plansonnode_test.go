package state

import (
	"testing"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// TestPlansOnNode: the per-node plan count follows pins, repeated pins,
// deletes and a snapshot restore, and counts a node named twice once.
func TestPlansOnNode(t *testing.T) {
	s := New(nil)
	put := func(index uint64, job string, nodes ...string) {
		t.Helper()
		if _, err := s.PutPlan(index, &statev1.PutPlan{Plan: &ginv1.Plan{JobId: job, Nodes: nodes}}); err != nil {
			t.Fatal(err)
		}
	}
	want := func(t *testing.T, st *Store, counts map[string]int) {
		t.Helper()
		for node, n := range counts {
			if got := st.PlansOnNode(node); got != n {
				t.Errorf("PlansOnNode(%s) = %d, want %d", node, got, n)
			}
		}
	}
	put(1, "j1", "n1", "n2")
	put(2, "j2", "n1", "n1") // a node named twice counts once
	put(3, "j1", "n3")       // j1 is pinned: a no-op
	want(t, s, map[string]int{"n1": 2, "n2": 1, "n3": 0})
	if _, err := s.DeletePlan(4, &statev1.DeletePlan{JobId: "j1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeletePlan(5, &statev1.DeletePlan{JobId: "j1"}); err != nil { // again: a no-op
		t.Fatal(err)
	}
	want(t, s, map[string]int{"n1": 1, "n2": 0})
	put(6, "j3", "n2")
	r := New(nil)
	if err := r.Restore(6, s.Snapshot()); err != nil {
		t.Fatal(err)
	}
	want(t, r, map[string]int{"n1": 1, "n2": 1, "n3": 0})
}
