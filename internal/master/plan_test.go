package master

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// registerNodes commits simulated inventories for the named nodes.
func registerNodes(t *testing.T, s *Server, profile string, names ...string) {
	t.Helper()
	for _, n := range names {
		inv := simInventory(t, profile, n)
		inv.Generation = 1
		if _, err := s.putInventory(context.Background(), inv); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPlanIsPinnedOnceForEveryCaller(t *testing.T) {
	s, conn := startServer(t, time.Second)
	registerNodes(t, s, "dgx-h100", "node001", "node002", "node003", "node004")
	pc := ginv1.NewPlanServiceClient(conn)
	ctx := context.Background()

	// 16 ranks ask at once: one plan is computed and pinned, all get it.
	const ranks = 16
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		hashes = map[string]int{}
		made   int
	)
	for range ranks {
		wg.Go(func() {
			resp, err := pc.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "4242", Nodes: "node[001-004]"})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			hashes[resp.GetPlan().GetContentHash()]++
			if resp.GetCreated() {
				made++
			}
		})
	}
	wg.Wait()
	if len(hashes) != 1 || made != 1 {
		t.Fatalf("%d distinct plans, %d creations; want 1 and 1", len(hashes), made)
	}
	got, err := pc.GetPlan(ctx, &ginv1.GetPlanRequest{JobId: "4242"})
	if err != nil {
		t.Fatal(err)
	}
	first := got.GetPlan()
	if first.GetCreatedIndex() == 0 || len(first.GetRules()) == 0 || first.GetExpiresAt() == nil {
		t.Fatalf("plan = %v", first)
	}

	// A later request naming other nodes still gets the pinned plan.
	again, err := pc.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "4242", Nodes: "node[001-002]"})
	if err != nil || again.GetCreated() || !proto.Equal(again.GetPlan(), first) {
		t.Fatalf("second request: created %v, same plan %v, err %v", again.GetCreated(), proto.Equal(again.GetPlan(), first), err)
	}

	// Deleting it (epilog) removes it; deleting again is fine.
	if d, err := pc.DeletePlan(ctx, &ginv1.DeletePlanRequest{JobId: "4242"}); err != nil || !d.GetDeleted() {
		t.Fatalf("delete: %v %v", d, err)
	}
	if d, err := pc.DeletePlan(ctx, &ginv1.DeletePlanRequest{JobId: "4242"}); err != nil || d.GetDeleted() {
		t.Fatalf("second delete: %v %v", d, err)
	}
	if _, err := pc.GetPlan(ctx, &ginv1.GetPlanRequest{JobId: "4242"}); status.Code(err) != codes.NotFound {
		t.Fatalf("get after delete: %v, want NotFound", err)
	}
}

func TestPlanBadInputChangesNothing(t *testing.T) {
	s, conn := startServer(t, time.Second)
	registerNodes(t, s, "dgx-h100", "node001", "node002")
	pc := ginv1.NewPlanServiceClient(conn)
	tests := []struct {
		name string
		req  *ginv1.GetOrCreatePlanRequest
		code codes.Code
	}{
		{"empty job id", &ginv1.GetOrCreatePlanRequest{Nodes: "node001"}, codes.InvalidArgument},
		{"bad job id", &ginv1.GetOrCreatePlanRequest{JobId: "a b", Nodes: "node001"}, codes.InvalidArgument},
		{"no nodes for a new job", &ginv1.GetOrCreatePlanRequest{JobId: "1"}, codes.NotFound},
		{"hostlist syntax", &ginv1.GetOrCreatePlanRequest{JobId: "1", Nodes: "node[001-"}, codes.InvalidArgument},
		{"unknown node", &ginv1.GetOrCreatePlanRequest{JobId: "1", Nodes: "node[001-003]"}, codes.NotFound},
		{"impossible GPU count", &ginv1.GetOrCreatePlanRequest{JobId: "1", Nodes: "node[001-002]", GpusPerNode: 9}, codes.InvalidArgument},
		{"TTL too long", &ginv1.GetOrCreatePlanRequest{JobId: "1", Nodes: "node001", TtlSeconds: 1 << 30}, codes.InvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := s.store.Index()
			_, err := pc.GetOrCreatePlan(context.Background(), tc.req)
			if status.Code(err) != tc.code {
				t.Fatalf("code = %v (%v), want %v", status.Code(err), err, tc.code)
			}
			if s.store.Index() != before || len(s.store.Plans()) != 0 {
				t.Fatal("a rejected plan request changed the state")
			}
		})
	}
}

func TestExpiredPlansAreDeleted(t *testing.T) {
	s, conn := startServer(t, time.Second)
	registerNodes(t, s, "dgx-h100", "node001")
	pc := ginv1.NewPlanServiceClient(conn)
	if _, err := pc.GetOrCreatePlan(context.Background(), &ginv1.GetOrCreatePlanRequest{JobId: "short", Nodes: "node001", TtlSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	s.expirePlans(context.Background(), time.Now()) // not yet
	if _, ok := s.store.Plan("short"); !ok {
		t.Fatal("plan expired early")
	}
	s.expirePlans(context.Background(), time.Now().Add(2*time.Minute))
	if _, ok := s.store.Plan("short"); ok {
		t.Fatal("expired plan still pinned")
	}
}
