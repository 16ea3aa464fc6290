package master

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/inventory"
	"github.com/gin-topology/gin/internal/testkit"
)

// fakeClock is a Clock only the test moves: After fires once Advance has
// moved the clock past its deadline.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock { return newFakeClockAt(time.Unix(1_000_000, 0)) }

func newFakeClockAt(t time.Time) *fakeClock { return &fakeClock{now: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{at: c.now.Add(d), ch: ch})
	return ch
}

// Advance moves the clock by d and fires every waiter due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}

// sleepers is how many After calls have not fired.
func (c *fakeClock) sleepers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// The pacer on its own, table-driven: after a burst, one admission per
// 1/rate of clock; a reservation past maxWait is refused with the queue's
// wait and takes nothing; a token given back is there for the next one;
// a clock going back adds nothing.
func TestPacerReservations(t *testing.T) {
	t0 := time.Unix(0, 0)
	type step struct {
		at       time.Duration // clock since t0
		maxWait  time.Duration
		unreserv bool // give a token back instead of reserving
		wantWait time.Duration
		wantOK   bool
	}
	tests := []struct {
		name  string
		rate  float64
		burst int
		steps []step
	}{
		{"burst at once, then one per 1/rate", 10, 2, []step{
			{0, time.Minute, false, 0, true},
			{0, time.Minute, false, 0, true},
			{0, time.Minute, false, 100 * time.Millisecond, true},
			{0, time.Minute, false, 200 * time.Millisecond, true},
			{200 * time.Millisecond, time.Minute, false, 100 * time.Millisecond, true},
		}},
		{"a wait past maxWait is refused and reserves nothing", 2, 1, []step{
			{0, time.Second, false, 0, true},
			{0, time.Second, false, 500 * time.Millisecond, true},
			{0, time.Second, false, 1000 * time.Millisecond, true},
			{0, time.Second, false, 1500 * time.Millisecond, false},
			{0, time.Second, false, 1500 * time.Millisecond, false},
			{500 * time.Millisecond, time.Second, false, 1000 * time.Millisecond, true},
		}},
		{"a token given back", 1, 1, []step{
			{0, time.Minute, false, 0, true},
			{0, time.Minute, false, time.Second, true},
			{0, time.Minute, true, 0, true},
			{0, time.Minute, false, time.Second, true},
		}},
		{"refill capped at the burst, clock going back", 1, 2, []step{
			{time.Hour, time.Minute, false, 0, true},
			{time.Hour, time.Minute, false, 0, true},
			{time.Hour, time.Minute, false, time.Second, true},
			{0, time.Minute, false, 2 * time.Second, true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPacer(tc.rate, tc.burst, t0)
			for i, s := range tc.steps {
				if s.unreserv {
					p.unreserve(t0.Add(s.at))
					continue
				}
				wait, ok := p.reserve(t0.Add(s.at), s.maxWait)
				if wait != s.wantWait || ok != s.wantOK {
					t.Fatalf("step %d: reserve = %s, %v; want %s, %v", i, wait, ok, s.wantWait, s.wantOK)
				}
			}
		})
	}
}

// A handshake waits for the writes of attached agents in flight on its
// master, until they end or writeYield passes; with none in flight it
// does not wait. Counts of the fake clock's sleepers, no timing.
func TestHandshakeYieldsToAttachedWrites(t *testing.T) {
	clock := newFakeClock()
	a := newAdmission(4, 4, 1000, 4, clock)
	ctx := context.Background()
	acquired := func() chan func() {
		ch := make(chan func(), 1)
		go func() {
			release, err := a.acquire(ctx, time.Minute)
			if err != nil {
				t.Error(err)
			}
			ch <- release
		}()
		return ch
	}
	release := <-acquired() // nothing in flight: admitted at once
	release()

	a.writes.begin()
	got := acquired()
	testkit.WaitFor(t, 10*time.Second, "the handshake to wait for the write", func() bool { return clock.sleepers() == 1 })
	select {
	case <-got:
		t.Fatal("a handshake started while an attached agent's write was in flight")
	default:
	}
	a.writes.end()
	(<-got)()
	clock.Advance(writeYield) // that handshake's unused timer fires
	if n := clock.sleepers(); n != 0 {
		t.Fatalf("%d timers left", n)
	}

	a.writes.begin() // never ends: the handshake goes on after writeYield
	got = acquired()
	testkit.WaitFor(t, 10*time.Second, "the handshake to wait for the write", func() bool { return clock.sleepers() == 1 })
	clock.Advance(writeYield)
	(<-got)()
	if n := a.writes.inFlight(); n != 1 {
		t.Fatalf("%d writes in flight, want 1", n)
	}
	a.writes.end()
}

// helloInSync opens a session for inv on conn and says hello with its
// hash (an agent that holds what the master holds: a restart or a
// failover); it returns the stream and the first answer's error.
func helloInSync(ctx context.Context, conn *grpc.ClientConn, inv *ginv1.NodeInventory) (ginv1.AgentService_SessionClient, error) {
	st, err := ginv1.NewAgentServiceClient(conn).Session(ctx)
	if err != nil {
		return nil, err
	}
	hash, err := inventory.ContentHash(inv)
	if err != nil {
		return nil, err
	}
	if err := st.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Hello{Hello: &ginv1.Hello{
		NodeName: inv.GetNodeName(), MachineId: inv.GetHost().GetMachineId(), InventoryHash: hash, LastAckedGeneration: inv.GetGeneration()}}}); err != nil {
		return nil, err
	}
	r, err := st.Recv()
	if err != nil {
		return nil, err
	}
	if !r.GetHelloAck().GetInSync() {
		return nil, fmt.Errorf("%s: answer %v, want a HelloAck in sync", inv.GetNodeName(), r)
	}
	return st, nil
}

