package state

import (
	"bytes"
	"compress/flate"
	"context"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/inventory"
)

// simStore is a store holding n simulated DGX H100 nodes (one DOWN), a
// fabric, a plan, a measurement and two servers, written as the FSM writes.
func simStore(t *testing.T, n int) (*Store, []*ginv1.NodeInventory) {
	t.Helper()
	invs, fabric := simInventories(t, n)
	s := New(nil)
	idx := uint64(0)
	next := func() uint64 { idx++; return idx }
	for _, inv := range invs {
		h, err := inventory.ContentHash(inv)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.PutInventory(next(), &statev1.PutInventory{Inventory: inv, ContentHash: h, At: timestamppb.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SetNodeState(next(), &statev1.SetNodeState{NodeName: invs[0].GetNodeName(), State: ginv1.NodeState_NODE_STATE_DOWN, Reason: "test", At: timestamppb.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ImportFabric(next(), &statev1.ImportFabric{Fabric: fabric}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutPlan(next(), &statev1.PutPlan{Plan: &ginv1.Plan{JobId: "j1", Nodes: []string{invs[1].GetNodeName()}, ContentHash: "h"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutMeasurement(next(), &statev1.PutMeasurement{Measurement: goodMeasurement()}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"m2", "m1"} {
		if _, err := s.RegisterServer(next(), &statev1.RegisterServer{ServerId: id, ClientAddress: id + ":5000"}); err != nil {
			t.Fatal(err)
		}
	}
	return s, invs
}

// simInventories are n simulated DGX H100 nodes on a simulated fabric,
// their identities canonical (as the master stores them).
func simInventories(tb testing.TB, n int) ([]*ginv1.NodeInventory, *ginv1.FabricTopology) {
	tb.Helper()
	fs, err := sim.ParseFabricSpec("leaf-groups=2,spines=4,oversub=2")
	if err != nil {
		tb.Fatal(err)
	}
	c, err := sim.NewCluster("state", &fs, sim.NodesOf("dgx-h100", "node", 0, n))
	if err != nil {
		tb.Fatal(err)
	}
	invs, err := c.Collect(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	for i, inv := range invs {
		invs[i], _ = inventory.Canonical(inv)
	}
	return invs, c.Fabric
}

// The store keeps inventories compressed; what it answers is what it was
// given: the decoded record equals the inventory stored, the head holds
// its summary fields, a state change keeps the inventory bytes.
func TestCompactNodesAnswerWhatWasStored(t *testing.T) {
	s, invs := simStore(t, 3)
	for i, inv := range invs {
		rec, ok := s.Node(inv.GetNodeName())
		if !ok || !proto.Equal(rec.GetInventory(), inv) {
			t.Fatalf("node %s: the decoded inventory differs from the one stored", inv.GetNodeName())
		}
		h, _ := s.Head(inv.GetNodeName())
		want := NodeHead{Name: inv.GetNodeName(), Generation: inv.GetGeneration(), MachineID: inv.GetHost().GetMachineId(),
			SystemModel: inv.GetHost().GetSystemModel(), GPUs: 8, GPU0Model: inv.GetGpus()[0].GetModel(), GPUModel: inv.GetGpus()[0].GetModel()}
		h.Record, want.Record = nil, nil
		if h != want || want.SystemModel == "" || want.GPUModel == "" {
			t.Fatalf("head %+v, want %+v", h, want)
		}
		h, _ = s.Head(inv.GetNodeName())
		if h.Record.GetInventory() != nil || h.Record.GetContentHash() != rec.GetContentHash() || h.State() != rec.GetState() {
			t.Fatalf("head record %v does not match the record %v", h.Record, rec)
		}
		if i == 0 && h.State() != ginv1.NodeState_NODE_STATE_DOWN {
			t.Fatalf("state change lost: %v", h.State())
		}
		v := s.View()
		if vr, _ := v.Node(inv.GetNodeName()); !proto.Equal(vr, rec) {
			t.Fatal("the view's record differs from the store's")
		}
	}
	// Each call decodes a new record: a caller changing it changes nothing stored.
	a, _ := s.Node(invs[1].GetNodeName())
	a.Inventory.Gpus[0].Model = "changed"
	if b, _ := s.Node(invs[1].GetNodeName()); b.GetInventory().GetGpus()[0].GetModel() == "changed" {
		t.Fatal("a caller's change reached the store")
	}
}

// A Raft snapshot is encoded from the compact entries piece by piece; its
// bytes are exactly the deterministic encoding of the whole snapshot
// message (what earlier versions wrote and read), and it restores to the
// same state.
func TestCaptureEncodesTheSnapshotMessage(t *testing.T) {
	s, _ := simStore(t, 4)
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	c := s.Capture()
	var got bytes.Buffer
	pieces := 0
	if err := c.Encode(func(p []byte) error { pieces++; got.Write(p); return nil }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("encoded %d bytes in %d pieces, differing from the %d of the whole message", got.Len(), pieces, len(want))
	}
	if pieces != 2+c.Len() {
		t.Fatalf("%d pieces for %d nodes", pieces, c.Len())
	}
	var again bytes.Buffer
	_ = c.Encode(func(p []byte) error { again.Write(p); return nil })
	if !bytes.Equal(again.Bytes(), want) {
		t.Fatal("a second Encode differs")
	}

	var snap statev1.Snapshot
	if err := proto.Unmarshal(got.Bytes(), &snap); err != nil {
		t.Fatal(err)
	}
	r := New(nil)
	if err := r.Restore(s.Index(), &snap); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(r.Snapshot(), s.Snapshot()) {
		t.Fatal("restored state differs")
	}
	if r.Graph().Len() != 4 {
		t.Fatalf("restored graph holds %d nodes", r.Graph().Len())
	}
}

// Inventories of one kind share a preset dictionary and deflate smaller
// against it than alone; kinds beyond the codec's limit deflate alone, as
// without dictionaries; every entry expands to the inventory stored,
// whichever way it was deflated.
func TestInventoryDictionaries(t *testing.T) {
	fs, err := sim.ParseFabricSpec("leaf-groups=2,spines=4,oversub=2")
	if err != nil {
		t.Fatal(err)
	}
	nodes := append(sim.NodesOf("dgx-h100", "h", 0, 3), sim.NodesOf("gb200-nvl72", "g", 0, 3)...)
	c, err := sim.NewCluster("dict", &fs, append(nodes, sim.NodesOf("dgx-a100", "a", 0, 3)...))
	if err != nil {
		t.Fatal(err)
	}
	invs, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		maxDicts  int
		wantDicts int
	}{
		{"room for every kind", 0, 3},
		{"room for two kinds", 2, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			codec := &invCodec{maxDicts: tc.maxDicts}
			dictOf := map[string]*invDict{} // system model → its kind's dictionary
			for i, inv := range invs {
				e, err := codec.entry(&statev1.NodeRecord{Inventory: inv, ContentHash: "h"}, inv)
				if err != nil {
					t.Fatal(err)
				}
				rec, err := codec.record(e)
				if err != nil || !proto.Equal(rec.GetInventory(), inv) {
					t.Fatalf("%s: expands to a different inventory (err %v)", inv.GetNodeName(), err)
				}
				plain := deflateAlone(t, inv)
				model := inv.GetHost().GetSystemModel()
				d, seen := dictOf[model]
				if !seen {
					dictOf[model] = e.dict
					d = e.dict
				}
				switch {
				case e.dict != d:
					t.Fatalf("%s: a dictionary other than its kind's", inv.GetNodeName())
				case e.dict == nil && !bytes.Equal(e.inv, plain):
					t.Fatalf("%s: no dictionary, but not deflated alone", inv.GetNodeName())
				case e.dict != nil && i%3 > 0 && len(e.inv) >= len(plain):
					t.Fatalf("%s: %d bytes against its kind's dictionary, %d alone", inv.GetNodeName(), len(e.inv), len(plain))
				}
			}
			if len(codec.dicts) != tc.wantDicts {
				t.Fatalf("%d dictionaries, want %d", len(codec.dicts), tc.wantDicts)
			}
		})
	}
}

// deflateAlone is inv's wire form deflated as the codec does, without a
// dictionary.
func deflateAlone(t *testing.T, inv *ginv1.NodeInventory) []byte {
	t.Helper()
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, invCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The store keeps the fabric scan deflated; what it answers is what was
// imported, a new message per call, in views and snapshots alike.
func TestFabricAnswersWhatWasImported(t *testing.T) {
	_, fabric := simInventories(t, 3)
	s := New(nil)
	if _, err := s.ImportFabric(1, &statev1.ImportFabric{Fabric: fabric}); err != nil {
		t.Fatal(err)
	}
	got := s.View().Fabric()
	if len(fabric.GetLinks()) == 0 || !proto.Equal(got, fabric) {
		t.Fatalf("the view's fabric (%d links) differs from the one imported (%d links)", len(got.GetLinks()), len(fabric.GetLinks()))
	}
	got.Source = "changed"
	if s.View().Fabric().GetSource() == "changed" {
		t.Fatal("a caller's change reached the store")
	}
	if !proto.Equal(s.Snapshot().GetFabric(), fabric) {
		t.Fatal("the snapshot's fabric differs from the one imported")
	}
	if f := New(nil).View().Fabric(); f != nil {
		t.Fatalf("an empty store answers a fabric: %v", f)
	}
}

// View.HCAs decodes only the HCAs, and they are the inventory's.
func TestViewHCAs(t *testing.T) {
	if f := (&ginv1.NodeInventory{}).ProtoReflect().Descriptor().Fields().ByName("hcas"); f == nil || f.Number() != hcasField {
		t.Fatalf("NodeInventory.hcas is %v, hcasField %d", f, hcasField)
	}
	s, invs := simStore(t, 2)
	v := s.View()
	for _, inv := range invs {
		hs, ok := v.HCAs(inv.GetNodeName())
		if !ok || len(hs) == 0 || len(hs) != len(inv.GetHcas()) {
			t.Fatalf("%s: %d HCAs (%v), want %d", inv.GetNodeName(), len(hs), ok, len(inv.GetHcas()))
		}
		for i, h := range hs {
			if !proto.Equal(h, inv.GetHcas()[i]) {
				t.Fatalf("%s: HCA %d differs: %v, want %v", inv.GetNodeName(), i, h, inv.GetHcas()[i])
			}
		}
	}
	if _, ok := v.HCAs("nonesuch"); ok {
		t.Fatal("HCAs of an unknown node")
	}
}
