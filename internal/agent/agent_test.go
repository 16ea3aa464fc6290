package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/gin-topology/gin/internal/testkit"
)

func TestFirstConnectSendsOneInventoryAtGeneration1(t *testing.T) {
	src := newFakeSource("H100")
	m := newFakeMaster(t, newStore())
	var logs syncBuffer
	r := runAgent(t, testConfig(src, &logs, m.addr))

	// Two heartbeats after the ack: the agent had every chance to send more.
	m.waitFor(t, "inventory and two heartbeats", func() bool {
		return len(m.inventories) == 1 && len(m.heartbeats) >= 2
	})
	m.read(func() {
		if len(m.hellos) != 1 {
			t.Fatalf("sessions = %d, want 1", len(m.hellos))
		}
		h := m.hellos[0]
		want := hashOf(t, testInventory("H100"))
		if h.GetNodeName() != "node-a" || h.GetMachineId() != "0123456789abcdef0123456789abcdef" ||
			h.GetAgentVersion() != "test-1.0" || h.GetLastAckedGeneration() != 0 || h.GetInventoryHash() != want {
			t.Errorf("hello = %v, want node-a, machine id, test-1.0, generation 0, hash %s", h, want)
		}
		if len(m.inventories) != 1 {
			t.Fatalf("inventories = %d, want exactly 1", len(m.inventories))
		}
		inv := m.inventories[0]
		if inv.GetGeneration() != 1 || inv.GetNodeName() != "node-a" || inv.GetGpus()[0].GetModel() != "H100" {
			t.Errorf("inventory generation %d node %q, want generation 1 node-a H100", inv.GetGeneration(), inv.GetNodeName())
		}
		for _, hb := range m.heartbeats {
			if hb.GetGeneration() != 1 {
				t.Errorf("heartbeat %d carries generation %d, want 1", hb.GetSequence(), hb.GetGeneration())
			}
		}
		for i := 1; i < len(m.heartbeats); i++ {
			if m.heartbeats[i].GetSequence() <= m.heartbeats[i-1].GetSequence() {
				t.Errorf("heartbeat sequences not increasing: %d then %d", m.heartbeats[i-1].GetSequence(), m.heartbeats[i].GetSequence())
			}
		}
	})
	st := r.a.Status()
	if !st.Connected || st.Master != m.addr || st.AckedGeneration != 1 || st.AckedHash != st.CurrentHash || st.InventoriesSent != 1 {
		t.Errorf("status = %+v, want connected to %s at generation 1, in sync, one inventory sent", st, m.addr)
	}
}

func TestSourceChangeSendsNextGenerationWithoutWaitingForHeartbeat(t *testing.T) {
	src := newFakeSource("H100")
	m := newFakeMaster(t, newStore())
	var logs syncBuffer
	cfg := testConfig(src, &logs, m.addr)
	// No heartbeat in the test's lifetime: the change must go out on the
	// collection that sees it.
	cfg.HeartbeatInterval = time.Hour
	cfg.CollectInterval = 20 * time.Millisecond
	r := runAgent(t, cfg)

	m.waitFor(t, "generation 1", func() bool { return len(m.inventories) == 1 })
	changedAt := time.Now()
	src.setModel("H200")
	m.waitFor(t, "generation 2", func() bool { return len(m.inventories) == 2 })
	elapsed := time.Since(changedAt)

	m.read(func() {
		inv := m.inventories[1]
		if inv.GetGeneration() != 2 || inv.GetGpus()[0].GetModel() != "H200" {
			t.Errorf("second inventory: generation %d model %q, want 2 H200", inv.GetGeneration(), inv.GetGpus()[0].GetModel())
		}
		if len(m.heartbeats) != 0 {
			t.Errorf("heartbeats = %d, want 0 with a one-hour interval", len(m.heartbeats))
		}
		if m.deltas != 1 {
			t.Errorf("generation 2 arrived as %d deltas, want 1 (a delta against generation 1)", m.deltas)
		}
	})
	if s := r.a.Status(); s.Reconnects != 0 {
		t.Errorf("reconnects = %d: the update was rejected", s.Reconnects)
	}
	// A loose bound (the race detector on a loaded machine is slow); the
	// one-hour heartbeat interval above is what proves it was not deferred.
	if elapsed > 5*time.Second {
		t.Errorf("change took %s to reach the master", elapsed)
	}
	m.waitFor(t, "ack of generation 2", func() bool { return m.store.get("node-a").generation == 2 })
	waitStatus(t, r.a, func(s Status) bool { return s.AckedGeneration == 2 })
}

