package raft

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAddVoterOnlyToTheConfigurationItWasDecidedOn: a Join's checks read
// one configuration (Membership); a removal committed before its AddVoter
// makes that AddVoter fail with ErrMembershipChanged instead of adding the
// server back, and a decision on the new configuration goes through.
func TestAddVoterOnlyToTheConfigurationItWasDecidedOn(t *testing.T) {
	c := newTLSCluster(t)
	m1 := c.nodes["m1"]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	members, seen, err := m1.Membership()
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 3 || seen == 0 {
		t.Fatalf("membership %v at index %d, want 3 members at a real index", members, seen)
	}
	if err := m1.RemoveServer(ctx, "m3"); err != nil {
		t.Fatal(err)
	}
	err = m1.AddVoter(ctx, "m3", c.nodes["m3"].Addr(), seen)
	if !errors.Is(err, ErrMembershipChanged) {
		t.Fatalf("AddVoter on the configuration of index %d after a removal: %v, want ErrMembershipChanged", seen, err)
	}
	if m1.IsMember("m3") {
		t.Fatal("m3 was added back to a configuration its check never read")
	}
	_, now, err := m1.Membership()
	if err != nil {
		t.Fatal(err)
	}
	if now <= seen {
		t.Fatalf("the removal left the configuration index at %d (was %d)", now, seen)
	}
	if err := m1.AddVoter(ctx, "m3", c.nodes["m3"].Addr(), now); err != nil {
		t.Fatalf("AddVoter on the latest configuration: %v", err)
	}
	if !m1.IsMember("m3") {
		t.Fatal("m3 is not a member after an AddVoter on the latest configuration")
	}
}
