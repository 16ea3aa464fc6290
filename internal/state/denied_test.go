package state

import (
	"errors"
	"math/big"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/pki"
)

func denyCmd(serial, reason string) *statev1.DenyCertificate {
	return &statev1.DenyCertificate{Entry: &ginv1.DeniedCertificate{Serial: serial, Reason: reason, DeniedBy: "spiffe://gin/admin"}}
}

func withIdentity(cmd *statev1.DenyCertificate, id string) *statev1.DenyCertificate {
	cmd.Entry.Identity = id
	return cmd
}

func TestDenyCertificateRules(t *testing.T) {
	s := New(nil)
	hooked := 0
	s.OnDeny(func() { hooked++ })
	tests := []struct {
		name        string
		cmd         *statev1.DenyCertificate
		wantErr     string
		changed     bool
		wantEntries int
	}{
		{"deny", denyCmd("3F2A", "stolen"), "", true, 1},
		{"again, another reason: the first entry stays", denyCmd("3F2A", "other"), "", false, 1},
		{"not canonical (lower case)", denyCmd("3f2b", ""), "canonical", false, 1},
		{"not canonical (colons)", denyCmd("3F:2B", ""), "canonical", false, 1},
		{"not hex", denyCmd("XYZ1", ""), "hex digit", false, 1},
		{"empty serial", denyCmd("", ""), "empty", false, 1},
		{"reason too long", denyCmd("3F2B", strings.Repeat("x", MaxDenyReasonLen+1)), "more than 256", false, 1},
		{"control character", denyCmd("3F2B", "a\x1b[31mb"), "reason", false, 1},
		{"no entry", &statev1.DenyCertificate{}, "missing", false, 1},
		{"an identity that is no GIN identity", withIdentity(denyCmd("3F2B", ""), "spiffe://gin/root"), "want one of", false, 1},
		{"an identity that is no URL", withIdentity(denyCmd("3F2B", ""), "%zz"), "identity", false, 1},
		{"second serial, with its identity", withIdentity(denyCmd("3F2B", ""), "spiffe://gin/agent/node007"), "", true, 2},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.DenyCertificate(uint64(i+1), tc.cmd)
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if res.Changed != tc.changed || res.Index != uint64(i+1) || s.Index() != uint64(i+1) {
				t.Fatalf("result %+v (store index %d), want changed %v at %d", res, s.Index(), tc.changed, i+1)
			}
			if n := len(s.DeniedCertificates()); n != tc.wantEntries {
				t.Fatalf("%d entries, want %d", n, tc.wantEntries)
			}
		})
	}
	if reason, ok := s.Denied("3F2A"); !ok || reason != "stolen" {
		t.Fatalf("Denied(3F2A) = %q, %v", reason, ok)
	}
	if e, _ := s.DeniedCertificate("3F2A"); e.GetIndex() != 1 {
		t.Fatalf("stored index %d, want 1", e.GetIndex())
	}
	if hooked != 2 {
		t.Fatalf("deny hook called %d times, want 2 (once per new serial)", hooked)
	}
	if res, err := s.AllowCertificate(20, &statev1.AllowCertificate{Serial: "3F2A"}); err != nil || !res.Changed {
		t.Fatalf("allow: %+v, %v", res, err)
	}
	if res, err := s.AllowCertificate(21, &statev1.AllowCertificate{Serial: "3F2A"}); err != nil || res.Changed {
		t.Fatalf("allow again: %+v, %v", res, err)
	}
	if _, ok := s.Denied("3F2A"); ok {
		t.Fatal("3F2A still denied after allow")
	}
}

func TestDenyListIsBounded(t *testing.T) {
	s := New(nil)
	for i := range MaxDeniedCertificates {
		if _, err := s.DenyCertificate(uint64(i+1), denyCmd(pki.FormatSerial(big.NewInt(int64(i+1))), "")); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	_, err := s.DenyCertificate(MaxDeniedCertificates+1, denyCmd("ABCDEF", ""))
	if !errors.Is(err, ErrTooManyDenied) {
		t.Fatalf("entry past the bound: %v, want ErrTooManyDenied", err)
	}
	if _, err := s.DenyCertificate(MaxDeniedCertificates+2, denyCmd("01", "")); err != nil {
		t.Fatalf("a repeat of a held serial at the bound: %v", err)
	}
	if _, ok := s.Denied("ABCDEF"); ok || len(s.DeniedCertificates()) != MaxDeniedCertificates {
		t.Fatal("the refused entry was stored")
	}
}

func TestDenyListSnapshotRestore(t *testing.T) {
	s := New(nil)
	for i, serial := range []string{"0B", "0A", "0C"} {
		if _, err := s.DenyCertificate(uint64(i+1), denyCmd(serial, "r"+serial)); err != nil {
			t.Fatal(err)
		}
	}
	snap := s.Snapshot()
	if got := len(snap.GetDeniedCertificates()); got != 3 || snap.GetDeniedCertificates()[0].GetSerial() != "0A" {
		t.Fatalf("snapshot deny list: %v", snap.GetDeniedCertificates())
	}
	r := New(nil)
	hooked := 0
	r.OnDeny(func() { hooked++ })
	if err := r.Restore(3, snap); err != nil {
		t.Fatal(err)
	}
	if reason, ok := r.Denied("0C"); !ok || reason != "r0C" || hooked != 1 {
		t.Fatalf("restored: Denied(0C) = %q, %v; hook called %d times", reason, ok, hooked)
	}
	if !proto.Equal(r.Snapshot(), snap) {
		t.Fatal("restore then snapshot differs")
	}
	bad := []struct {
		name string
		list []*ginv1.DeniedCertificate
		want string
	}{
		{"twice", []*ginv1.DeniedCertificate{{Serial: "0A"}, {Serial: "0A"}}, "twice"},
		{"not canonical", []*ginv1.DeniedCertificate{{Serial: "0a"}}, "canonical"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			b := proto.CloneOf(snap)
			b.DeniedCertificates = tc.list
			err := New(nil).Restore(3, b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("restore: %v, want %q", err, tc.want)
			}
		})
	}
}

