package state

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// SetNodeStates applies its changes in order, each as a SetNodeState of
// the same index would: the same records, the same watch events, the same
// no-op for an unchanged state; a change naming an unknown node is skipped
// (the entry's error says which) and the others are applied; replaying the
// entry changes nothing.
func TestSetNodeStatesAppliesEachChangeAsSetNodeState(t *testing.T) {
	const (
		up   = ginv1.NodeState_NODE_STATE_UP
		down = ginv1.NodeState_NODE_STATE_DOWN
	)
	at := timestamppb.Now()
	ch := func(node string, st ginv1.NodeState) *statev1.SetNodeState {
		return &statev1.SetNodeState{NodeName: node, State: st, Reason: "r " + node + " " + st.String(), At: at}
	}
	tests := []struct {
		name        string
		changes     []*statev1.SetNodeState
		wantChanged bool
		wantUnknown []string // nodes the error names; nil: no error
		want        map[string]ginv1.NodeState
	}{
		{"empty", nil, false, nil, map[string]ginv1.NodeState{"a": up, "b": up, "c": up}},
		{"one", []*statev1.SetNodeState{ch("a", down)}, true, nil, map[string]ginv1.NodeState{"a": down, "b": up, "c": up}},
		{"all", []*statev1.SetNodeState{ch("a", down), ch("b", down), ch("c", down)}, true, nil, map[string]ginv1.NodeState{"a": down, "b": down, "c": down}},
		{"unchanged ones are no-ops", []*statev1.SetNodeState{ch("a", up), ch("b", down)}, true, nil, map[string]ginv1.NodeState{"a": up, "b": down, "c": up}},
		{"nothing changes", []*statev1.SetNodeState{ch("a", up), ch("b", up)}, false, nil, map[string]ginv1.NodeState{"a": up, "b": up, "c": up}},
		{"in order: the later change of a node wins", []*statev1.SetNodeState{ch("a", down), ch("a", up), ch("b", down)}, true, nil, map[string]ginv1.NodeState{"a": up, "b": down, "c": up}},
		{"an unknown node does not stop the others", []*statev1.SetNodeState{ch("a", down), ch("gone", down), ch("c", down)}, true, []string{"gone"}, map[string]ginv1.NodeState{"a": down, "b": up, "c": down}},
		{"only unknown nodes", []*statev1.SetNodeState{ch("gone", down), ch("never", up)}, false, []string{"gone", "never"}, map[string]ginv1.NodeState{"a": up, "b": up, "c": up}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// batch gets the entry; each gets the same changes one
			// SetNodeState at a time, at the same index.
			batch, each := New(nil), New(nil)
			for i, n := range []string{"a", "b", "c"} {
				for _, s := range []*Store{batch, each} {
					if _, err := s.PutInventory(uint64(i+1), putCmd(n, "m"+n, 1, "h")); err != nil {
						t.Fatal(err)
					}
				}
			}
			const index = 10
			events, cancel := batch.Watch()
			defer cancel()
			wantEvents, cancelEach := each.Watch()
			defer cancelEach()
			res, err := batch.SetNodeStates(index, &statev1.SetNodeStates{Changes: tc.changes})
			if tc.wantUnknown == nil && err != nil {
				t.Fatalf("err = %v", err)
			}
			if tc.wantUnknown != nil {
				if !errors.Is(err, ErrUnknownNode) {
					t.Fatalf("err = %v, want an unknown node", err)
				}
				want := fmt.Sprintf("%d of %d changes skipped: %q", len(tc.wantUnknown), len(tc.changes), tc.wantUnknown)
				if got := err.Error(); got != ErrUnknownNode.Error()+": "+want {
					t.Fatalf("err = %q, want it to name %v", got, tc.wantUnknown)
				}
			}
			if res.Index != index || res.Changed != tc.wantChanged {
				t.Fatalf("result %+v, want index %d changed %v", res, index, tc.wantChanged)
			}
			if batch.Index() != index {
				t.Fatalf("applied index %d, want %d", batch.Index(), index)
			}
			for _, c := range tc.changes {
				_, _ = each.SetNodeState(index, c)
			}
			for n, want := range tc.want {
				got, _ := batch.Node(n)
				ref, _ := each.Node(n)
				if got.GetState() != want {
					t.Errorf("%s is %v, want %v", n, got.GetState(), want)
				}
				if got.GetStateReason() != ref.GetStateReason() || got.GetUpdatedIndex() != ref.GetUpdatedIndex() || !got.GetStateChangedAt().AsTime().Equal(ref.GetStateChangedAt().AsTime()) {
					t.Errorf("%s: record %v, SetNodeState one by one gives %v", n, got, ref)
				}
			}
			got, want := drain(events), drain(wantEvents)
			if len(got) != len(want) {
				t.Fatalf("%d events %+v, SetNodeState one by one gives %d %+v", len(got), got, len(want), want)
			}
			for i := range want {
				if got[i] != want[i] || got[i].Index != index {
					t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
				}
			}
			// Replayed (a lost leadership's retry): nothing changes.
			before := map[string]*statev1.NodeRecord{}
			for n := range tc.want {
				before[n], _ = batch.Node(n)
			}
			res, _ = batch.SetNodeStates(index, &statev1.SetNodeStates{Changes: tc.changes})
			if res.Changed && !hasRepeat(tc.changes) {
				t.Errorf("the replay changed something")
			}
			for n, rec := range before {
				if again, _ := batch.Node(n); again.GetState() != rec.GetState() || again.GetUpdatedIndex() != rec.GetUpdatedIndex() || again.GetStateReason() != rec.GetStateReason() {
					t.Errorf("%s after the replay: %v, want %v", n, again, rec)
				}
			}
		})
	}
}

// drain is the events already delivered to ch.
func drain(ch <-chan Event) []Event {
	var out []Event
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		default:
			return out
		}
	}
}

// hasRepeat reports whether a node appears twice among changes (the replay
// of such an entry flips it again, as two SetNodeState entries would).
func hasRepeat(changes []*statev1.SetNodeState) bool {
	seen := map[string]bool{}
	for _, c := range changes {
		if seen[c.GetNodeName()] {
			return true
		}
		seen[c.GetNodeName()] = true
	}
	return false
}

// The error of an entry with many unknown nodes names the first few and
// counts the rest (it is logged by the leader).
func TestSetNodeStatesErrorIsBounded(t *testing.T) {
	s := New(nil)
	var changes []*statev1.SetNodeState
	for i := range 512 {
		changes = append(changes, &statev1.SetNodeState{NodeName: fmt.Sprintf("n%03d", i), State: ginv1.NodeState_NODE_STATE_DOWN})
	}
	_, err := s.SetNodeStates(1, &statev1.SetNodeStates{Changes: changes})
	if !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("err = %v", err)
	}
	if got, want := err.Error(), `unknown node: 512 of 512 changes skipped: ["n000" "n001" "n002" "n003" "n004" "n005" "n006" "n007"] and 504 more`; got != want {
		t.Fatalf("err = %q, want %q", got, want)
	}
}
