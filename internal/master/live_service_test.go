package master

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/pki"
)

// liveWindows are window i of a 4-rank job on node001 and node002 (two
// ranks each, a ring across the nodes), rank slow's sends taking 1.6x.
func liveWindows(i, slow int) map[string][]*ginv1.RankWindow {
	out := map[string][]*ginv1.RankWindow{}
	t0 := time.Unix(1_800_000_000, 0).Add(time.Duration(i) * time.Second)
	for r := 0; r < 4; r++ {
		node := fmt.Sprintf("node%03d", r/2+1)
		f := 1.0
		if r == slow {
			f = 1.6
		}
		from := 1.0
		if (r+2)%4 == slow {
			from = 1.6
		}
		net := uint64(250_000 * 1200)
		w := &ginv1.RankWindow{Job: "77", CommId: 9, Nranks: 4, Nnodes: 2, Rank: uint32(r), GpuIndex: int32(r % 2),
			Nic: []string{"mlx5_0", "mlx5_3"}[r%2], Pid: uint32(100 + r), // rails 0 and 1 of a DGX H100
			StartUnixNano: t0.UnixNano(), EndUnixNano: t0.Add(time.Second).UnixNano(),
			CollectivesStarted: uint64(300 * (i + 1)), CollectivesDone: uint64(300 * (i + 1)),
			Collectives: []*ginv1.CollectiveWindow{{Collective: "all_reduce", Log2Bytes: 23, Count: 300, SumNs: 300_000_000, MaxNs: 2_000_000}},
			Peers: []*ginv1.PeerWindow{
				{Peer: uint32((r + 2) % 4), Send: true, Bytes: 300 << 23, Steps: 1200, WaitNs: []uint64{1, 1, uint64(float64(net) * f)}},
				{Peer: uint32((r + 2) % 4), Bytes: 300 << 23, Steps: 1200, WaitNs: []uint64{uint64(float64(net) * from), 1, 1}},
			}}
		out[node] = append(out[node], w)
	}
	return out
}

func TestLiveReportAndVerdict(t *testing.T) {
	s, conn := startServer(t, time.Minute)
	registerNodes(t, s, "dgx-h100", "node001", "node002")
	fab, _, err := sim.BuildFabric(sim.DefaultFabricSpec(), "test", []sim.FabricNode{{Name: "node001", Profile: "dgx-h100", Index: 0}, {Name: "node002", Profile: "dgx-h100", Index: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ginv1.NewAdminServiceClient(conn).ImportFabric(context.Background(), &ginv1.ImportFabricRequest{Fabric: fab}); err != nil {
		t.Fatal(err)
	}
	lc := ginv1.NewLiveServiceClient(conn)
	ctx := context.Background()
	if _, err := lc.GetJobLive(ctx, &ginv1.GetJobLiveRequest{JobId: "77"}); status.Code(err) != codes.NotFound ||
		!strings.Contains(err.Error(), "NCCL_GIN_ENABLED=1") {
		t.Fatalf("unknown job: %v, want NOT_FOUND naming the fix", err)
	}
	for i := 0; i < 6; i++ {
		for node, ws := range liveWindows(i, 1) {
			resp, err := lc.ReportRanks(ctx, &ginv1.ReportRanksRequest{NodeName: node, Windows: ws})
			if err != nil || resp.GetAccepted() != uint32(len(ws)) {
				t.Fatalf("ReportRanks %s: %v %v", node, resp, err)
			}
		}
		s.liveJobs.det.Evaluate(time.Now())
	}
	live, err := lc.GetJobLive(ctx, &ginv1.GetJobLiveRequest{JobId: "77"})
	if err != nil {
		t.Fatal(err)
	}
	if len(live.GetRanks()) != 4 || len(live.GetSuspects()) != 1 {
		t.Fatalf("ranks %d, suspects %v", len(live.GetRanks()), live.GetSuspects())
	}
	sp := live.GetSuspects()[0]
	if sp.GetKind() != "slow-link" || sp.GetNode() != "node001" || sp.GetComponent() != "mlx5_3" || !sp.GetConfirmed() {
		t.Fatalf("suspect %v, want a confirmed slow-link at node001 mlx5_3", sp)
	}
	// The simulated fabric cables every compute NIC to a leaf switch:
	// the suspect names it.
	t.Logf("%s %s: %s", sp.GetNode(), sp.GetComponent(), sp.GetSwitchPort())
	if !strings.Contains(sp.GetSwitchPort(), "leaf") {
		t.Errorf("suspect names no switch: %v", sp)
	}

	for _, tc := range []struct {
		name string
		req  *ginv1.ReportRanksRequest
		code codes.Code
	}{
		{"no node", &ginv1.ReportRanksRequest{Windows: liveWindows(0, -1)["node001"]}, codes.InvalidArgument},
		{"too many windows", &ginv1.ReportRanksRequest{NodeName: "node001", Windows: make([]*ginv1.RankWindow, MaxRankWindows+1)}, codes.InvalidArgument},
		{"invalid window", &ginv1.ReportRanksRequest{NodeName: "node001", Windows: []*ginv1.RankWindow{{Job: "77", Nranks: 2, Rank: 5}}}, codes.InvalidArgument},
		{"no job", &ginv1.ReportRanksRequest{NodeName: "node001", Windows: []*ginv1.RankWindow{{Nranks: 1}}}, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := lc.ReportRanks(ctx, tc.req); status.Code(err) != tc.code {
				t.Fatalf("%v, want %v", err, tc.code)
			}
		})
	}
}

// An agent certificate reports its own node's ranks only.
func TestLiveReportOwnNodeOnly(t *testing.T) {
	p := newTestPKI(t)
	s := startTLSServer(t, p)
	conn := p.dial(t, s.Addr(), pki.Identity{Role: pki.RoleAgent, Name: "node002"})
	lc := ginv1.NewLiveServiceClient(conn)
	ws := liveWindows(0, -1)
	_, err := lc.ReportRanks(context.Background(), &ginv1.ReportRanksRequest{NodeName: "node001", Windows: ws["node001"]})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "own node") {
		t.Fatalf("node002 reporting node001: %v, want PERMISSION_DENIED", err)
	}
	if _, err := lc.ReportRanks(context.Background(), &ginv1.ReportRanksRequest{NodeName: "node002", Windows: ws["node002"]}); err != nil {
		t.Fatalf("own node: %v", err)
	}
	reader := ginv1.NewLiveServiceClient(p.dial(t, s.Addr(), pki.Identity{Role: pki.RoleReader}))
	if _, err := reader.ReportRanks(context.Background(), &ginv1.ReportRanksRequest{NodeName: "node002", Windows: ws["node002"]}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a reader reporting: %v, want PERMISSION_DENIED", err)
	}
	if _, err := reader.GetJobLive(context.Background(), &ginv1.GetJobLiveRequest{JobId: "77"}); err != nil {
		t.Fatalf("a reader reading: %v", err)
	}
}
