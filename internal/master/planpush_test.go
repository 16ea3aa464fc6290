package master

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/testkit"
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
	got := map[string]chan string{"a": make(chan string, 4), "b": make(chan string, 4), "c": make(chan string, 4)}
	sub := func(node, who string) func() {
		return p.subscribe(node, func(pl *ginv1.Plan) error {
			got[who] <- pl.GetJobId()
			return nil
		})
	}
	cancelA, cancelB, cancelC := sub("n1", "a"), sub("n1", "b"), sub("n2", "c")
	defer cancelC()
	pl := &ginv1.Plan{JobId: "j", Nodes: []string{"n1", "n3"}}
	if q, full := p.publish(pl); q != 2 || full != 0 {
		t.Fatalf("queued %d, full %d; want n1's two sessions", q, full)
	}
	if <-got["a"] != "j" || <-got["b"] != "j" || len(got["c"]) != 0 {
		t.Fatal("wrong queues")
	}
	cancelA()
	cancelB()
	if q, _ := p.publish(pl); q != 0 {
		t.Fatalf("cancelled sessions still queued %d", q)
	}
}

// A session's queue is bounded while its pusher is blocked on the stream;
// the plans go out in order once it is free, and an idle session holds
// no pusher goroutine; a failed send closes the queue.
func TestPlanPushBoundAndIdle(t *testing.T) {
	var p planPush
	entered, unblock := make(chan string), make(chan struct{})
	var sent []string
	fail := false
	var q *planQueue
	cancel := p.subscribe("n", func(pl *ginv1.Plan) error {
		entered <- pl.GetJobId()
		<-unblock
		sent = append(sent, pl.GetJobId())
		if fail {
			return errors.New("stream broken")
		}
		return nil
	})
	defer cancel()
	for _, q0 := range p.subs["n"] {
		q = q0
	}
	running := func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.running
	}
	if running() {
		t.Fatal("a pusher runs for a session with nothing queued")
	}
	p.publish(&ginv1.Plan{JobId: "first", Nodes: []string{"n"}})
	if j := <-entered; j != "first" {
		t.Fatalf("pushed %q first", j)
	}
	queued, full := 0, 0
	for i := range planPushBuffer + 3 {
		q, f := p.publish(&ginv1.Plan{JobId: fmt.Sprint(i), Nodes: []string{"n"}})
		queued, full = queued+q, full+f
	}
	if queued != planPushBuffer || full != 3 {
		t.Fatalf("queued %d, full %d while the pusher is blocked; want %d and 3", queued, full, planPushBuffer)
	}
	go func() {
		for range planPushBuffer + 1 {
			unblock <- struct{}{}
		}
	}()
	for i := range planPushBuffer {
		if j := <-entered; j != fmt.Sprint(i) {
			t.Fatalf("push %d is %q, want in order", i, j)
		}
	}
	testkit.WaitFor(t, 10*time.Second, "the pusher to end once the queue is empty", func() bool { return !running() })
	if len(sent) != planPushBuffer+1 {
		t.Fatalf("sent %d plans, want %d", len(sent), planPushBuffer+1)
	}
	fail = true
	p.publish(&ginv1.Plan{JobId: "broken", Nodes: []string{"n"}})
	<-entered
	unblock <- struct{}{}
	testkit.WaitFor(t, 10*time.Second, "the pusher to end after a failed send", func() bool { return !running() })
	if q, full := p.publish(&ginv1.Plan{JobId: "after", Nodes: []string{"n"}}); q != 0 || full != 1 {
		t.Fatalf("after a failed send: queued %d, full %d; want the queue closed", q, full)
	}
}
