package master

import (
	"context"
	"testing"
	"time"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// A plan pinned on the leader is pushed on the open sessions of its nodes'
// agents, and on no other.
func TestPinnedPlanIsPushedToItsNodesAgents(t *testing.T) {
	_, conn := startServer(t, time.Second)
	sessions := map[string]*session{}
	for _, n := range []string{"pp1", "pp2", "pp3"} {
		s, _ := openSession(t, conn, simInventory(t, "dgx-h100", n))
		if ack, err := s.send(simInventory(t, "dgx-h100", n)); err != nil || ack == nil {
			t.Fatalf("%s: inventory not accepted: %v", n, err)
		}
		sessions[n] = s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := ginv1.NewPlanServiceClient(conn).GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: "push-1", Nodes: "pp[1-2]"})
	if err != nil {
		t.Fatal(err)
	}
	want := resp.GetPlan().GetContentHash()
	for _, n := range []string{"pp1", "pp2"} {
		r, err := sessions[n].stream.Recv()
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if len(r.GetPlans()) != 1 || r.GetPlans()[0].GetContentHash() != want || r.GetPlans()[0].GetJobId() != "push-1" {
			t.Fatalf("%s got %v, want the plan %s of job push-1", n, r.GetPlans(), want)
		}
	}
	// pp3 is not in the job: its next message answers its heartbeat.
	s := sessions["pp3"]
	if err := s.stream.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Heartbeat{Heartbeat: &ginv1.Heartbeat{Sequence: 7}}}); err != nil {
		t.Fatal(err)
	}
	r, err := s.stream.Recv()
	if err != nil || r.GetHeartbeatAck().GetSequence() != 7 || len(r.GetPlans()) != 0 {
		t.Fatalf("pp3: %v, %v", r, err)
	}
}

func TestPlanPushQueues(t *testing.T) {
	var p planPush
	a, cancelA := p.subscribe("n1")
	b, cancelB := p.subscribe("n1")
	c, cancelC := p.subscribe("n2")
	defer cancelC()
	pl := &ginv1.Plan{JobId: "j", Nodes: []string{"n1", "n3"}}
	if q, full := p.publish(pl); q != 2 || full != 0 {
		t.Fatalf("queued %d, full %d; want n1's two sessions", q, full)
	}
	if (<-a).GetJobId() != "j" || (<-b).GetJobId() != "j" || len(c) != 0 {
		t.Fatal("wrong queues")
	}
	cancelA()
	cancelB()
	for range planPushBuffer + 3 {
		p.publish(&ginv1.Plan{JobId: "k", Nodes: []string{"n2"}})
	}
	if len(c) != planPushBuffer {
		t.Fatalf("queue holds %d, bound %d", len(c), planPushBuffer)
	}
	if q, _ := p.publish(pl); q != 0 {
		t.Fatalf("cancelled sessions still queued %d", q)
	}
}
