package master

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
)

// The hostlist bomb of issue #21 (240-byte names, 131,072 of them) is
// refused before a name is made, naming the bound, on every read and
// write that takes a hostlist; a list within the bound is judged as
// before (unknown nodes NOT_FOUND).
func TestHostlistsAreBoundedPerRequest(t *testing.T) {
	s, conn := startServer(t, time.Minute)
	bomb := strings.Repeat("a", 240) + "[000000-131071]"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topo, plans := ginv1.NewTopologyServiceClient(conn), ginv1.NewPlanServiceClient(conn)
	calls := []struct {
		name string
		call func(nodes string) error
	}{
		{"GetMatrix", func(n string) error { _, err := topo.GetMatrix(ctx, &ginv1.GetMatrixRequest{Nodes: n}); return err }},
		{"ListNodes", func(n string) error { _, err := topo.ListNodes(ctx, &ginv1.ListNodesRequest{Nodes: n}); return err }},
		{"GetOrCreatePlan", func(n string) error {
			_, err := plans.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "1", Nodes: n})
			return err
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.call(bomb)
			if status.Code(err) != codes.ResourceExhausted || apierr.Reason(err) != apierr.ReasonNamesLimit || !strings.Contains(err.Error(), "the most one request may name is") {
				t.Fatalf("the bomb: %v, want RESOURCE_EXHAUSTED %s naming the bound", err, apierr.ReasonNamesLimit)
			}
			if err := c.call("nope[1-10]"); status.Code(err) != codes.NotFound {
				t.Fatalf("unknown nodes within the bound: %v, want NOT_FOUND", err)
			}
		})
	}
	if n := readNamesLimit(s.store.View()); n != MinRequestNames {
		t.Fatalf("read names limit on a 1-node cluster %d, want %d", n, MinRequestNames)
	}
}

// An agent's inventory is bounded in size (on every path) and in changes
// per minute (on its session); a duplicate is no change, and the bucket
// refills with time.
func TestInventorySizeAndChangeRateAreBounded(t *testing.T) {
	s, conn := startServer(t, time.Minute)
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	s.invBounds.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }

	big := simInventory(t, "dgx-h100", "node001")
	big.Source = strings.Repeat("x", MaxInventoryBytes)
	if _, err := s.putInventory(context.Background(), big); status.Code(toStatus(err)) != codes.ResourceExhausted ||
		apierr.Reason(toStatus(err)) != apierr.ReasonInventoryTooLarge || !strings.Contains(err.Error(), "262144") {
		t.Fatalf("an inventory of %d bytes: %v, want RESOURCE_EXHAUSTED %s naming the bound", MaxInventoryBytes, err, apierr.ReasonInventoryTooLarge)
	}

	inv := simInventory(t, "dgx-h100", "node001")
	next := nextGenerations(inv)
	sess, _ := openSession(t, conn, inv)
	var last *ginv1.NodeInventory
	for i := range InventoryChangesPerMinute {
		last = next()
		if _, err := sess.send(last); err != nil {
			t.Fatalf("change %d: %v", i+1, err)
		}
	}
	// The same inventory again is no change.
	if _, err := sess.send(last); err != nil {
		t.Fatalf("a duplicate past the bound: %v", err)
	}
	_, err := sess.send(next())
	if status.Code(err) != codes.ResourceExhausted || apierr.Reason(err) != apierr.ReasonInventoryRate || !strings.Contains(err.Error(), "the next is accepted in 2s") {
		t.Fatalf("change %d in a minute: %v, want RESOURCE_EXHAUSTED %s saying when", InventoryChangesPerMinute+1, err, apierr.ReasonInventoryRate)
	}
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	sess, _ = openSession(t, conn, last)
	if _, err := sess.send(next()); err != nil {
		t.Fatalf("after the refill: %v", err)
	}
}

// A Hello (or an inventory) for a node registered to another machine is
// refused without telling which machine holds the name (issue #21: the
// error named the registered machine id, which a caller could then
// present).
func TestIdentityConflictDoesNotRevealTheMachine(t *testing.T) {
	s, conn := startServer(t, time.Minute)
	real := simInventory(t, "dgx-h100", "node001")
	real.Generation = 1
	if _, err := s.putInventory(context.Background(), real); err != nil {
		t.Fatal(err)
	}
	held := real.GetHost().GetMachineId()
	other := simInventory(t, "dgx-h100", "node001")
	other.Host.MachineId = "0123456789abcdef0123456789abcdef"
	other.Generation = 2
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := ginv1.NewAgentServiceClient(conn).Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Hello{Hello: &ginv1.Hello{NodeName: "node001", MachineId: other.GetHost().GetMachineId()}}}); err != nil {
		t.Fatal(err)
	}
	_, helloErr := st.Recv()
	_, putErr := s.putInventory(context.Background(), other)
	for what, err := range map[string]error{"Hello": helloErr, "inventory": toStatus(putErr)} {
		if status.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(), "registered to another machine") {
			t.Errorf("%s from another machine: %v, want ALREADY_EXISTS", what, err)
		}
		if strings.Contains(err.Error(), held) {
			t.Errorf("%s from another machine: %q tells the registered machine id %s", what, err, held)
		}
	}
}