// pacedStorm is one mass event on master s (its handshakes paced by clock
// at rate per second after a burst, its queue exactly len(invs)-burst):
// every agent of invs says hello at once, in sync; one more is refused. It
// checks, moving the clock one token at a time, that the master admits
// exactly burst + rate × elapsed of them (never more), that the extra one
// was refused with RESOURCE_EXHAUSTED and a retry hint of the queue's
// wait, and that while the others wait a read is answered and the attached
// agent keeper's heartbeat and inventory change are acknowledged (its
// commit is not queued behind the handshakes).
func pacedStorm(t *testing.T, s *Server, clock *fakeClock, rate float64, burst int, conn *grpc.ClientConn, invs []*ginv1.NodeInventory, extra *ginv1.NodeInventory, keeper ginv1.AgentService_SessionClient, keeperInv *ginv1.NodeInventory) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := s.admission.admitted.Load()
	admitted := func() int { return int(s.admission.admitted.Load() - base) }
	n := len(invs)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, inv := range invs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := helloInSync(ctx, conn, inv); err != nil {
				errs <- err
			}
		}()
	}
	testkit.WaitFor(t, time.Minute, "every Hello admitted or waiting", func() bool {
		return admitted() == burst && int(s.admission.waiting.Load()) == n-burst && clock.sleepers() == n-burst
	})
	// The queue is full: one more is refused, with the queue's wait as its
	// hint: n-burst tokens owed, the next one due after (n-burst+1)/rate.
	_, err := helloInSync(ctx, conn, extra)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("Hello past the queue: %v, want RESOURCE_EXHAUSTED", err)
	}
	var hint time.Duration
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			hint = ri.GetRetryDelay().AsDuration()
		}
	}
	if want := retryAfter(time.Duration(float64(n-burst+1) / rate * float64(time.Second))); hint != want {
		t.Fatalf("refusal's retry hint %s, want the queue's wait %s", hint, want)
	}

	// While n-burst Hellos wait: reads, heartbeats and commits of the
	// attached agent are answered.
	if _, err := ginv1.NewTopologyServiceClient(conn).ListNodes(ctx, &ginv1.ListNodesRequest{}); err != nil {
		t.Fatalf("ListNodes during the storm: %v", err)
	}
	if err := keeper.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Heartbeat{Heartbeat: &ginv1.Heartbeat{Sequence: 1}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := keeper.Recv(); err != nil || r.GetHeartbeatAck().GetSequence() != 1 {
		t.Fatalf("heartbeat during the storm: %v, %v", r, err)
	}
	next := inventory.Diff(keeperInv, changed(keeperInv))
	if err := keeper.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Delta{Delta: next}}); err != nil {
		t.Fatal(err)
	}
	if r, err := keeper.Recv(); err != nil || r.GetInventoryAck().GetAcceptedGeneration() != next.GetGeneration() {
		t.Fatalf("inventory change during the storm: %v, %v", r, err)
	}
	if admitted() != burst || clock.sleepers() != n-burst {
		t.Fatalf("the master admitted %d (%d still waiting) with no time passed, want the burst %d", admitted(), clock.sleepers(), burst)
	}

	// One token's worth of clock at a time: exactly one more admitted.
	step := time.Duration(float64(time.Second) / rate)
	for k := 1; admitted() < n; k++ {
		clock.Advance(step)
		want := min(n, burst+k)
		// (The fake clock's sleepers are not counted here: an admitted
		// Hello may leave an unfired timer behind when the keeper's write
		// was still ending, writeGate.wait.)
		testkit.WaitFor(t, time.Minute, fmt.Sprintf("%d admitted after %d steps", want, k), func() bool {
			return admitted() >= want && int(s.admission.waiting.Load()) <= n-want
		})
		if got, waiting := admitted(), int(s.admission.waiting.Load()); got != want || waiting != n-want {
			t.Fatalf("after %s of clock: %d admitted, %d waiting; want %d admitted (burst %d + %g/s), %d waiting",
				time.Duration(k)*step, got, waiting, want, burst, rate, n-want)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// changed is inv at the next generation with one NVLink down.
func changed(inv *ginv1.NodeInventory) *ginv1.NodeInventory {
	next := proto.Clone(inv).(*ginv1.NodeInventory)
	next.Generation = inv.GetGeneration() + 1
	next.Gpus[0].Nvlinks[0].State = ginv1.LinkState_LINK_STATE_DOWN
	return next
}

// pacingInventories are n sim inventories at generation 1, sorted by name.
func pacingInventories(t *testing.T, prefix string, n int) []*ginv1.NodeInventory {
	var invs []*ginv1.NodeInventory
	for i := range n {
		inv := simInventory(t, "dgx-h100", fmt.Sprintf("%s%03d", prefix, i))
		inv.Generation = 1
		invs = append(invs, inv)
	}
	sort.Slice(invs, func(i, j int) bool { return invs[i].GetNodeName() < invs[j].GetNodeName() })
	return invs
}

// Whole-cluster restart: every agent of the cluster (registered, in sync)
// says hello at once to its master. Admissions follow the rate exactly,
// reads, heartbeats and commits are answered meanwhile.
func TestHandshakePacingWholeClusterRestart(t *testing.T) {
	const n, burst, rate = 24, 4, 2.0
	clock := newFakeClock()
	s := startServerWith(t, func(c *Config) {
		c.HeartbeatInterval, c.HelloTimeout = time.Minute, time.Minute
		c.MaxHandshakes, c.HandshakeQueue, c.HandshakeRate, c.HandshakeClock = burst, n-burst, rate, clock
	})
	conn := dialPlain(t, s.Addr())
	invs := pacingInventories(t, "restart", n+2)
	for _, inv := range invs {
		if _, err := s.putInventory(context.Background(), inv); err != nil {
			t.Fatal(err)
		}
	}
	keeperInv, extra := invs[n], invs[n+1]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keeper, err := helloInSync(ctx, conn, keeperInv)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour) // the keeper's token back: a full burst
	pacedStorm(t, s, clock, rate, burst, conn, invs[:n], extra, keeper, keeperInv)
}

// A master's failover: the agents of a master that dies all say hello to
// another at once (acknowledged generation and hash: in sync, no inventory
// re-sent). It admits them at its rate, and answers reads, heartbeats and
// the commits of its attached agent meanwhile (relayed to the leader when
// it is a follower).
func TestHandshakePacingFailover(t *testing.T) {
	const n, burst, rate = 16, 3, 4.0
	clock := newFakeClock()
	ms := startClusterWith(t, 3, func(c *Config) {
		c.HelloTimeout = time.Minute
		c.MaxHandshakes, c.HandshakeQueue, c.HandshakeRate, c.HandshakeClock = burst, n-burst, rate, clock
	})
	waitUntil(t, "a leader", func() bool { return leaderOf(ms) != nil && formed(ms) })
	dying := followerOf(ms, leaderOf(ms))
	var target *member
	for _, m := range ms {
		if m != dying && target == nil {
			target = m
		}
	}
	invs := pacingInventories(t, "failover", n+2)
	keeperInv, extra := invs[n], invs[n+1]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Every agent registers on the master that will die (relayed to the
	// leader).
	dconn := dialPlain(t, dying.s.Addr())
	for _, inv := range invs {
		st, err := ginv1.NewAgentServiceClient(dconn).Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Hello{Hello: &ginv1.Hello{NodeName: inv.GetNodeName(), MachineId: inv.GetHost().GetMachineId()}}}); err != nil {
			t.Fatal(err)
		}
		if r, err := st.Recv(); err != nil || r.GetHelloAck() == nil {
			t.Fatalf("%s on %s: %v, %v", inv.GetNodeName(), dying.s.cfg.ID, r, err)
		}
		clock.Advance(time.Hour) // the dying master's tokens are not what is measured
		if err := st.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Inventory{Inventory: inv}}); err != nil {
			t.Fatal(err)
		}
		if r, err := st.Recv(); err != nil || r.GetInventoryAck().GetAcceptedGeneration() != 1 {
			t.Fatalf("%s registered through %s: %v, %v", inv.GetNodeName(), dying.s.cfg.ID, r, err)
		}
	}
	// The registrations were acknowledged once the leader committed them;
	// the target applies them when Raft brings them. A Hello ahead of its
	// state waits for it on the wall clock (heldWait) and, past that,
	// answers from what it holds: wait for the state, so that load cannot
	// turn the in-sync Hellos below into stale ones.
	waitUntil(t, "the target to hold every registration", func() bool {
		for _, inv := range invs {
			if h, ok := target.s.store.Head(inv.GetNodeName()); !ok || h.Generation < inv.GetGeneration() {
				return false
			}
		}
		return true
	})
	// One agent is attached to the target already.
	tconn := dialPlain(t, target.s.Addr())
	keeper, err := helloInSync(ctx, tconn, keeperInv)
	if err != nil {
		t.Fatal(err)
	}
	dying.crash()
	clock.Advance(time.Hour) // a full burst on the target
	pacedStorm(t, target.s, clock, rate, burst, tconn, invs[:n], extra, keeper, keeperInv)
}