func TestAtMostOneUnackedInventory(t *testing.T) {
	src := newFakeSource("v1")
	m := newFakeMaster(t, newStore())
	var logs syncBuffer
	cfg := testConfig(src, &logs, m.addr)
	cfg.HeartbeatInterval = time.Hour
	r := runAgent(t, cfg)
	m.waitFor(t, "generation 1 acked", func() bool { return m.store.get("node-a").generation == 1 })

	hold := make(chan struct{})
	m.change(func() { m.holdAcks = hold })
	m.kick() // the next session holds its acks
	m.waitFor(t, "second session", func() bool { return len(m.hellos) == 2 })
	waitStatus(t, r.a, func(s Status) bool { return s.Connected })

	src.setModel("v2")
	m.waitFor(t, "generation 2 in flight", func() bool { return len(m.inventories) == 2 })
	src.setModel("v3")
	src.setModel("v4")
	n := src.callCount()
	src.waitFor(t, "three collections of v4", func() bool { return src.calls >= n+3 })
	if _, inv, _ := m.counts(); inv != 2 {
		t.Fatalf("inventories = %d while generation 2 is unacked, want 2", inv)
	}

	close(hold) // ack generation 2, and every later one at once
	m.waitFor(t, "generation 3", func() bool { return len(m.inventories) == 3 })
	m.waitFor(t, "generation 3 acked", func() bool { return m.store.get("node-a").generation == 3 })
	m.read(func() {
		inv := m.inventories[2]
		if inv.GetGeneration() != 3 || inv.GetGpus()[0].GetModel() != "v4" {
			t.Errorf("third inventory: generation %d model %q, want 3 with the latest content v4", inv.GetGeneration(), inv.GetGpus()[0].GetModel())
		}
	})
	waitStatus(t, r.a, func(s Status) bool { return s.AckedGeneration == 3 && s.AckedHash == s.CurrentHash })
	if _, inv, _ := m.counts(); inv != 3 {
		t.Errorf("inventories = %d, want 3", inv)
	}
}

func TestReconnectToMasterHoldingInventorySendsNothing(t *testing.T) {
	tests := []struct {
		name string
		// replicaListed puts the second master in Config.Masters.
		replicaListed bool
		// disrupt ends the session with first; it returns the master the
		// agent must come back to.
		disrupt func(t *testing.T, first, second *fakeMaster) *fakeMaster
	}{
		{"same master drops the stream", false, func(t *testing.T, first, _ *fakeMaster) *fakeMaster {
			first.kick()
			return first
		}},
		{"failover to a replica holding the inventory", true, func(t *testing.T, first, second *fakeMaster) *fakeMaster {
			first.srv.Stop()
			return second
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore()
			first, second := newFakeMaster(t, st), newFakeMaster(t, st)
			src := newFakeSource("H100")
			var logs syncBuffer
			masters := []string{first.addr}
			if tc.replicaListed {
				masters = append(masters, second.addr)
			}
			r := runAgent(t, testConfig(src, &logs, masters...))
			first.waitFor(t, "generation 1 acked and a heartbeat", func() bool {
				return st.get("node-a").generation == 1 && len(first.heartbeats) >= 1
			})
			sessionsBefore, _, _ := first.counts()

			back := tc.disrupt(t, first, second)
			back.waitFor(t, "a new session with two heartbeats", func() bool {
				return len(back.hellos) > sessionsBeforeFor(back, first, sessionsBefore) &&
					back.heartbeatsBySes[len(back.hellos)] >= 2
			})

			_, invFirst, _ := first.counts()
			_, invSecond, _ := second.counts()
			if back == first && invFirst != 1 || back == second && (invFirst != 1 || invSecond != 0) {
				t.Errorf("inventories: first master %d, second %d; want 1 in all, none re-sent", invFirst, invSecond)
			}
			back.read(func() {
				h := back.hellos[len(back.hellos)-1]
				if h.GetLastAckedGeneration() != 1 || h.GetInventoryHash() != hashOf(t, testInventory("H100")) {
					t.Errorf("reconnect hello = %v, want last acked generation 1 and the held hash", h)
				}
				hbs := back.heartbeats[len(back.heartbeats)-1]
				if hbs.GetGeneration() != 1 {
					t.Errorf("heartbeat generation %d, want 1", hbs.GetGeneration())
				}
			})
			st2 := r.a.Status()
			if st2.AckedGeneration != 1 || st2.Reconnects < 1 || st2.InventoriesSent != 1 {
				t.Errorf("status = %+v, want acked generation 1, ≥1 reconnect, 1 inventory sent", st2)
			}
		})
	}
}

