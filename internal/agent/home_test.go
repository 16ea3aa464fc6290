package agent

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// probeClock is the home-probe schedule of one agent, fired by the test:
// every wait the agent asks for is recorded, and the timer fires only when
// the test says.
type probeClock struct {
	watched
	waits []time.Duration
	fire  chan time.Time
}

func newProbeClock() *probeClock {
	c := &probeClock{fire: make(chan time.Time)}
	c.init()
	return c
}

func (c *probeClock) after(d time.Duration) <-chan time.Time {
	c.change(func() { c.waits = append(c.waits, d) })
	return c.fire
}

func (c *probeClock) armed() int {
	var n int
	c.read(func() { n = len(c.waits) })
	return n
}

// An agent whose home master refuses sessions attaches to another one and
// probes its home on the jittered schedule; while the home reports the
// agent service NOT_SERVING it stays, once SERVING it leaves its session
// cleanly (the master sees the agent close its side) and says Hello to its
// home, which holds its inventory: nothing is re-sent. At home it probes
// no more.
func TestReturnsHomeOnceTheHomeMasterServes(t *testing.T) {
	var logs syncBuffer
	st := newStore()
	home, other := newFakeMaster(t, st), newFakeMaster(t, st)
	home.notLeader = true // refuses sessions (FAILED_PRECONDITION, no hint)
	home.health.SetServingStatus(agentHealthService, healthpb.HealthCheckResponse_NOT_SERVING)
	cfg := testConfig(newFakeSource("H100"), &logs, home.addr, other.addr)
	const probeEvery = time.Minute
	cfg.HomeProbeInterval = probeEvery
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.home() != home.addr {
		t.Fatalf("home = %s, want %s", a.home(), home.addr)
	}
	clock := newProbeClock()
	a.after = clock.after
	r := startAgent(t, a)

	waitStatus(t, r.a, func(s Status) bool { return s.Connected && s.Master == other.addr && s.AckedGeneration == 1 })
	clock.waitFor(t, "the first home probe scheduled", func() bool { return len(clock.waits) == 1 })

	// Home not serving: the agent stays and schedules the next probe.
	clock.fire <- time.Now()
	clock.waitFor(t, "the next home probe scheduled", func() bool { return len(clock.waits) == 2 })
	if s := r.a.Status(); !s.Connected || s.Master != other.addr {
		t.Fatalf("after a NOT_SERVING probe the agent is on %q (connected %v), want %s", s.Master, s.Connected, other.addr)
	}

	// Home back: the agent returns.
	home.change(func() { home.notLeader = false })
	home.health.SetServingStatus(agentHealthService, healthpb.HealthCheckResponse_SERVING)
	clock.fire <- time.Now()
	waitStatus(t, r.a, func(s Status) bool { return s.Connected && s.Master == home.addr })
	home.waitFor(t, "two heartbeats at home", func() bool { return len(home.heartbeats) >= 2 })

	for i, d := range clock.waits {
		if d < probeEvery/2 || d > 3*probeEvery/2 {
			t.Errorf("probe wait %d = %s, want within [%s, %s]", i, d, probeEvery/2, 3*probeEvery/2)
		}
	}
	if n := clock.armed(); n != 2 {
		t.Errorf("%d probes scheduled, want 2 (none once at home)", n)
	}
	if s := r.a.Status(); s.InventoriesSent != 1 {
		t.Errorf("%d inventories sent, want 1 (none on the way home)", s.InventoriesSent)
	}
	other.read(func() {
		if len(other.ends) != 1 || !errors.Is(other.ends[0], io.EOF) {
			t.Errorf("the session away from home ended with %v, want the agent closing its side (EOF)", other.ends)
		}
	})
	home.read(func() {
		last := home.hellos[len(home.hellos)-1]
		if last.GetLastAckedGeneration() != 1 || last.GetInventoryHash() == "" {
			t.Errorf("hello at home = %v, want the acknowledged generation 1 and its hash", last)
		}
	})
	if !strings.Contains(logs.String(), "returning to the home master") {
		t.Errorf("no log line says the agent returns home:\n%s", logs.String())
	}
}

// An agent probes only while away from home, and not at all with a single
// master or with probing off.
func TestAwayFromHome(t *testing.T) {
	var logs syncBuffer
	tests := []struct {
		name    string
		masters []string
		every   time.Duration
		addr    int // index in the tried order
		want    bool
	}{
		{"at home", []string{"m1:5000", "m2:5000", "m3:5000"}, time.Minute, 0, false},
		{"away", []string{"m1:5000", "m2:5000", "m3:5000"}, time.Minute, 1, true},
		{"one master", []string{"m1:5000"}, time.Minute, 0, false},
		{"probing off", []string{"m1:5000", "m2:5000"}, -1, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(newFakeSource("H100"), &logs, tc.masters...)
			cfg.HomeProbeInterval = tc.every
			a, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.awayFromHome(tc.masters[tc.addr]); got != tc.want {
				t.Fatalf("awayFromHome(%s) = %v, want %v", tc.masters[tc.addr], got, tc.want)
			}
		})
	}
}

// Leaving for home closes the agent's side of the stream and reads the
// master's answers until it ends its side: a plan pushed meanwhile is
// kept, and the session ends as a return home.
func TestLeavingKeepsPlansPushedMeanwhile(t *testing.T) {
	var logs syncBuffer
	sink := &planSink{}
	cfg := testConfig(newFakeSource("H100"), &logs, "m1:5000", "m2:5000")
	cfg.Plans = sink
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	recv := make(chan recvResult, 2)
	rs := &recordingStream{}
	s := a.newSession(context.Background(), "m2:5000", rs, recv)
	defer s.stop()
	recv <- recvResult{resp: &ginv1.SessionResponse{Plans: []*ginv1.Plan{{JobId: "late"}}}}
	recv <- recvResult{err: io.EOF}
	err = s.leave()
	if !errors.Is(err, errGoingHome) {
		t.Fatalf("leave = %v, want errGoingHome", err)
	}
	if !rs.closed {
		t.Error("the agent's side of the stream was not closed")
	}
	if len(sink.got) != 1 || sink.got[0] != "late" {
		t.Errorf("plans kept = %v, want [late]", sink.got)
	}
}

