package agent

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/inventory"
	"github.com/gin-topology/gin/internal/masteraddr"
	"github.com/gin-topology/gin/internal/testkit"
)

// waitTimeout bounds every wait in these tests; it is generous so that a
// slow, loaded -race run does not flake.
const waitTimeout = 15 * time.Second

// watched is a mutex plus a broadcast channel closed on every change, so
// tests wait on conditions instead of sleeping.
type watched struct {
	mu sync.Mutex
	ch chan struct{}
}

func (w *watched) init() { w.ch = make(chan struct{}) }

// change runs fn under the lock and wakes every waiter.
func (w *watched) change(fn func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fn()
	close(w.ch)
	w.ch = make(chan struct{})
}

// read runs fn under the lock.
func (w *watched) read(fn func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fn()
}

// waitFor waits until cond (run under the lock) holds.
func (w *watched) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		ok := cond()
		ch := w.ch
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting for %s", waitTimeout, what)
		}
	}
}

// fakeSource is an inventory source whose content the test changes.
type fakeSource struct {
	watched
	inv   *ginv1.NodeInventory
	err   error
	calls int
	// served is the model of the inventory returned by each call.
	served []string
}

func newFakeSource(model string) *fakeSource {
	s := &fakeSource{inv: testInventory(model)}
	s.init()
	return s
}

func (s *fakeSource) Name() string { return "fake" }

func (s *fakeSource) Collect(ctx context.Context) (*ginv1.NodeInventory, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var inv *ginv1.NodeInventory
	var err error
	s.change(func() {
		s.calls++
		inv, err = proto.CloneOf(s.inv), s.err
		s.served = append(s.served, s.inv.GetGpus()[0].GetModel())
	})
	if err != nil {
		return nil, err
	}
	inv.CollectedAt = timestamppb.Now()
	return inv, nil
}

// setModel changes the inventory's content.
func (s *fakeSource) setModel(model string) {
	s.change(func() { s.inv = testInventory(model) })
}

func (s *fakeSource) callCount() int {
	var n int
	s.read(func() { n = s.calls })
	return n
}

func testInventory(model string) *ginv1.NodeInventory {
	return &ginv1.NodeInventory{
		NodeName: "node-a",
		Host:     &ginv1.Host{Hostname: "node-a", MachineId: "0123456789abcdef0123456789abcdef"},
		Gpus: []*ginv1.Gpu{{
			Uuid: "GPU-00000000-0000-0000-0000-000000000000", Index: 0, Model: model,
			PciBusId: "0000:07:00.0", NumaNode: 0,
		}},
		Source: "fake",
	}
}

func hashOf(t *testing.T, inv *ginv1.NodeInventory) string {
	t.Helper()
	h, err := inventory.ContentHash(inv)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// store is what a master cluster holds for each node; several fake masters
// may share one (replicas).
type store struct {
	mu   sync.Mutex
	held map[string]storedInv
}

type storedInv struct {
	generation uint64
	hash       string
	inv        *ginv1.NodeInventory // nil when the test seeded only a hash
}

// all returns every held inventory (the fake serves one node per test).
func (s *store) all() []storedInv {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]storedInv, 0, len(s.held))
	for _, v := range s.held {
		out = append(out, v)
	}
	return out
}

func newStore() *store { return &store{held: map[string]storedInv{}} }

func (s *store) get(node string) storedInv {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[node]
}

func (s *store) put(node string, v storedInv) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held[node] = v
}

// fakeMaster is a real gRPC AgentService on loopback that records what it
// receives and follows the protocol of api/proto/gin/v1/agent.proto.
type fakeMaster struct {
	ginv1.UnimplementedAgentServiceServer
	watched
	addr   string
	srv    *grpc.Server
	store  *store
	health *health.Server // gin.v1.AgentService SERVING unless a test says otherwise

	// Behaviour, set before the agent connects or through change.
	leaderHint     string        // answer Hello with this hint, then FAILED_PRECONDITION
	notLeader      bool          // FAILED_PRECONDITION without a hint in a response
	trailerHint    string        // with notLeader: the leader named in the gin-leader-hint trailer
	advertise      string        // leader_hint on every response: the name this master gives itself
	rejectCode     codes.Code    // code for reject (default INVALID_ARGUMENT)
	reject         string        // reject inventories with INVALID_ARGUMENT and this message
	busy           string        // refuse sessions at the Hello with RESOURCE_EXHAUSTED and this message
	heartbeatEvery time.Duration // heartbeat_interval sent with the HelloAck
	holdAcks       chan struct{} // when set, each inventory ack waits for a receive
	holdHello      chan struct{} // when set, each HelloAck waits for a receive
	kickCh         chan struct{} // closed by kick: live sessions end with UNAVAILABLE
	sessionStarts  []time.Time
	hellos         []*ginv1.Hello
	inventories    []*ginv1.NodeInventory
	// deltas counts updates that arrived as InventoryDelta (they are also
	// appended to inventories, expanded against the held inventory).
	deltas          int
	heartbeats      []*ginv1.Heartbeat
	heartbeatsBySes map[int]int
	// ends is how each established session ended (its handler's error;
	// io.EOF: the agent closed its side).
	ends []error
}