// sessionsBeforeFor is how many sessions back had seen before the disruption.
func sessionsBeforeFor(back, first *fakeMaster, firstSessions int) int {
	if back == first {
		return firstSessions
	}
	return 0
}

func TestFollowsLeaderHint(t *testing.T) {
	tests := []struct {
		name string
		// leaderListed puts the leader in Config.Masters after the follower.
		leaderListed bool
		// noHint makes the follower end with FAILED_PRECONDITION and no hint,
		// so the agent must rotate to the next master by itself.
		noHint bool
		// viaTrailer names the leader in the gin-leader-hint trailer only.
		viaTrailer bool
	}{
		{name: "hinted leader not in the master list", leaderListed: false},
		{name: "hinted leader later in the master list", leaderListed: true},
		{name: "follower without a hint, rotate", leaderListed: true, noHint: true},
		{name: "leader named in the trailer", leaderListed: false, viaTrailer: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore()
			leader, follower := newFakeMaster(t, st), newFakeMaster(t, st)
			follower.change(func() {
				switch {
				case tc.noHint:
					follower.notLeader = true
				case tc.viaTrailer:
					follower.notLeader = true
					follower.trailerHint = leader.addr
				default:
					follower.leaderHint = leader.addr
				}
			})
			masters := []string{follower.addr}
			if tc.leaderListed {
				masters = append(masters, leader.addr)
			}
			src := newFakeSource("H100")
			var logs syncBuffer
			r := runAgent(t, testConfig(src, &logs, masters...))

			leader.waitFor(t, "generation 1 at the leader and a heartbeat", func() bool {
				return len(leader.inventories) == 1 && len(leader.heartbeats) >= 1
			})
			fs, finv, _ := follower.counts()
			if fs != 1 || finv != 0 {
				t.Errorf("follower saw %d sessions and %d inventories, want 1 and 0", fs, finv)
			}
			if s := r.a.Status(); !s.Connected || s.Master != leader.addr || s.AckedGeneration != 1 {
				t.Errorf("status = %+v, want connected to the leader %s at generation 1", s, leader.addr)
			}
		})
	}
}

func TestLeaderAdvertisingItselfIsNotARedirect(t *testing.T) {
	// The leader names itself in every response, spelled differently from
	// the address the agent dialled (and not even reachable from here).
	m := newFakeMaster(t, newStore())
	m.change(func() { m.advertise = "gin-master-1.invalid:5000" })
	src := newFakeSource("H100")
	var logs syncBuffer
	r := runAgent(t, testConfig(src, &logs, m.addr))
	m.waitFor(t, "generation 1 and three heartbeats", func() bool {
		return len(m.inventories) == 1 && len(m.heartbeats) >= 3
	})
	if s, _, _ := m.counts(); s != 1 {
		t.Errorf("sessions = %d, want 1: the agent must stay with a leader naming itself", s)
	}
	if st := r.a.Status(); st.Master != m.addr || st.Reconnects != 0 {
		t.Errorf("status = %+v, want connected to %s without reconnects", st, m.addr)
	}
}

