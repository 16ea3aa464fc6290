package master

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/inventory"
	"github.com/gin-topology/gin/internal/testkit"
)

// TestHandshakeAdmission: with --max-handshakes 2 and --handshake-queue 1,
// two agents that said hello and have not sent their inventory hold both
// slots, a third Hello waits, a fourth is refused at once with
// RESOURCE_EXHAUSTED and a retry hint; reads are answered meanwhile; when
// one handshake ends (its inventory is committed) the waiting agent gets
// its HelloAck; an agent in sync frees its slot with the HelloAck. Counts,
// not timing.
func TestHandshakeAdmission(t *testing.T) {
	s := startServerWith(t, func(c *Config) {
		c.HeartbeatInterval, c.MaxHandshakes, c.HandshakeQueue, c.HelloTimeout = time.Minute, 2, 1, time.Minute
	})
	conn := dialPlain(t, s.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newMasterCollector(s))
	metricsSay := func(inFlight, waiting, refused int) {
		t.Helper()
		want := fmt.Sprintf(`# HELP gin_master_agent_handshakes Agent handshakes (Hello until in sync) holding one of the --max-handshakes slots (in_flight) or waiting for one (waiting).
# TYPE gin_master_agent_handshakes gauge
gin_master_agent_handshakes{server="m1",state="in_flight"} %d
gin_master_agent_handshakes{server="m1",state="waiting"} %d
# HELP gin_master_agent_handshakes_refused_total Agent Hellos refused with RESOURCE_EXHAUSTED since start: every --max-handshakes slot taken and --handshake-queue full, the queue's wait at --handshake-rate longer than --hello-timeout, or no slot within --hello-timeout.
# TYPE gin_master_agent_handshakes_refused_total counter
gin_master_agent_handshakes_refused_total{server="m1"} %d
`, inFlight, waiting, refused)
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gin_master_agent_handshakes", "gin_master_agent_handshakes_refused_total"); err != nil {
			t.Fatal(err)
		}
	}
	hello := func(name string) (ginv1.AgentService_SessionClient, *ginv1.NodeInventory) {
		t.Helper()
		inv := simInventory(t, "dgx-h100", name)
		inv.Generation = 1
		st, err := ginv1.NewAgentServiceClient(conn).Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hash, _ := inventory.ContentHash(inv)
		if err := st.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Hello{Hello: &ginv1.Hello{
			NodeName: name, MachineId: inv.GetHost().GetMachineId(), InventoryHash: hash}}}); err != nil {
			t.Fatal(err)
		}
		return st, inv
	}
	helloAck := func(st ginv1.AgentService_SessionClient) *ginv1.HelloAck {
		t.Helper()
		r, err := st.Recv()
		if err != nil || r.GetHelloAck() == nil {
			t.Fatalf("want a HelloAck, got %v, %v", r, err)
		}
		return r.GetHelloAck()
	}

	a, invA := hello("adm1")
	helloAck(a)
	b, _ := hello("adm2")
	helloAck(b)
	if got := s.admission.inFlight(); got != 2 {
		t.Fatalf("%d handshakes in flight, want 2", got)
	}
	c, _ := hello("adm3")
	testkit.WaitFor(t, 30*time.Second, "the third Hello to wait for a slot", func() bool { return s.admission.waiting.Load() == 1 })
	metricsSay(2, 1, 0)

	d, _ := hello("adm4")
	_, err := d.Recv()
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-handshakes") {
		t.Fatalf("fourth Hello: %v; want RESOURCE_EXHAUSTED naming --max-handshakes", err)
	}
	var hint *errdetails.RetryInfo
	for _, det := range status.Convert(err).Details() {
		if ri, ok := det.(*errdetails.RetryInfo); ok {
			hint = ri
		}
	}
	if hint == nil || hint.GetRetryDelay().AsDuration() != minHandshakeRetry {
		t.Fatalf("refusal carries retry hint %v, want %s (the queue of one waits 4 ms, the hint is at least a second)", hint, minHandshakeRetry)
	}
	metricsSay(2, 1, 1)
	// Reads are answered while every slot is taken.
	if _, err := ginv1.NewTopologyServiceClient(conn).ListNodes(ctx, &ginv1.ListNodesRequest{}); err != nil {
		t.Fatalf("ListNodes while handshakes are full: %v", err)
	}

	// adm1's inventory is committed: its slot goes to adm3.
	if err := a.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Inventory{Inventory: invA}}); err != nil {
		t.Fatal(err)
	}
	if r, err := a.Recv(); err != nil || r.GetInventoryAck().GetAcceptedGeneration() != 1 {
		t.Fatalf("adm1 inventory: %v, %v", r, err)
	}
	helloAck(c)
	metricsSay(2, 0, 1) // adm2 and adm3

	// An agent in sync ends its handshake with the HelloAck: adm1 again
	// (a new session) is admitted only once a slot is free, and frees it.
	_ = a.CloseSend()
	_ = b.CloseSend()
	testkit.WaitFor(t, 30*time.Second, "adm2's session to end and free its slot", func() bool { return s.admission.inFlight() == 1 })
	a2, _ := hello("adm1")
	if ack := helloAck(a2); !ack.GetInSync() {
		t.Fatalf("adm1 again: %v, want in sync", ack)
	}
	testkit.WaitFor(t, 30*time.Second, "the in-sync agent to free its slot", func() bool { return s.admission.inFlight() == 1 })
}

// admission.acquire on its own: a waiter whose context ends or whose wait
// runs out leaves the queue (counts, no timing asserted), releases are
// idempotent, and a queue of 0 refuses at once.
func TestAdmissionAcquire(t *testing.T) {
	a := newAdmission(1, 1, 1e6, 1, nil)
	ctx := context.Background()
	release, err := a.acquire(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := a.acquire(cctx, time.Hour)
		done <- err
	}()
	testkit.WaitFor(t, 10*time.Second, "the second acquire to wait", func() bool { return a.waiting.Load() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	if a.waiting.Load() != 0 || a.refused.Load() != 0 {
		t.Fatalf("after a cancelled wait: waiting %d, refused %d", a.waiting.Load(), a.refused.Load())
	}
	var busy *errHandshakeBusy
	if _, err := a.acquire(ctx, time.Nanosecond); !errors.As(err, &busy) || !strings.Contains(err.Error(), "waited") {
		t.Fatalf("a wait that runs out: %v, want errHandshakeBusy", err)
	}
	release()
	release() // idempotent: the slot is not freed twice
	again, err := a.acquire(ctx, time.Minute)
	if err != nil || a.inFlight() != 1 {
		t.Fatalf("after release: %v, %d in flight", err, a.inFlight())
	}
	none := newAdmission(1, 0, 1e6, 1, nil)
	if _, err := none.acquire(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := none.acquire(ctx, time.Minute); !errors.As(err, &busy) || none.refused.Load() != 1 {
		t.Fatalf("no queue: %v, refused %d", err, none.refused.Load())
	}
	again()
}