func binding(id, ca string) *statev1.NodeBinding {
	return &statev1.NodeBinding{Identity: id, CaKeySha256: ca}
}

func putBound(name, machine string, gen uint64, hash string, b *statev1.NodeBinding) *statev1.PutInventory {
	c := putCmd(name, machine, gen, hash)
	c.Binding = b
	return c
}

// TestBindingAndDeleteNode: the first registration over TLS binds the name
// to the certificate's identity and CA key; a renewed certificate of the
// same CA passes; another CA or identity is refused; deleting the node
// frees the name for another machine and certificate.
func TestBindingAndDeleteNode(t *testing.T) {
	const (
		id  = "spiffe://gin/agent/n"
		ca1 = "aaaa"
		ca2 = "bbbb"
	)
	s := New(nil)
	events, stop := s.Watch()
	defer stop()
	tests := []struct {
		name    string
		cmd     *statev1.PutInventory
		wantErr error
		wantCA  string
	}{
		{"register without TLS", putBound("n", "m", 1, "a", nil), nil, ""},
		{"first TLS registration binds", putBound("n", "m", 2, "b", binding(id, ca1)), nil, ca1},
		{"renewed certificate, same CA", putBound("n", "m", 3, "c", &statev1.NodeBinding{Identity: id, CaKeySha256: ca1, Serial: "0F"}), nil, ca1},
		{"another CA", putBound("n", "m", 4, "d", binding(id, ca2)), ErrIdentityConflict, ca1},
		{"another identity", putBound("n", "m", 4, "d", binding("spiffe://gin/agent/x", ca1)), ErrIdentityConflict, ca1},
		{"a write without a certificate keeps the binding", putBound("n", "m", 4, "d", nil), nil, ca1},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.PutInventory(uint64(i+1), tc.cmd)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			rec, _ := s.Node("n")
			if rec.GetBinding().GetCaKeySha256() != tc.wantCA {
				t.Fatalf("binding %v, want CA %q", rec.GetBinding(), tc.wantCA)
			}
		})
	}
	// The binding survives a state change (the record is replaced).
	if _, err := s.SetNodeState(10, &statev1.SetNodeState{NodeName: "n", State: ginv1.NodeState_NODE_STATE_DOWN}); err != nil {
		t.Fatal(err)
	}
	if rec, _ := s.Node("n"); rec.GetBinding().GetCaKeySha256() != ca1 {
		t.Fatalf("binding lost by a state change: %v", rec.GetBinding())
	}
	if res, err := s.DeleteNode(11, &statev1.DeleteNode{NodeName: "n"}); err != nil || !res.Changed {
		t.Fatalf("delete: %+v, %v", res, err)
	}
	if res, err := s.DeleteNode(12, &statev1.DeleteNode{NodeName: "n"}); err != nil || res.Changed {
		t.Fatalf("delete again: %+v, %v", res, err)
	}
	if _, ok := s.Node("n"); ok || s.View().Len() != 0 || s.Graph().Len() != 0 {
		t.Fatal("the deleted node is still in the state or the graph")
	}
	// Another machine with a certificate of another CA registers the name.
	if _, err := s.PutInventory(13, putBound("n", "new-machine", 1, "z", binding(id, ca2))); err != nil {
		t.Fatalf("re-register after delete: %v", err)
	}
	if rec, _ := s.Node("n"); rec.GetBinding().GetCaKeySha256() != ca2 || rec.GetInventory().GetHost().GetMachineId() != "new-machine" {
		t.Fatalf("re-registered record: %v", rec)
	}
	var kinds []ginv1.WatchEventKind
	for len(events) > 0 {
		kinds = append(kinds, (<-events).Kind)
	}
	deleted := 0
	for _, k := range kinds {
		if k == ginv1.WatchEventKind_WATCH_EVENT_KIND_NODE_DELETED {
			deleted++
		}
	}
	if deleted != 1 {
		t.Fatalf("watch events %v: want exactly one NODE_DELETED", kinds)
	}
}