func TestLeaderHintOnAnyResponseMovesAgent(t *testing.T) {
	st := newStore()
	a1, a2 := newFakeMaster(t, st), newFakeMaster(t, st)
	src := newFakeSource("H100")
	var logs syncBuffer
	r := runAgent(t, testConfig(src, &logs, a1.addr))
	a1.waitFor(t, "session on the first master", func() bool { return len(a1.heartbeats) >= 1 })

	// The first master loses leadership: new sessions get the hint.
	a1.change(func() { a1.leaderHint = a2.addr })
	a1.kick()
	a2.waitFor(t, "session on the new leader", func() bool { return len(a2.heartbeats) >= 2 })
	if _, inv, _ := a2.counts(); inv != 0 {
		t.Errorf("new leader received %d inventories, want 0 (it holds generation 1)", inv)
	}
	if s := r.a.Status(); s.Master != a2.addr {
		t.Errorf("status master = %q, want %q", s.Master, a2.addr)
	}
}

func TestRejectionBacksOffWithoutTightLoop(t *testing.T) {
	tests := []struct {
		name   string
		code   codes.Code
		reason string
		want   string
	}{
		{"invalid inventory", codes.InvalidArgument, "gpus[0].pci_bus_id: \"07:00\" is not a normalised PCI address", "gpus[0].pci_bus_id"},
		{"node registered to another machine", codes.AlreadyExists, "node \"node-a\" is registered to another machine; this agent is machine \"m2\"", "registered to another machine"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := newFakeSource("H100")
			m := newFakeMaster(t, newStore())
			m.change(func() { m.reject, m.rejectCode = tc.reason, tc.code })
			var logs syncBuffer
			cfg := testConfig(src, &logs, m.addr)
			cfg.InitialBackoff = time.Millisecond
			cfg.MaxBackoff = 120 * time.Millisecond
			r := runAgent(t, cfg)

			const sessions = 4
			m.waitFor(t, "retries after rejection", func() bool { return len(m.sessionStarts) >= sessions })
			m.read(func() {
				// Every retry waits at least MaxBackoff/2: no tight loop.
				for i := 1; i < len(m.sessionStarts); i++ {
					if gap := m.sessionStarts[i].Sub(m.sessionStarts[i-1]); gap < cfg.MaxBackoff/2 {
						t.Errorf("attempt %d came %s after the previous one, want ≥ %s (MaxBackoff/2)", i+1, gap, cfg.MaxBackoff/2)
					}
				}
				if len(m.inventories) < sessions-1 {
					t.Errorf("inventories = %d, want the inventory retried on each attempt", len(m.inventories))
				}
			})
			st := r.a.Status()
			if st.LastError == nil || !strings.Contains(st.LastError.Error(), tc.want) {
				t.Errorf("status last error = %v, want the master's message", st.LastError)
			}
			if st.AckedGeneration != 0 {
				t.Errorf("acked generation = %d, want 0", st.AckedGeneration)
			}
			if out := logs.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, tc.want) {
				t.Errorf("logs lack an ERROR line with the master's message:\n%s", out)
			}
		})
	}
}

