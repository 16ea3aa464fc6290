package state

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
)

// TestAdmissionsRules: an admission is kept until the server registers
// (used once) unless the registration is a member's, revoke takes it back, replays change nothing, the count is
// bounded, and snapshots carry them.
func TestAdmissionsRules(t *testing.T) {
	s := New(nil)
	admit := &statev1.AdmitServer{ServerId: "m4", RaftAddress: "10.0.0.4:5001", AdmittedBy: "spiffe://gin/admin"}
	steps := []struct {
		name    string
		apply   func(index uint64) (Result, error)
		changed bool
		has     bool // m4 admitted afterwards
	}{
		{"admit", func(i uint64) (Result, error) { return s.AdmitServer(i, admit) }, true, true},
		{"replayed", func(i uint64) (Result, error) { return s.AdmitServer(i, admit) }, false, true},
		{"registers: used up", func(i uint64) (Result, error) {
			return s.RegisterServer(i, &statev1.RegisterServer{ServerId: "m4", RaftAddress: "10.0.0.4:5001"})
		}, true, false},
		{"registers again: nothing to use", func(i uint64) (Result, error) {
			return s.RegisterServer(i, &statev1.RegisterServer{ServerId: "m4", RaftAddress: "10.0.0.4:5001"})
		}, false, false},
		{"admitted again", func(i uint64) (Result, error) { return s.AdmitServer(i, admit) }, true, true},
		// A member's registration (its Join was checked while it was one)
		// leaves an admission written after that check for its next join.
		{"a member's registration keeps it", func(i uint64) (Result, error) {
			return s.RegisterServer(i, &statev1.RegisterServer{ServerId: "m4", RaftAddress: "10.0.0.4:5001", KeepAdmission: true})
		}, false, true},
		{"revoked", func(i uint64) (Result, error) {
			return s.AdmitServer(i, &statev1.AdmitServer{ServerId: "m4", Revoke: true})
		}, true, false},
		{"revoked again", func(i uint64) (Result, error) {
			return s.AdmitServer(i, &statev1.AdmitServer{ServerId: "m4", Revoke: true})
		}, false, false},
	}
	for i, st := range steps {
		res, err := st.apply(uint64(i + 1))
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if res.Changed != st.changed {
			t.Fatalf("%s: changed %v, want %v", st.name, res.Changed, st.changed)
		}
		if _, ok := s.Admission("m4"); ok != st.has {
			t.Fatalf("%s: admitted %v, want %v", st.name, ok, st.has)
		}
	}
	if r, _ := s.Server("m4"); r.GetKeepAdmission() {
		t.Fatal("the stored registration carries keep_admission: it belongs to the command, not the record")
	}
	for i := range MaxAdmissions {
		if _, err := s.AdmitServer(uint64(100+i), &statev1.AdmitServer{ServerId: fmt.Sprintf("n%02d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AdmitServer(200, &statev1.AdmitServer{ServerId: "one-more"}); !errors.Is(err, ErrTooManyAdmissions) {
		t.Fatalf("admission %d: %v, want ErrTooManyAdmissions", MaxAdmissions+1, err)
	}
	if _, ok := s.Admission("one-more"); ok {
		t.Fatal("a refused admission was stored")
	}
	snap := s.Snapshot()
	if len(snap.GetAdmissions()) != MaxAdmissions {
		t.Fatalf("snapshot holds %d admissions, want %d", len(snap.GetAdmissions()), MaxAdmissions)
	}
	r := New(nil)
	if err := r.Restore(200, snap); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(r.Snapshot(), snap) || len(r.Admissions()) != MaxAdmissions {
		t.Fatal("restore then snapshot differs")
	}
	big := proto.CloneOf(snap)
	big.Admissions = append(big.Admissions, &statev1.AdmitServer{ServerId: "one-more"})
	if err := New(nil).Restore(200, big); err == nil {
		t.Fatalf("a snapshot with %d admissions restored", len(big.GetAdmissions()))
	}
}
