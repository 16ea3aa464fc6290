package raft

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/state"
)

func snapshotStore(t *testing.T) *state.Store {
	t.Helper()
	store := state.New(nil)
	f := NewFSM(store, nil)
	for i, n := range []string{"c", "a", "b"} {
		f.Apply(entry(t, uint64(i+1), put(n, 1, "h-"+n)))
	}
	f.Apply(entry(t, 4, &statev1.Command{Command: &statev1.Command_PutPlan{PutPlan: &statev1.PutPlan{Plan: &ginv1.Plan{JobId: "j", Nodes: []string{"a"}}}}}))
	f.Apply(entry(t, 5, &statev1.Command{Command: &statev1.Command_SetClusterId{SetClusterId: &statev1.SetClusterId{ClusterId: "cid"}}}))
	return store
}

// A snapshot written from the store's compact entries, piece by piece, is
// byte for byte the one the whole message gives (what earlier versions
// wrote), and either restores the same state.
func TestStreamedSnapshotIsTheWholeMessage(t *testing.T) {
	store := snapshotStore(t)
	var streamed, whole bytes.Buffer
	if err := WriteSnapshot(&streamed, store.Capture()); err != nil {
		t.Fatal(err)
	}
	if err := WriteSnapshot(&whole, WholeSnapshot{Snap: store.Snapshot()}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(streamed.Bytes(), whole.Bytes()) {
		t.Fatalf("streamed snapshot (%d bytes) differs from the whole message's (%d)", streamed.Len(), whole.Len())
	}
	restored := state.New(nil)
	if err := NewFSM(restored, nil).Restore(nopCloser{bytes.NewReader(whole.Bytes())}); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(restored.Snapshot(), store.Snapshot()) || restored.ClusterID() != "cid" {
		t.Fatal("restored state differs")
	}
	if restored.Index() != 4 { // the plan's index: the largest the snapshot holds
		t.Fatalf("restored index %d", restored.Index())
	}
}

// ReadSnapshot hands the node records over one by one and returns the rest;
// fields it does not know (a newer version's) are kept in the rest; an
// error of the node callback is returned after the payload is verified,
// and a corrupt payload is ErrCorruptSnapshot even when a callback failed.
func TestReadSnapshotStreams(t *testing.T) {
	snap := snapshotStore(t).Snapshot()
	payload, err := proto.MarshalOptions{Deterministic: true}.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	payload = protowire.AppendVarint(protowire.AppendTag(payload, 99, protowire.VarintType), 7)
	payload = protowire.AppendFixed32(protowire.AppendTag(payload, 98, protowire.Fixed32Type), 8)
	payload = protowire.AppendFixed64(protowire.AppendTag(payload, 97, protowire.Fixed64Type), 9)
	file := func(p []byte) []byte {
		var b bytes.Buffer
		if err := WriteSnapshot(&b, rawPayload(p)); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	var names []string
	rest, err := ReadSnapshot(bytes.NewReader(file(payload)), func(r *statev1.NodeRecord) error {
		names = append(names, r.GetInventory().GetNodeName())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 3 || names[0] != "a" || names[2] != "c" || len(rest.GetNodes()) != 0 || rest.GetClusterId() != "cid" || len(rest.GetPlans()) != 1 {
		t.Fatalf("nodes %v, rest %v", names, rest)
	}
	if u := rest.ProtoReflect().GetUnknown(); !bytes.Contains(u, protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 7)) || len(u) != 3+6+10 {
		t.Fatalf("unknown fields not kept: %x", u)
	}

	stop := errors.New("stop")
	calls := 0
	_, err = ReadSnapshot(bytes.NewReader(file(payload)), func(*statev1.NodeRecord) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("callback error: %v after %d calls; want it, after one", err, calls)
	}
	bad := file(payload)
	bad[len(bad)-1] ^= 1
	if _, err := ReadSnapshot(bytes.NewReader(bad), func(*statev1.NodeRecord) error { return stop }); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("corrupt payload with a failing callback: %v, want ErrCorruptSnapshot", err)
	}
	for name, p := range map[string][]byte{
		"group wire type":     protowire.AppendTag(nil, 3, protowire.StartGroupType),
		"field number 0":      {0x00, 0x01},
		"length past the end": protowire.AppendVarint(protowire.AppendTag(nil, 7, protowire.BytesType), 1000),
		"varint cut":          {0x08, 0xff},
		"bad node record":     protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte{0xff, 0xff}),
	} {
		if _, err := ReadSnapshot(bytes.NewReader(file(p)), nil); !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("%s: %v, want ErrCorruptSnapshot", name, err)
		}
	}
}

// rawPayload is bytes as a SnapshotPayload.
type rawPayload []byte

func (p rawPayload) Encode(yield func([]byte) error) error { return yield(p) }