func TestCancelEndsRunPromptly(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, cfg *Config) func(*testing.T)
	}{
		{"connected", func(t *testing.T, cfg *Config) func(*testing.T) {
			m := newFakeMaster(t, newStore())
			cfg.Masters = []string{m.addr}
			return func(t *testing.T) {
				m.waitFor(t, "heartbeat", func() bool { return len(m.heartbeats) >= 1 })
			}
		}},
		{"backing off from a dead master", func(t *testing.T, cfg *Config) func(*testing.T) {
			cfg.Masters = []string{closedAddr(t)}
			cfg.InitialBackoff = time.Minute
			cfg.MaxBackoff = time.Hour
			return func(t *testing.T) {
				waitStatus(t, nil, nil) // nothing to wait for: cancel at once
			}
		}},
		{"source never succeeds", func(t *testing.T, cfg *Config) func(*testing.T) {
			cfg.Masters = []string{closedAddr(t)}
			src := cfg.Source.(*fakeSource)
			src.change(func() { src.err = errors.New("driver gone") })
			return func(t *testing.T) {
				src.waitFor(t, "two failed collections", func() bool { return src.calls >= 2 })
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := newFakeSource("H100")
			var logs syncBuffer
			cfg := testConfig(src, &logs)
			ready := tc.setup(t, &cfg)
			r := runAgent(t, cfg)
			ready(t)
			start := time.Now()
			r.cancel()
			select {
			case <-r.done:
			case <-time.After(waitTimeout):
				t.Fatal("Run did not return after cancel")
			}
			if r.err != nil {
				t.Errorf("Run = %v, want nil after cancel", r.err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Run took %s to return after cancel", d)
			}
			if s := r.a.Status(); s.Connected {
				t.Errorf("status after Run = %+v, want disconnected", s)
			}
		})
	}
}

func TestKeepsCollectingWhileAllMastersDown(t *testing.T) {
	src := newFakeSource("H100")
	var logs syncBuffer
	cfg := testConfig(src, &logs, closedAddr(t), closedAddr(t))
	r := runAgent(t, cfg)

	src.waitFor(t, "collections", func() bool { return src.calls >= 3 })
	src.setModel("H200")
	// The current hash follows the source while disconnected.
	h200 := hashOf(t, testInventory("H200"))
	waitStatus(t, r.a, func(s Status) bool {
		return s.CurrentHash == h200 && s.Reconnects >= 2 && s.LastError != nil
	})
	s := r.a.Status()
	if s.Connected || s.Master != "" || s.AckedGeneration != 0 {
		t.Errorf("status = %+v, want disconnected, no master, nothing acked", s)
	}
	// "Disconnected" is logged once per state change, not per retry.
	if n := strings.Count(logs.String(), "no master reachable yet"); n != 1 {
		t.Errorf("disconnected warning logged %d times, want once:\n%s", n, logs.String())
	}
}

func TestMasterSetsHeartbeatInterval(t *testing.T) {
	src := newFakeSource("H100")
	m := newFakeMaster(t, newStore())
	m.change(func() { m.heartbeatEvery = 15 * time.Millisecond })
	var logs syncBuffer
	cfg := testConfig(src, &logs, m.addr)
	cfg.HeartbeatInterval = time.Hour
	r := runAgent(t, cfg)
	m.waitFor(t, "heartbeats at the master's interval", func() bool { return len(m.heartbeats) >= 3 })
	if s := r.a.Status(); s.HeartbeatInterval != 15*time.Millisecond {
		t.Errorf("heartbeat interval = %s, want 15ms", s.HeartbeatInterval)
	}
}

func TestCollectionErrorsKeepLastGoodInventory(t *testing.T) {
	src := newFakeSource("H100")
	m := newFakeMaster(t, newStore())
	var logs syncBuffer
	r := runAgent(t, testConfig(src, &logs, m.addr))
	m.waitFor(t, "generation 1 acked", func() bool { return m.store.get("node-a").generation == 1 })
	src.change(func() { src.err = errors.New("nvml: driver not loaded") })
	n := src.callCount()
	src.waitFor(t, "failed collections", func() bool { return src.calls >= n+3 })
	if _, inv, _ := m.counts(); inv != 1 {
		t.Errorf("inventories = %d after collection errors, want 1", inv)
	}
	s := r.a.Status()
	if s.CollectErrors == 0 || s.LastError == nil || !strings.Contains(s.LastError.Error(), "driver not loaded") {
		t.Errorf("status = %+v, want collection errors counted", s)
	}
	if c := strings.Count(logs.String(), "inventory collection failing"); c != 1 {
		t.Errorf("collection failure logged %d times, want once", c)
	}
}

func TestNewValidates(t *testing.T) {
	src := newFakeSource("H100")
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{"ok", func(*Config) {}, ""},
		{"no node name", func(c *Config) { c.NodeName = "" }, "node name"},
		{"no source", func(c *Config) { c.Source = nil }, "source"},
		{"no masters", func(c *Config) { c.Masters = nil }, "no master"},
		{"bad master", func(c *Config) { c.Masters = []string{"host:99999"} }, "host:99999"},
		{"negative interval", func(c *Config) { c.HeartbeatInterval = -time.Second }, "negative"},
		{"max below initial backoff", func(c *Config) { c.MaxBackoff = time.Millisecond }, "max backoff"},
		{"no transport credentials", func(c *Config) { c.DialOptions = nil }, "dial options"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			cfg := testConfig(src, &logs, "127.0.0.1:5000")
			tc.mutate(&cfg)
			_, err := New(cfg)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("New error = %v, want one mentioning %q", err, tc.wantErr)
			}
		})
	}
}