// The rule that ends a follower's sessions (cutOff), at a 5 s heartbeat:
// grace 20 s, a report every 2.5 s (8 attempts in the grace, 6 needed),
// Raft's contact excusing failed reports up to 27.5 s.
func TestFollowerCutOffRule(t *testing.T) {
	const grace, period = 20 * time.Second, 2500 * time.Millisecond
	never := time.Duration(-1)
	tests := []struct {
		name      string
		unreached time.Duration
		failed    int64
		contact   time.Duration
		want      bool
	}{
		{"partition: no report, no Raft for the grace", 21 * time.Second, 8, 21 * time.Second, true},
		{"never heard from Raft at all", 21 * time.Second, 8, never, true},
		{"within the grace", 19 * time.Second, 8, 19 * time.Second, false},
		{"starved follower: the clock ran, its attempts did not", 40 * time.Second, 4, 40 * time.Second, false},
		{"starved follower that tried enough", 40 * time.Second, 6, 40 * time.Second, true},
		{"slow leader: reports time out, Raft heartbeats arrive", 25 * time.Second, 10, 200 * time.Millisecond, false},
		{"slow election: voted for a candidate lately", 25 * time.Second, 10, 3 * time.Second, false},
		{"Raft still heard, within the limit", 27 * time.Second, 10, 100 * time.Millisecond, false},
		{"Raft still heard, past the limit (before the leader would mark DOWN)", 28 * time.Second, 11, 100 * time.Millisecond, true},
		{"report path broken while Raft works", 41 * time.Second, 16, 100 * time.Millisecond, true},
	}
	s := &Server{cfg: Config{HeartbeatInterval: 5 * time.Second, MissedHeartbeats: 3}}
	limit := s.raftExcuseLimit()
	if limit != 27500*time.Millisecond {
		t.Fatalf("raftExcuseLimit at a 5 s heartbeat, 3 missed: %s, want 27.5s (20 s grace + 15 s - 5 s - 2.5 s)", limit)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := cutOff(tc.unreached, tc.failed, tc.contact, grace, period, limit); got != tc.want {
				t.Fatalf("cutOff(%s, %d failed, contact %s) = %v, want %v", tc.unreached, tc.failed, tc.contact, got, tc.want)
			}
		})
	}
}
