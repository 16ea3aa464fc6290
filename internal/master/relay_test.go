package master

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/agent"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/state"
	"github.com/gin-topology/gin/internal/testkit"
)

// relayHeartbeat is the heartbeat interval of the relay tests: the missed
// limit is 3 of them, the reattach grace max(4 of them, 10 s).
const relayHeartbeat = 200 * time.Millisecond

// fleet is real agents (internal/agent over real gRPC) spread over a
// cluster's master list.
type fleet struct {
	mu     sync.Mutex
	agents map[string]*fleetAgent
}

type fleetAgent struct {
	a      *agent.Agent
	cancel context.CancelFunc
	done   chan struct{}
	plans  *planRecorder
}

// planRecorder is a PlanSink that keeps the jobs it was pushed.
type planRecorder struct {
	mu   sync.Mutex
	jobs map[string]bool
}

func (p *planRecorder) Put(pl *ginv1.Plan) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.jobs[pl.GetJobId()] = true
	return nil
}

func (p *planRecorder) has(job string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.jobs[job]
}

func startFleet(t *testing.T, ms []*member, names ...string) *fleet {
	t.Helper()
	return startFleetWith(t, ms, func(*agent.Config) {}, names...)
}

func startFleetWith(t *testing.T, ms []*member, mod func(*agent.Config), names ...string) *fleet {
	t.Helper()
	var addrs []string
	for _, m := range ms {
		addrs = append(addrs, m.s.Addr())
	}
	f := &fleet{agents: map[string]*fleetAgent{}}
	for _, n := range names {
		src, err := sim.NewSource("dgx-h100", sim.NodeOptions{NodeName: n, Cluster: "relay"})
		if err != nil {
			t.Fatal(err)
		}
		pr := &planRecorder{jobs: map[string]bool{}}
		cfg := agent.Config{
			NodeName: n, Masters: addrs, HeartbeatInterval: relayHeartbeat, Source: src, Plans: pr,
			InitialBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
			Logger:      testLogger(n),
			DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		}
		mod(&cfg)
		a, err := agent.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		fa := &fleetAgent{a: a, cancel: cancel, done: make(chan struct{}), plans: pr}
		go func() { defer close(fa.done); _ = a.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-fa.done })
		f.agents[n] = fa
	}
	return f
}

// stop ends one agent's process (its stream closes).
func (f *fleet) stop(name string) {
	fa := f.agents[name]
	fa.cancel()
	<-fa.done
}

// on lists the agents whose established session is with m.
func (f *fleet) on(m *member) []string {
	var out []string
	for n, fa := range f.agents {
		if st := fa.a.Status(); st.Connected && st.Master == m.s.Addr() {
			out = append(out, n)
		}
	}
	return out
}

// settled: every agent has its inventory acknowledged and a session.
func (f *fleet) settled() bool {
	for _, fa := range f.agents {
		if st := fa.a.Status(); !st.Connected || st.AckedGeneration == 0 || st.AckedHash != st.CurrentHash {
			return false
		}
	}
	return true
}

// sent is how many inventories each agent has sent so far.
func (f *fleet) sent() map[string]uint64 {
	out := map[string]uint64{}
	for n, fa := range f.agents {
		out[n] = fa.a.Status().InventoriesSent
	}
	return out
}

// checkNoneResent fails for every agent that sent an inventory since before.
func (f *fleet) checkNoneResent(t *testing.T, before map[string]uint64) {
	t.Helper()
	for n, b := range before {
		if got := f.agents[n].a.Status().InventoriesSent; got != b {
			t.Errorf("%s sent %d inventories after the failover, want none", n, got-b)
		}
	}
}

// downs records every node the store marks DOWN from now on.
func downs(t *testing.T, st *state.Store) func() []string {
	events, cancel := st.Watch()
	t.Cleanup(cancel)
	var mu sync.Mutex
	var out []string
	go func() {
		for e := range events {
			if e.Kind == ginv1.WatchEventKind_WATCH_EVENT_KIND_NODE_STATE && e.NewState == ginv1.NodeState_NODE_STATE_DOWN {
				mu.Lock()
				out = append(out, e.Node)
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), out...)
	}
}

func fleetNames(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("rl%03d", i+1))
	}
	return out
}