func TestNewDefaultsAndNormalises(t *testing.T) {
	a, err := New(Config{NodeName: "n", Source: newFakeSource("x"), Logger: slog.New(slog.DiscardHandler),
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, Masters: []string{"Master-1", "[::1]:6000", "master-1:5000"}})
	if err != nil {
		t.Fatal(err)
	}
	if a.cfg.HeartbeatInterval != 5*time.Second || a.cfg.CollectInterval != 5*time.Second ||
		a.cfg.InitialBackoff != 200*time.Millisecond || a.cfg.MaxBackoff != 30*time.Second {
		t.Errorf("defaults = %+v", a.cfg)
	}
	if want := []string{"master-1:5000", "[::1]:6000"}; strings.Join(a.cfg.Masters, ",") != strings.Join(want, ",") {
		t.Errorf("masters = %v, want %v", a.cfg.Masters, want)
	}
	if err := a.Run(canceledContext()); err != nil {
		t.Errorf("Run on a cancelled context = %v", err)
	}
	if err := a.Run(canceledContext()); err == nil {
		t.Error("second Run succeeded, want an error")
	}
}

func canceledContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestBackoff(t *testing.T) {
	const initial, maxWait = 200 * time.Millisecond, 2 * time.Second
	b := newBackoff(initial, maxWait, rand.New(rand.NewPCG(7, 7)))
	ceil := initial
	for i := range 8 {
		d := b.next()
		if d < 0 || d > ceil {
			t.Errorf("wait %d = %s, want within [0, %s]", i, d, ceil)
		}
		ceil = min(2*ceil, maxWait)
	}
	b.reset()
	if d := b.next(); d > initial {
		t.Errorf("after reset wait = %s, want ≤ %s", d, initial)
	}
	for range 20 {
		if d := b.saturate(); d < maxWait/2 || d > maxWait {
			t.Errorf("saturated wait = %s, want in [%s, %s]", d, maxWait/2, maxWait)
		}
	}

	// Same seed, same waits: tests are deterministic.
	seq := func() []time.Duration {
		b := newBackoff(initial, maxWait, rand.New(rand.NewPCG(1, 2)))
		var out []time.Duration
		for range 6 {
			out = append(out, b.next())
		}
		return out
	}
	a1, a2 := seq(), seq()
	for i := range a1 {
		if a1[i] != a2[i] {
			t.Fatalf("seeded backoff differs: %v vs %v", a1, a2)
		}
	}
}

// A retry hint lengthens the wait to at least the hint (jittered up to
// twice it), never shortens a longer one.
func TestBackoffAtLeastRetryHint(t *testing.T) {
	b := newBackoff(100*time.Millisecond, time.Second, rand.New(rand.NewPCG(3, 4)))
	for range 50 {
		if d := b.atLeast(10*time.Millisecond, 2*time.Second); d < 2*time.Second || d > 4*time.Second {
			t.Fatalf("atLeast(10ms, 2s) = %s, want in [2s, 4s]", d)
		}
	}
	if d := b.atLeast(5*time.Second, 2*time.Second); d != 5*time.Second {
		t.Fatalf("atLeast(5s, 2s) = %s, want the longer wait kept", d)
	}
	if d := b.atLeast(10*time.Millisecond, 0); d != 10*time.Millisecond {
		t.Fatalf("atLeast without a hint = %s", d)
	}
}

func TestFullInventoryEncoderDoesNotModifySnapshot(t *testing.T) {
	inv := testInventory("H100")
	snap := &snapshot{inv: inv, hash: hashOf(t, inv)}
	req := fullInventoryEncoder{}.encode(held{generation: 4}, snap, 5)
	if got := req.GetInventory().GetGeneration(); got != 5 {
		t.Errorf("encoded generation = %d, want 5", got)
	}
	if inv.GetGeneration() != 0 || !proto.Equal(inv, testInventory("H100")) {
		t.Errorf("snapshot was modified: %v", inv)
	}
}

