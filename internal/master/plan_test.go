package master

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/state"
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

	// A later request naming the same nodes (in another order or form), or
	// none, gets the pinned plan.
	for _, nodes := range []string{"node[001-004]", "node004,node[001-003]", ""} {
		again, err := pc.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "4242", Nodes: nodes})
		if err != nil || again.GetCreated() || !proto.Equal(again.GetPlan(), first) {
			t.Fatalf("request naming %q: created %v, same plan %v, err %v", nodes, again.GetCreated(), proto.Equal(again.GetPlan(), first), err)
		}
	}
	// One naming other nodes is refused, naming both placements.
	_, err = pc.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "4242", Nodes: "node[001-002]"})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "node[001-004]") || !strings.Contains(err.Error(), "node[001-002]") {
		t.Fatalf("request naming other nodes: %v, want FailedPrecondition naming node[001-004] and node[001-002]", err)
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

// TestPlanSquattingIsRefused: whoever asks first for a job with a made-up
// placement (one node, one GPU) does not hand that plan to the job's real
// request (issue #11): the real request gets FAILED_PRECONDITION naming the
// difference, and nothing is written.
func TestPlanSquattingIsRefused(t *testing.T) {
	s, conn := startServer(t, time.Minute)
	registerNodes(t, s, "dgx-h100", "node001", "node002", "node003", "node004")
	pc := ginv1.NewPlanServiceClient(conn)
	ctx := context.Background()
	if _, err := pc.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "777", Nodes: "node001", GpusPerNode: 1}); err != nil {
		t.Fatal(err)
	}
	before := s.store.Index()
	tests := []struct {
		name, nodes string
		gpn         uint32
		want        []string
	}{
		{"other nodes", "node[001-004]", 8, []string{"node001", "node[001-004]"}},
		{"other GPUs per node", "node001", 8, []string{"1 GPUs per node", "asks for 8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pc.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "777", Nodes: tt.nodes, GpusPerNode: tt.gpn})
			if status.Code(err) != codes.FailedPrecondition {
				t.Fatalf("%v, want FailedPrecondition", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not name %q", err, w)
				}
			}
			if s.store.Index() != before {
				t.Fatal("a refused request wrote")
			}
		})
	}
}

func TestPlanBadInputChangesNothing(t *testing.T) {
	s, conn := startServer(t, time.Minute)
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
	s.plans.expire(context.Background(), time.Now()) // not yet
	if _, ok := s.store.Plan("short"); !ok {
		t.Fatal("plan expired early")
	}
	s.plans.expire(context.Background(), time.Now().Add(2*time.Minute))
	if _, ok := s.store.Plan("short"); ok {
		t.Fatal("expired plan still pinned")
	}
}

// TestPlanRaceLoserGetsThePlacementCheck: a request whose computation
// loses the Raft race to another placement's plan for the same job (two
// callers at once, the squatter's committed first) is refused with
// FAILED_PRECONDITION, as it would be had the squatter's plan been held
// when it asked, not handed the squatter's placement.
func TestPlanRaceLoserGetsThePlacementCheck(t *testing.T) {
	s, _ := startServer(t, time.Minute)
	registerNodes(t, s, "dgx-h100", "node001", "node002", "node003", "node004")
	squat := &ginv1.GetOrCreatePlanRequest{JobId: "778", Nodes: "node001", GpusPerNode: 1}
	real := &ginv1.GetOrCreatePlanRequest{JobId: "778", Nodes: "node[001-004]", GpusPerNode: 8}
	apply := s.plans.apply
	squatted := false
	// The squatter's plan commits while the real request's is computed:
	// just before the real one's write reaches Raft.
	s.plans.apply = func(ctx context.Context, cmd *statev1.Command) (state.Result, error) {
		if pp := cmd.GetPutPlan(); pp != nil && pp.GetPlan().GetJobId() == "778" && !squatted {
			squatted = true
			if _, err := s.plans.create(ctx, squat); err != nil {
				t.Errorf("squatter's plan: %v", err)
			}
		}
		return apply(ctx, cmd)
	}
	_, err := s.plans.GetOrCreatePlan(context.Background(), real)
	if !squatted {
		t.Fatal("the real request never reached Raft")
	}
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "node[001-004]") {
		t.Fatalf("real request after the squatter won the race: %v, want FailedPrecondition naming node[001-004]", err)
	}
	if pl, _ := s.store.Plan("778"); len(pl.GetNodes()) != 1 {
		t.Fatalf("pinned plan nodes %v, want the squatter's one (first committed wins)", pl.GetNodes())
	}
}
