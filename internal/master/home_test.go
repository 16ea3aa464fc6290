package master

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/gin-topology/gin/internal/agent"
	"github.com/gin-topology/gin/internal/masteraddr"
	"github.com/gin-topology/gin/internal/testkit"
)

// restart starts a crashed master again on the same addresses
// and data dir (as systemd restarts a killed gin-master); it replaces m's
// server.
func (m *member) restart(t *testing.T) {
	t.Helper()
	_ = m.s.node.CloseTransport()
	cfg := m.s.cfg
	cfg.Bind, cfg.RaftBind = m.s.Addr(), m.s.RaftAddr()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("restart %s: %v", cfg.ID, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.s, m.cancel, m.done, m.dead = s, cancel, make(chan error, 1), false
	go func() { m.done <- s.Serve(ctx) }()
}

// homeShares counts, per master address, the agents whose home it is.
func homeShares(f *fleet, addrs []string) map[string]int {
	out := map[string]int{}
	for n := range f.agents {
		out[masteraddr.Home(n, addrs)]++
	}
	return out
}

// atHome reports whether every agent holds its session with its home.
func atHome(f *fleet, addrs []string) bool {
	for n, fa := range f.agents {
		if st := fa.a.Status(); !st.Connected || st.Master != masteraddr.Home(n, addrs) {
			return false
		}
	}
	return true
}

// A follower is killed and restarted: its agents spread over the others,
// then, once it takes sessions again (gin.v1.AgentService SERVING: it
// reaches the leader and has caught up), return to it, so every master
// holds exactly its hash share again; nothing is re-sent on either move
// and no node is marked DOWN.
func TestAgentsReturnHomeAfterAMasterRestarts(t *testing.T) {
	ms := startRelayCluster(t)
	var addrs []string
	for _, m := range ms {
		addrs = append(addrs, m.s.Addr())
	}
	names := fleetNames(12)
	f := startFleetWith(t, ms, func(c *agent.Config) { c.HomeProbeInterval = 4 * relayHeartbeat }, names...)
	leader := settle(t, ms, f, names)
	testkit.WaitFor(t, 30*time.Second, "every agent at its home master", func() bool { return atHome(f, addrs) })
	shares := homeShares(f, addrs)
	victim := followerOf(ms, leader)
	if shares[victim.s.Addr()] == 0 {
		t.Fatalf("no agent's home is %s (shares %v); the test needs some", victim.s.cfg.ID, shares)
	}

	down := downs(t, leader.s.store)
	before := f.sent()
	onVictim := f.on(victim)
	victim.crash()
	testkit.WaitFor(t, 30*time.Second, "the dead follower's agents on the other masters", func() bool {
		for _, n := range onVictim {
			if st := f.agents[n].a.Status(); !st.Connected || st.Master == victim.s.Addr() {
				return false
			}
		}
		return true
	})
	victim.restart(t)
	t.Cleanup(victim.stop)
	// It says it takes sessions once it reaches the leader and has caught
	// up (an election under load may say otherwise for a moment).
	testkit.WaitFor(t, 30*time.Second, "the restarted master's agent service SERVING", func() bool {
		return agentServiceHealth(t, victim.s.Addr()) == healthpb.HealthCheckResponse_SERVING
	})
	testkit.WaitFor(t, 60*time.Second, "every agent back at its home master", func() bool { return atHome(f, addrs) })
	for _, m := range ms {
		if got, want := len(f.on(m)), shares[m.s.Addr()]; got != want {
			t.Errorf("%s holds %d sessions, want its hash share %d", m.s.cfg.ID, got, want)
		}
	}
	if d := down(); len(d) > 0 {
		t.Errorf("nodes marked DOWN while agents moved away and back: %v", d)
	}
	f.checkNoneResent(t, before)
}

// agentServiceHealth is the gRPC health status of gin.v1.AgentService on
// the master at addr.
func agentServiceHealth(t *testing.T, addr string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: agentServiceName})
	if err != nil {
		t.Fatalf("health of %s at %s: %v", agentServiceName, addr, err)
	}
	return resp.GetStatus()
}