func testLogger(n string) *slog.Logger {
	if os.Getenv("RELAY_DEBUG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil)).With("who", n)
}

func startRelayCluster(t *testing.T) []*member {
	t.Helper()
	ms := startClusterWith(t, 3, func(c *Config) { c.HeartbeatInterval = relayHeartbeat; c.Logger = testLogger(c.ID) })
	waitUntil(t, "3 masters to bootstrap, elect and register", func() bool { return formed(ms) })
	return ms
}

func allUp(m *member, names []string) bool {
	if m == nil {
		return false
	}
	for _, n := range names {
		rec, ok := m.s.store.Head(n)
		if !ok || rec.State() != ginv1.NodeState_NODE_STATE_UP || rec.Generation == 0 {
			return false
		}
	}
	return true
}

// Agents spread over the three masters; those on followers register
// through the relay (committed on the leader before their ack), get the
// plans of their jobs pushed from their own master, and when a follower
// dies its agents reattach elsewhere without re-sending an inventory and
// without any node marked DOWN.
func TestFollowerDeathAgentsReattachWithoutResendOrDown(t *testing.T) {
	ms := startRelayCluster(t)
	names := fleetNames(9)
	f := startFleet(t, ms, names...)
	leader := settle(t, ms, f, names)
	victim := f.busiestFollower(t, ms, leader)
	// The leader knows of every agent: its own sessions plus the reports
	// (gin_master_connected_agents + gin_master_reported_agents).
	testkit.WaitFor(t, 30*time.Second, "the leader's sessions and reports cover every agent", func() bool {
		l := leaderOf(ms)
		return l != nil && l.s.sessions.count()+l.s.live.reportedCount() == len(names)
	})
	// A plan pinned on the leader reaches an agent attached to a follower.
	onVictim := f.on(victim)
	pinPlan(t, ms, "relay-push", onVictim[0])
	testkit.WaitFor(t, 30*time.Second, "the plan pushed to "+onVictim[0]+" on follower "+victim.s.cfg.ID, func() bool {
		return f.agents[onVictim[0]].plans.has("relay-push")
	})

	caughtUp(t, ms, leader, victim, names)
	down := downs(t, leader.s.store)
	before := f.sent()
	crashed := time.Now()
	victim.crash()
	limit := 3 * relayHeartbeat
	testkit.WaitFor(t, 30*time.Second, "the dead follower's agents reattached elsewhere and past the missed limit twice", func() bool {
		for _, n := range onVictim {
			st := f.agents[n].a.Status()
			if !st.Connected || st.Master == victim.s.Addr() {
				return false
			}
		}
		return time.Since(crashed) > 2*limit && allUp(leader, names)
	})
	if d := down(); len(d) > 0 {
		t.Errorf("nodes marked DOWN when a follower died: %v", d)
	}
	f.checkNoneResent(t, before)
}

// The leader dies: agents on the followers keep their sessions (no
// reconnect), the leader's agents reattach, nothing is re-sent and no node
// is marked DOWN by the election.
func TestLeaderDeathAgentsOnFollowersKeepSessions(t *testing.T) {
	ms := startRelayCluster(t)
	names := fleetNames(9)
	f := startFleet(t, ms, names...)
	leader := settle(t, ms, f, names)
	kept := map[string]uint64{} // agents on followers → their reconnects
	for _, m := range ms {
		if m == leader {
			continue
		}
		for _, n := range f.on(m) {
			kept[n] = f.agents[n].a.Status().Reconnects
		}
	}
	if len(kept) == 0 {
		t.Fatal("no agent on a follower")
	}
	witness := followerOf(ms, leader) // sees every entry any later leader commits
	caughtUp(t, ms, leader, leader, names)
	down := downs(t, witness.s.store)
	before := f.sent()
	crashed := time.Now()
	leader.crash()
	waitUntil(t, "a new leader", func() bool { return leaderOf(ms) != nil })
	limit := 3 * relayHeartbeat
	testkit.WaitFor(t, 30*time.Second, "every agent attached to a live master, past the missed limit twice", func() bool {
		for _, fa := range f.agents {
			if st := fa.a.Status(); !st.Connected || st.Master == leader.s.Addr() {
				return false
			}
		}
		return time.Since(crashed) > 2*limit && allUp(witness, names)
	})
	// The reports of both followers have reached the new leader: its
	// liveness holds a fresh sign of life for every node.
	testkit.WaitFor(t, 30*time.Second, "the new leader hears of every node", func() bool {
		l := leaderOf(ms)
		if l == nil {
			return false
		}
		l.s.live.mu.Lock()
		defer l.s.live.mu.Unlock()
		for _, n := range names {
			if !l.s.live.lastSeen[n].After(crashed) {
				return false
			}
		}
		return true
	})
	if d := down(); len(d) > 0 {
		t.Errorf("nodes marked DOWN by the election: %v", d)
	}
	for n, before := range kept {
		if st := f.agents[n].a.Status(); st.Reconnects != before {
			t.Errorf("%s on a follower reconnected (%d → %d) when the leader died; want its session kept", n, before, st.Reconnects)
		}
	}
	f.checkNoneResent(t, before)
}

// An agent attached to a follower that stops (its stream ends) is marked
// DOWN by the leader after the missed heartbeats, from the follower's
// reports; its neighbours on the same follower stay UP.
func TestFollowerAgentStoppingIsMarkedDown(t *testing.T) {
	ms := startRelayCluster(t)
	names := fleetNames(6)
	f := startFleet(t, ms, names...)
	leader := settle(t, ms, f, names)
	follower := f.busiestFollower(t, ms, leader)
	held := f.on(follower)
	gone := held[0]
	f.stop(gone)
	testkit.WaitFor(t, 30*time.Second, gone+" marked DOWN by the leader", func() bool {
		rec, _ := leader.s.store.Node(gone)
		return rec.GetState() == ginv1.NodeState_NODE_STATE_DOWN
	})
	for _, n := range names {
		if n == gone {
			continue
		}
		if rec, _ := leader.s.store.Node(n); rec.GetState() != ginv1.NodeState_NODE_STATE_UP {
			t.Errorf("%s is %v, want UP (only %s stopped)", n, rec.GetState(), gone)
		}
	}
}

// pinPlan pins a job's plan through whichever master leads (retried across
// an election).
func pinPlan(t *testing.T, ms []*member, job, nodes string) {
	t.Helper()
	testkit.WaitFor(t, 30*time.Second, "plan "+job+" pinned", func() bool {
		l := leaderOf(ms)
		if l == nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := l.s.plans.GetOrCreatePlan(ctx, &ginv1.GetOrCreatePlanRequest{JobId: job, Nodes: nodes})
		return err == nil
	})
}

// One agent of the whole cluster scans the fabric, named by the leader
// wherever it is attached; its scans reach the state through its master
// (relayed from a follower); when it stops, another agent takes over.
func TestOneFabricScannerAcrossMasters(t *testing.T) {
	ms := startRelayCluster(t)
	names := fleetNames(6)
	f := startFleetWith(t, ms, func(c *agent.Config) {
		c.FabricScanner = func(context.Context) (*ginv1.FabricTopology, error) {
			return &ginv1.FabricTopology{Source: "test:" + c.NodeName, Switches: []*ginv1.FabricSwitch{{Guid: "0x1", Tier: 1}}}, nil
		}
		c.FabricScanInterval = time.Hour
	}, names...)
	leader := settle(t, ms, f, names)
	scanners := func() []string {
		var out []string
		for n, fa := range f.agents {
			if fa.a.Status().FabricScanner {
				out = append(out, n)
			}
		}
		return out
	}
	var first string
	testkit.WaitFor(t, 30*time.Second, "exactly one scanner and its scan in the state", func() bool {
		sc := scanners()
		if len(sc) != 1 {
			return false
		}
		first = sc[0]
		return leader.s.store.View().Fabric().GetSource() == "test:"+first
	})
	f.stop(first)
	testkit.WaitFor(t, 30*time.Second, "another agent scanning, its scan in the state", func() bool {
		sc := scanners()
		return len(sc) == 1 && sc[0] != first && leader.s.store.View().Fabric().GetSource() == "test:"+sc[0]
	})
}

// settle waits until every agent of f has its inventory acknowledged and
// every node is UP, and returns the leader then.
func settle(t *testing.T, ms []*member, f *fleet, names []string) *member {
	t.Helper()
	var leader *member
	testkit.WaitFor(t, 30*time.Second, "every agent registered and up on the leader", func() bool {
		leader = leaderOf(ms)
		return f.settled() && allUp(leader, names)
	})
	return leader
}

// caughtUp waits until every master of ms but gone holds each of names at
// the leader's generation: agents reattaching there after gone dies are
// then in sync at once, whatever load did to Raft's apply (a Hello ahead of
// a master's state waits heldWait on the wall clock, then answers out of
// sync and the agent re-sends).
func caughtUp(t *testing.T, ms []*member, leader, gone *member, names []string) {
	t.Helper()
	testkit.WaitFor(t, 30*time.Second, "the other masters to apply the leader's state of every node", func() bool {
		for _, m := range ms {
			if m == gone || m.dead {
				continue
			}
			for _, n := range names {
				lh, _ := leader.s.store.Head(n)
				if h, ok := m.s.store.Head(n); !ok || h.Generation < lh.Generation {
					return false
				}
			}
		}
		return true
	})
}

// A master whose state lags behind what the agent was acknowledged (a
// follower that has not applied the last entries yet) waits for it before
// it answers the Hello, so the agent is never told an older generation and
// never re-sends for that reason; an agent that was acknowledged nothing is
// answered at once.
func TestHelloWaitsForTheAcknowledgedGeneration(t *testing.T) {
	s, _ := startServer(t, time.Second)
	registerNodes(t, s, "dgx-h100", "node001")
	if h, ok := s.heldFor(context.Background(), "node001", 0); !ok || h.Generation != 1 {
		t.Fatalf("heldFor(acked 0) = %d, %v; want generation 1 at once", h.Generation, ok)
	}
	got := make(chan uint64, 1)
	go func() {
		h, _ := s.heldFor(context.Background(), "node001", 2) // the agent was acknowledged 2
		got <- h.Generation
	}()
	inv := simInventory(t, "dgx-h100", "node001")
	inv.Generation = 2
	inv.Gpus[0].Nvlinks[0].State = ginv1.LinkState_LINK_STATE_DOWN
	if _, err := s.putInventory(context.Background(), inv); err != nil {
		t.Fatal(err)
	}
	if g := <-got; g != 2 {
		t.Fatalf("the Hello was answered with generation %d, want 2 (the acknowledged one)", g)
	}
}

// busiestFollower is the follower holding the most agent sessions (agents
// spread by their names, but an election during registration may move
// some); the test fails when no follower holds any.
func (f *fleet) busiestFollower(t *testing.T, ms []*member, leader *member) *member {
	t.Helper()
	var best *member
	for _, m := range ms {
		if m != leader && len(f.on(m)) > 0 && (best == nil || len(f.on(m)) > len(f.on(best))) {
			best = m
		}
	}
	if best == nil {
		t.Fatal("no follower holds an agent")
	}
	return best
}

// A follower that cannot reach a leader for the reattach grace ends its
// agents' sessions (UNAVAILABLE) at their next heartbeat and refuses new
// ones, so that agents behind a partition move to a master whose reports
// reach the leader (here: the other two masters are gone, no leader).
func TestCutOffFollowerSendsItsAgentsAway(t *testing.T) {
	ms := startRelayCluster(t)
	leader := leaderOf(ms)
	follower := followerOf(ms, leader)
	conn, err := grpc.NewClient(follower.s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	inv := simInventory(t, "dgx-h100", "cut001")
	sess, ack := openSession(t, conn, inv)
	if ack == nil {
		t.Fatal("no hello ack from the follower")
	}
	waitUntil(t, "the follower's report of cut001 on the leader", func() bool { return leader.s.live.reportedHeld("cut001") })
	for _, m := range ms {
		if m != follower {
			m.crash()
		}
	}
	beat := func(seq uint64) error {
		if err := sess.stream.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Heartbeat{Heartbeat: &ginv1.Heartbeat{Sequence: seq}}}); err != nil {
			return err
		}
		_, err := sess.stream.Recv()
		return err
	}
	var ended error
	seq := uint64(0)
	testkit.WaitFor(t, 60*time.Second, "the cut-off follower to end the session", func() bool {
		seq++
		ended = beat(seq)
		return ended != nil
	})
	if status.Code(ended) != codes.Unavailable || !strings.Contains(ended.Error(), "has not reached the leader") {
		t.Fatalf("session ended with %v, want UNAVAILABLE (has not reached the leader)", ended)
	}
	// The grace counts from the follower's last accepted report, which it
	// stamps itself when the leader's answer arrives: that instant is not
	// the test's (a test timestamp taken after the leader held the report
	// is up to a scheduling delay late, or early), so the property is read
	// on the follower's own clock. The end names how long the follower had
	// not reached the leader when it decided; it must exceed the grace, and
	// the decision (last report + that span) precedes the end the test saw.
	seen := time.Now()
	grace := reattachGrace(relayHeartbeat)
	m := regexp.MustCompile(`has not reached the leader for (\S+); `).FindStringSubmatch(ended.Error())
	if m == nil {
		t.Fatalf("the end %q does not say how long the leader was unreached", ended)
	}
	unreached, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatal(err)
	}
	if unreached <= grace {
		t.Fatalf("session ended %s after the follower's last accepted report, within the reattach grace (%s)", unreached, grace)
	}
	last := time.Unix(0, follower.s.link.reached.Load())
	if decided := last.Add(unreached - time.Millisecond); decided.After(seen) { // the span is rounded to 1 ms
		t.Fatalf("the follower says it decided at %s (last report %s + %s), after the test saw the end (%s)", decided, last, unreached, seen)
	}
	if _, ack := openSession(t, conn, inv); ack != nil {
		t.Fatal("a cut-off follower accepted a new session")
	}
}