func newFakeMaster(t *testing.T, st *store) *fakeMaster {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &fakeMaster{addr: lis.Addr().String(), srv: grpc.NewServer(), store: st, health: health.NewServer(),
		kickCh: make(chan struct{}), heartbeatsBySes: map[int]int{}}
	m.init()
	ginv1.RegisterAgentServiceServer(m.srv, m)
	healthpb.RegisterHealthServer(m.srv, m.health)
	m.health.SetServingStatus(agentHealthService, healthpb.HealthCheckResponse_SERVING)
	go func() { _ = m.srv.Serve(lis) }()
	t.Cleanup(m.srv.Stop)
	return m
}

// kick ends every live session with UNAVAILABLE (the master stays up).
func (m *fakeMaster) kick() {
	m.change(func() {
		close(m.kickCh)
		m.kickCh = make(chan struct{})
	})
}

func (m *fakeMaster) Session(stream ginv1.AgentService_SessionServer) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil {
		return status.Error(codes.InvalidArgument, "first message must be hello")
	}
	var (
		session               int
		hint, reject, trailer string
		busy                  string
		advertise             string
		rejectCode            codes.Code
		notLeader             bool
		hbEvery               time.Duration
		kick                  chan struct{}
		holdAcks              chan struct{}
		holdHello             chan struct{}
	)
	m.change(func() {
		m.sessionStarts = append(m.sessionStarts, time.Now())
		m.hellos = append(m.hellos, hello)
		session = len(m.hellos)
		hint, reject, notLeader, hbEvery = m.leaderHint, m.reject, m.notLeader, m.heartbeatEvery
		trailer, advertise, rejectCode = m.trailerHint, m.advertise, m.rejectCode
		kick, holdAcks = m.kickCh, m.holdAcks
		busy, holdHello = m.busy, m.holdHello
	})
	if holdHello != nil {
		select {
		case <-holdHello:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if busy != "" {
		return status.Error(codes.ResourceExhausted, busy)
	}
	if hint != "" {
		if err := stream.Send(&ginv1.SessionResponse{LeaderHint: hint}); err != nil {
			return err
		}
		return status.Error(codes.FailedPrecondition, "not the leader")
	}
	if notLeader {
		if trailer != "" {
			stream.SetTrailer(metadata.Pairs(apierr.LeaderHintKey, trailer))
		}
		return status.Error(codes.FailedPrecondition, "not the leader")
	}
	if rejectCode == codes.OK {
		rejectCode = codes.InvalidArgument
	}
	// send stamps every response the way the real master does.
	send := func(r *ginv1.SessionResponse) error {
		r.LeaderHint = advertise
		return stream.Send(r)
	}

	held := m.store.get(hello.GetNodeName())
	ack := &ginv1.SessionResponse{Msg: &ginv1.SessionResponse_HelloAck{HelloAck: &ginv1.HelloAck{
		HeldGeneration: held.generation,
		InSync:         held.generation > 0 && held.hash == hello.GetInventoryHash(),
	}}}
	if hbEvery > 0 {
		ack.HeartbeatInterval = durationpb.New(hbEvery)
	}
	if err := send(ack); err != nil {
		return err
	}
	return m.established(ctx, stream, session, send, reject, rejectCode, kick, holdAcks)
}

// established serves a session after its HelloAck and records how it ended.
func (m *fakeMaster) established(ctx context.Context, stream ginv1.AgentService_SessionServer, session int,
	send func(*ginv1.SessionResponse) error, reject string, rejectCode codes.Code, kick, holdAcks chan struct{}) (err error) {
	defer func() { m.change(func() { m.ends = append(m.ends, err) }) }()
	reqs := make(chan *ginv1.SessionRequest)
	errc := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case reqs <- req:
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		var req *ginv1.SessionRequest
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-kick:
			return status.Error(codes.Unavailable, "kicked")
		case err := <-errc:
			return err
		case req = <-reqs:
		}
		switch msg := req.GetMsg().(type) {
		case *ginv1.SessionRequest_Heartbeat:
			m.change(func() {
				m.heartbeats = append(m.heartbeats, msg.Heartbeat)
				m.heartbeatsBySes[session]++
			})
			if err := send(&ginv1.SessionResponse{Msg: &ginv1.SessionResponse_HeartbeatAck{
				HeartbeatAck: &ginv1.HeartbeatAck{Sequence: msg.Heartbeat.GetSequence(), ServerTime: timestamppb.Now()},
			}}); err != nil {
				return err
			}
		case *ginv1.SessionRequest_Inventory, *ginv1.SessionRequest_Delta:
			inv := req.GetInventory()
			if d := req.GetDelta(); d != nil {
				var held *ginv1.NodeInventory
				for _, si := range m.store.all() {
					if si.generation == d.GetBaseGeneration() && si.inv != nil {
						held = si.inv
					}
				}
				if held == nil {
					return status.Errorf(codes.FailedPrecondition, "delta against generation %d, which is not held", d.GetBaseGeneration())
				}
				full, err := inventory.ApplyDelta(held, d)
				if err != nil {
					return status.Errorf(codes.FailedPrecondition, "delta: %v", err)
				}
				inv = full
				m.change(func() { m.deltas++ })
			}
			m.change(func() { m.inventories = append(m.inventories, inv) })
			if reject != "" {
				return status.Error(rejectCode, reject)
			}
			cur := m.store.get(inv.GetNodeName())
			if inv.GetGeneration() != cur.generation+1 {
				return status.Errorf(codes.FailedPrecondition, "generation %d, want %d", inv.GetGeneration(), cur.generation+1)
			}
			if holdAcks != nil {
				select {
				case <-holdAcks:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			m.store.put(inv.GetNodeName(), storedInv{generation: inv.GetGeneration(), hash: hashOfInv(inv), inv: inv})
			if err := send(&ginv1.SessionResponse{Msg: &ginv1.SessionResponse_InventoryAck{
				InventoryAck: &ginv1.InventoryAck{AcceptedGeneration: inv.GetGeneration(), Index: 100 + inv.GetGeneration()},
			}}); err != nil {
				return err
			}
			m.change(func() {}) // wake waiters on the store
		default:
			return status.Errorf(codes.InvalidArgument, "unexpected %T", msg)
		}
	}
}

func hashOfInv(inv *ginv1.NodeInventory) string {
	h, err := inventory.ContentHash(inv)
	if err != nil {
		panic(err)
	}
	return h
}

// counts returns how many sessions, inventories and heartbeats m has seen.
func (m *fakeMaster) counts() (sessions, inventories, heartbeats int) {
	m.read(func() { sessions, inventories, heartbeats = len(m.hellos), len(m.inventories), len(m.heartbeats) })
	return
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer = testkit.LogBuffer

// testConfig is a fast configuration for src against masters, which the
// agent tries in the order given (the list is rotated so that node-a's
// start index, masteraddr.StartIndex, falls on masters[0]).
func testConfig(src Source, logs *syncBuffer, masters ...string) Config {
	return Config{
		NodeName:          "node-a",
		Masters:           triedInOrder("node-a", masters),
		HeartbeatInterval: 20 * time.Millisecond,
		CollectInterval:   20 * time.Millisecond,
		Source:            src,
		Logger:            slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		DialOptions:       []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		InitialBackoff:    10 * time.Millisecond,
		MaxBackoff:        100 * time.Millisecond,
		Version:           "test-1.0",
		Rand:              rand.NewPCG(1, 2),
	}
}

// runner is an agent running in the background.
type runner struct {
	a      *Agent
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error         // Run's result, valid after done
}

// runAgent starts the agent; cleanup cancels it and checks that Run ended.
func runAgent(t *testing.T, cfg Config) *runner {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return startAgent(t, a)
}

// startAgent runs a (made by New, with test hooks set as needed); cleanup
// cancels it and checks that Run ended.
func startAgent(t *testing.T, a *Agent) *runner {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{a: a, cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = a.Run(ctx)
		close(r.done)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
			if r.err != nil {
				t.Errorf("Run: %v", r.err)
			}
		case <-time.After(waitTimeout):
			t.Errorf("Run did not return after cancel")
		}
	})
	return r
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	return addr
}

// triedInOrder rotates masters so that an agent of node tries them in the
// order given: masters[0] lands at masteraddr.StartIndex(node, len(masters)).
func triedInOrder(node string, masters []string) []string {
	n := len(masters)
	out := make([]string, n)
	start := masteraddr.StartIndex(node, n)
	for i, m := range masters {
		out[(start+i)%max(n, 1)] = m
	}
	return out
}
