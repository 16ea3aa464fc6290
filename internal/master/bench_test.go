package master

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/pki"
)

// BenchmarkCommit measures inventory commits (validation, graph check, Raft
// with fsync on every server, FSM apply) with 1, 3 and 5 masters on real TCP
// sockets and real data directories, sequentially: commits/s and latency
// percentiles. Each op is one DGX H100 inventory at the next generation
// (about 12 KB), with one NVLink toggled so the content changes.
func BenchmarkCommit(b *testing.B) {
	for _, n := range []int{1, 3, 5} {
		b.Run(fmt.Sprintf("masters=%d", n), func(b *testing.B) {
			var leader *Server
			if n == 1 {
				s, err := New(Config{ID: "m1", Bind: "127.0.0.1:0", RaftBind: "127.0.0.1:0", DataDir: b.TempDir(), Bootstrap: true,
					FastRaft: true, HeartbeatInterval: time.Minute, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- s.Serve(ctx) }()
				b.Cleanup(func() { cancel(); <-done; _ = s.Close() })
				waitUntil(b, "leader", func() bool { return s.node.IsLeader() && s.store.ClusterID() != "" && registered(s) })
				leader = s
			} else {
				ms := startClusterWith(b, n, func(c *Config) { c.HeartbeatInterval = time.Minute })
				waitUntil(b, "cluster", func() bool { return formed(ms) })
				leader = leaderOf(ms).s
			}
			commit := inventoryCommits(b, leader)
			var lat []time.Duration
			b.ResetTimer()
			for b.Loop() {
				lat = append(lat, commit())
			}
			b.StopTimer()
			slices.Sort(lat)
			var sum time.Duration
			for _, l := range lat {
				sum += l
			}
			b.ReportMetric(float64(len(lat))/sum.Seconds(), "commits/s")
			b.ReportMetric(percentileUs(lat, 50), "p50-µs")
			b.ReportMetric(percentileUs(lat, 99), "p99-µs")
		})
	}
}

// nextGenerations returns a function that returns the next generation of
// inv (1, 2, ...), GPU0's NVLink 0 down in every other one so that the
// content changes each time.
func nextGenerations(inv *ginv1.NodeInventory) func() *ginv1.NodeInventory {
	gen := uint64(0)
	return func() *ginv1.NodeInventory {
		gen++
		next := proto.CloneOf(inv)
		next.Generation = gen
		if gen%2 == 0 {
			next.Gpus[0].Nvlinks[0].State = ginv1.LinkState_LINK_STATE_DOWN
		}
		return next
	}
}

// inventoryCommits returns a function that commits the next generation of
// one DGX H100 inventory (about 12 KB, one NVLink toggled so the content
// changes) through leader and returns how long the commit took.
func inventoryCommits(b *testing.B, leader *Server) func() time.Duration {
	inv := simInventory(b, "dgx-h100", "bench001")
	next := nextGenerations(inv)
	return func() time.Duration {
		next := next()
		t0 := time.Now()
		if _, err := leader.putInventory(context.Background(), next); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
}

// percentileUs is the p-th percentile (0..100) of sorted, in µs.
func percentileUs(sorted []time.Duration, p int) float64 {
	return float64(sorted[min(len(sorted)-1, len(sorted)*p/100)].Microseconds())
}

// BenchmarkCommitTLS compares commits on three masters with the Raft
// transport in plaintext and over mTLS (issue #11: TLS p99 ≤ 1.2×
// plaintext). Both clusters run at once in this process, with Raft's
// default timeouts, and every op commits one inventory to each, in
// alternating order, so the two see the same machine (a shared machine's
// load drifts between runs more than TLS costs): plain-* and tls-*
// percentiles, and their ratios.
func BenchmarkCommitTLS(b *testing.B) {
	p := newTestPKI(b)
	leaders := make([]*Server, 2) // plaintext, TLS
	for i := range leaders {
		ms := startClusterWith(b, 3, func(c *Config) {
			c.HeartbeatInterval = time.Minute
			// Raft's default timeouts: on a loaded machine FastRaft's
			// loopback timeouts lose the leader mid-run.
			c.FastRaft = false
			if i == 1 {
				c.TLS = p.source(b, pki.Identity{Role: pki.RoleMaster, Name: c.ID})
			}
		})
		waitUntil(b, "cluster", func() bool { return formed(ms) })
		leaders[i] = leaderOf(ms).s
	}
	compareCommits(b, [2]string{"plain", "tls"}, [2]func() time.Duration{inventoryCommits(b, leaders[0]), inventoryCommits(b, leaders[1])}, nil)
}

// compareCommits runs two kinds of commit alternately (each op one of
// each, the order alternating, so both see the same machine) and reports
// each one's p50 and p99 and the second's over the first's. check, when
// set, runs before the report (a run that measured something else fails).
func compareCommits(b *testing.B, names [2]string, commits [2]func() time.Duration, check func()) {
	var lat [2][]time.Duration
	op := 0
	b.ResetTimer()
	for b.Loop() {
		for k := range 2 {
			i := (op + k) % 2
			lat[i] = append(lat[i], commits[i]())
		}
		op++
	}
	b.StopTimer()
	for i := range lat {
		slices.Sort(lat[i])
	}
	if check != nil {
		check()
	}
	b.ReportMetric(0, "ns/op") // two commits per op: the percentiles are the figures
	for i, n := range names {
		b.ReportMetric(percentileUs(lat[i], 50), n+"-p50-µs")
		b.ReportMetric(percentileUs(lat[i], 99), n+"-p99-µs")
	}
	b.ReportMetric(percentileUs(lat[1], 50)/percentileUs(lat[0], 50), "p50-"+names[1]+"/"+names[0])
	b.ReportMetric(percentileUs(lat[1], 99)/percentileUs(lat[0], 99), "p99-"+names[1]+"/"+names[0])
}

// BenchmarkCommitThroughFollower compares what an agent sees, from sending
// an inventory on its session to the InventoryAck, with its session on the
// leader and on a follower (which relays to the leader and acknowledges
// once the leader has committed; issue #16). One three-master cluster with
// Raft's default timeouts; every op commits one inventory through each
// session, in alternating order, so both see the same load: leader-* and
// follower-* percentiles and their ratios.
func BenchmarkCommitThroughFollower(b *testing.B) {
	ms := startClusterWith(b, 3, func(c *Config) {
		c.HeartbeatInterval = time.Minute
		c.FastRaft = false // loopback timeouts lose the leader on a loaded machine
	})
	waitUntil(b, "cluster", func() bool { return formed(ms) })
	leader := leaderOf(ms)
	compareCommits(b, [2]string{"leader", "follower"},
		[2]func() time.Duration{sessionCommits(b, leader.s.Addr(), "benchl"), sessionCommits(b, followerOf(ms, leader).s.Addr(), "benchf")},
		func() {
			if l := leaderOf(ms); l != leader {
				b.Fatal("leadership moved during the run: the figures mix both roles")
			}
		})
}

// sessionCommits opens an agent session for node on the master at addr
// and returns a function that sends the next generation of a DGX H100
// inventory (one NVLink toggled) and returns the time to its ack.
func sessionCommits(b *testing.B, addr, node string) func() time.Duration {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	st, err := ginv1.NewAgentServiceClient(conn).Session(ctx)
	if err != nil {
		b.Fatal(err)
	}
	inv := simInventory(b, "dgx-h100", node)
	if err := st.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Hello{Hello: &ginv1.Hello{NodeName: node, MachineId: inv.GetHost().GetMachineId()}}}); err != nil {
		b.Fatal(err)
	}
	if r, err := st.Recv(); err != nil || r.GetHelloAck() == nil {
		b.Fatalf("hello on %s: %v, %v", addr, r, err)
	}
	next := nextGenerations(inv)
	return func() time.Duration {
		next := next()
		gen := next.GetGeneration()
		t0 := time.Now()
		if err := st.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Inventory{Inventory: next}}); err != nil {
			b.Fatal(err)
		}
		for {
			r, err := st.Recv()
			if err != nil {
				b.Fatalf("generation %d through %s: %v", gen, addr, err)
			}
			if a := r.GetInventoryAck(); a != nil {
				if a.GetAcceptedGeneration() != gen {
					b.Fatalf("ack for generation %d, want %d", a.GetAcceptedGeneration(), gen)
				}
				return time.Since(t0)
			}
		}
	}
}