// waitStatus waits until cond holds for a's status. A nil a returns at once.
func waitStatus(t *testing.T, a *Agent, cond func(Status) bool) {
	t.Helper()
	if a == nil {
		return
	}
	testkit.WaitFor(t, waitTimeout, "the agent's status", func() bool { return cond(a.Status()) },
		func() string { return fmt.Sprintf("last %+v", a.Status()) })
}

// After the leader dies, a follower keeps naming it until its own heartbeat
// timeout. The agent must not bounce between that follower and the dead
// address: it passes over the dead one and reaches the new leader.
func TestHintToADeadMasterIsNotFollowedTwice(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	_ = lis.Close() // nothing listens there any more: connection refused

	st := newStore()
	follower, leader := newFakeMaster(t, st), newFakeMaster(t, st)
	follower.change(func() { follower.leaderHint = dead })
	src := newFakeSource("H100")
	var logs syncBuffer
	r := runAgent(t, testConfig(src, &logs, follower.addr, leader.addr))
	leader.waitFor(t, "the agent at the live leader", func() bool {
		return len(leader.inventories) == 1 && len(leader.heartbeats) >= 1
	})
	if fs, _, _ := follower.counts(); fs > 2 {
		t.Errorf("follower saw %d sessions: the agent kept following its hint to a dead master", fs)
	}
	if s := r.a.Status(); s.Master != leader.addr {
		t.Errorf("status master = %q, want the leader %q", s.Master, leader.addr)
	}
}

// A master that answers RESOURCE_EXHAUSTED (caps on nodes or streams, data
// dir full) cannot take the agent now: the agent moves to the next master
// without sending an inventory that master holds, and logs the refusal once,
// not once per attempt.
func TestResourceExhaustedMovesToAnotherMaster(t *testing.T) {
	const reason = "data dir /var/lib/gin-master is full: 1.0 MiB free"
	tests := []struct {
		name string
		// second lists a second master (sharing the first's store, which
		// holds the node's inventory).
		second bool
	}{
		{"another master takes the agent without a re-send", true},
		{"the only master keeps refusing: backoff, one log line", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore()
			inv := testInventory("H100")
			inv.Generation = 1
			st.put("node-a", storedInv{generation: 1, hash: hashOf(t, testInventory("H100")), inv: inv})
			first, second := newFakeMaster(t, st), newFakeMaster(t, st)
			first.change(func() { first.busy = reason })
			masters := []string{first.addr}
			if tc.second {
				masters = append(masters, second.addr)
			}
			src := newFakeSource("H100")
			var logs syncBuffer
			r := runAgent(t, testConfig(src, &logs, masters...))

			if tc.second {
				second.waitFor(t, "a session with two heartbeats on the second master", func() bool {
					return len(second.hellos) == 1 && second.heartbeatsBySes[1] >= 2
				})
				if _, inv, _ := second.counts(); inv != 0 {
					t.Errorf("second master received %d inventories, want 0 (it holds the node's)", inv)
				}
				if s := r.a.Status(); s.Master != second.addr || s.AckedGeneration != 1 || s.InventoriesSent != 0 {
					t.Errorf("status = %+v, want connected to %s at generation 1, no inventory sent", s, second.addr)
				}
				if fs, _, _ := first.counts(); fs != 1 {
					t.Errorf("the exhausted master saw %d sessions, want 1", fs)
				}
			} else {
				first.waitFor(t, "four refused attempts", func() bool { return len(first.hellos) >= 4 })
				if _, inv, _ := first.counts(); inv != 0 {
					t.Errorf("inventories = %d, want 0: a refused Hello sends none", inv)
				}
				if s := r.a.Status(); s.Connected || s.LastError == nil || !strings.Contains(s.LastError.Error(), reason) {
					t.Errorf("status = %+v, want disconnected with the master's reason", s)
				}
			}
			if n := strings.Count(logs.String(), "master cannot take this agent now"); n != 1 {
				t.Errorf("%d log lines about the exhausted master, want 1 (rate limited):\n%s", n, logs.String())
			}
			if !strings.Contains(logs.String(), reason) {
				t.Errorf("logs lack the master's reason %q", reason)
			}
		})
	}
}
