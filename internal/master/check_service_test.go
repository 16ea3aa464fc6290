package master

import (
	"context"
	"testing"
	"time"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// TestCheckServiceFollowsWrites: verdicts over real gRPC; a node whose
// inventory changes is judged again (its record is a new entry), the
// others keep their cached assessment; the cluster rules see the change
// (a driver that differs from the majority of three).
func TestCheckServiceFollowsWrites(t *testing.T) {
	s, conn := startServer(t, time.Second)
	registerNodes(t, s, "dgx-h100", "node001", "node002", "node003")
	cc := ginv1.NewCheckServiceClient(conn)
	ctx := context.Background()
	check := func(nodes string) map[string]*ginv1.NodeVerdict {
		t.Helper()
		resp, err := cc.Check(ctx, &ginv1.CheckRequest{Nodes: nodes})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*ginv1.NodeVerdict{}
		for _, v := range resp.GetNodes() {
			out[v.GetNode()] = v
		}
		return out
	}
	for n, v := range check("") {
		if v.GetVerdict() != ginv1.Verdict_VERDICT_PASS {
			t.Fatalf("%s: %v before any fault", n, v)
		}
	}
	// node002 comes back with an NVLink down and another driver.
	inv := simInventory(t, "dgx-h100", "node002")
	inv.Generation = 2
	inv.Gpus[3].Nvlinks[7].State = ginv1.LinkState_LINK_STATE_DOWN
	inv.Host.DriverVersion = "550.54.15"
	if _, err := s.putInventory(ctx, inv); err != nil {
		t.Fatal(err)
	}
	vs := check("node[001-003]")
	v := vs["node002"]
	if v.GetVerdict() != ginv1.Verdict_VERDICT_FAIL || v.GetReason() != "nvlink-down GPU3/nvlink7" || len(v.GetFindings()) != 2 ||
		v.GetFindings()[1].GetCheck() != "driver-mismatch" {
		t.Errorf("node002 after the write: %v", v)
	}
	if vs["node001"].GetVerdict() != ginv1.Verdict_VERDICT_PASS || vs["node003"].GetVerdict() != ginv1.Verdict_VERDICT_PASS {
		t.Errorf("the other nodes: %v %v", vs["node001"], vs["node003"])
	}
	if got := check("node001"); len(got) != 1 {
		t.Errorf("--nodes node001: %d verdicts", len(got))
	}
	if _, err := cc.Check(ctx, &ginv1.CheckRequest{Nodes: "node099"}); err == nil {
		t.Error("an unknown node was answered")
	}
}