// Make before break. While the home master reports SERVING but refuses the
// Hello (its handshakes are full), the agent keeps the session where it is
// (open, heartbeating, nothing re-sent) and probes again later. Once home
// takes the Hello, the old session stays open until the HelloAck has come:
// only then does the agent close its side of it.
func TestReturnHomeKeepsTheOldSessionUntilHomeAcknowledges(t *testing.T) {
	st := newStore()
	home, other := newFakeMaster(t, st), newFakeMaster(t, st)
	r, clock := startAwayFromHome(t, home, other)

	// Home SERVING, but busy at the Hello: the agent stays.
	home.change(func() { home.notLeader, home.busy = false, "too many handshakes" })
	clock.fire <- time.Now()
	clock.waitFor(t, "the next home probe scheduled", func() bool { return len(clock.waits) == 2 })
	if s := r.a.Status(); !s.Connected || s.Master != other.addr || s.HomeJoinsFailed != 1 {
		t.Fatalf("after home refused: on %q (connected %v), %d failed returns; want %s, connected, 1", s.Master, s.Connected, s.HomeJoinsFailed, other.addr)
	}
	var beats int
	other.read(func() {
		beats = len(other.heartbeats)
		if len(other.ends) != 0 {
			t.Errorf("the session away from home ended (%v) though home refused", other.ends)
		}
	})
	other.waitFor(t, "heartbeats going on away from home", func() bool { return len(other.heartbeats) >= beats+2 })

	// Home takes the Hello but holds its answer: the old session goes on.
	gate := make(chan struct{})
	var hellos int
	home.change(func() { home.busy, home.holdHello, hellos = "", gate, len(home.hellos) })
	clock.fire <- time.Now()
	home.waitFor(t, "the hello at home", func() bool { return len(home.hellos) == hellos+1 })
	other.read(func() {
		beats = len(other.heartbeats)
		if len(other.ends) != 0 {
			t.Errorf("the session away from home ended (%v) before home acknowledged the hello", other.ends)
		}
	})
	other.waitFor(t, "a heartbeat away from home while home holds its answer", func() bool { return len(other.heartbeats) > beats })
	close(gate)
	waitStatus(t, r.a, func(s Status) bool { return s.Connected && s.Master == home.addr })
	other.waitFor(t, "the session away from home ended", func() bool { return len(other.ends) == 1 })
	other.read(func() {
		if !errors.Is(other.ends[0], io.EOF) {
			t.Errorf("the session away from home ended with %v, want the agent closing its side (EOF)", other.ends[0])
		}
	})
	home.waitFor(t, "two heartbeats at home", func() bool { return len(home.heartbeats) >= 2 })
	if s := r.a.Status(); s.InventoriesSent != 1 || s.HomeJoinsFailed != 1 {
		t.Errorf("%d inventories sent, %d failed returns; want 1 (none on the way home) and 1", s.InventoriesSent, s.HomeJoinsFailed)
	}
	if n := clock.armed(); n != 2 {
		t.Errorf("%d probes scheduled, want 2 (none once at home)", n)
	}
}

// A home master that holds another inventory than the agent acknowledged
// (the Hello is answered not in sync) is no place to return to yet: the
// agent leaves that attempt (closing its side) and keeps its session.
func TestReturnHomeNotInSyncKeepsTheOldSession(t *testing.T) {
	home, other := newFakeMaster(t, newStore()), newFakeMaster(t, newStore())
	r, clock := startAwayFromHome(t, home, other)

	home.change(func() { home.notLeader = false }) // its own store holds nothing of this node
	clock.fire <- time.Now()
	clock.waitFor(t, "the next home probe scheduled", func() bool { return len(clock.waits) == 2 })
	home.waitFor(t, "the attempt at home ended", func() bool { return len(home.ends) == 1 })
	home.read(func() {
		if !errors.Is(home.ends[0], io.EOF) {
			t.Errorf("the attempt at home ended with %v, want the agent closing its side (EOF)", home.ends[0])
		}
	})
	other.read(func() {
		if len(other.ends) != 0 {
			t.Errorf("the session away from home ended (%v)", other.ends)
		}
	})
	if s := r.a.Status(); !s.Connected || s.Master != other.addr || s.HomeJoinsFailed != 1 || s.InventoriesSent != 1 {
		t.Errorf("status %+v: want connected to %s, 1 failed return, 1 inventory sent", s, other.addr)
	}
}

// startAwayFromHome starts an agent whose home master refuses sessions
// (notLeader until the test changes it), so that it registers with other,
// and waits until it holds generation 1 there and has scheduled its first
// home probe on the returned clock.
func startAwayFromHome(t *testing.T, home, other *fakeMaster) (*runner, *probeClock) {
	t.Helper()
	var logs syncBuffer
	home.notLeader = true
	cfg := testConfig(newFakeSource("H100"), &logs, home.addr, other.addr)
	cfg.HomeProbeInterval = time.Minute
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	clock := newProbeClock()
	a.after = clock.after
	r := startAgent(t, a)
	waitStatus(t, r.a, func(s Status) bool { return s.Connected && s.Master == other.addr && s.AckedGeneration == 1 })
	clock.waitFor(t, "the first home probe scheduled", func() bool { return len(clock.waits) == 1 })
	return r, clock
}
