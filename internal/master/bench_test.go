package master

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

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
			inv := simInventory(b, "dgx-h100", "bench001")
			ctx := context.Background()
			var lat []time.Duration
			gen := uint64(0)
			b.ResetTimer()
			for b.Loop() {
				gen++
				next := proto.CloneOf(inv)
				next.Generation = gen
				if gen%2 == 0 {
					next.Gpus[0].Nvlinks[0].State = ginv1.LinkState_LINK_STATE_DOWN
				}
				t0 := time.Now()
				if _, err := leader.putInventory(ctx, next); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			var sum time.Duration
			for _, l := range lat {
				sum += l
			}
			b.ReportMetric(float64(len(lat))/sum.Seconds(), "commits/s")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkCommitTLS is BenchmarkCommit on three masters with the Raft
// transport (and gRPC) in plaintext and with mTLS, in the same run, so the
// two can be compared (issue #11: TLS p99 ≤ 1.2× plaintext).
func BenchmarkCommitTLS(b *testing.B) {
	for _, tlsOn := range []bool{false, true} {
		b.Run(fmt.Sprintf("tls=%v", tlsOn), func(b *testing.B) {
			p := newTestPKI(b) // per run: certificates are never overwritten
			ms := startClusterWith(b, 3, func(c *Config) {
				c.HeartbeatInterval = time.Minute
				// Raft's default timeouts: on a loaded machine FastRaft's
				// loopback timeouts lose the leader mid-run.
				c.FastRaft = false
				if tlsOn {
					c.TLS = p.source(b, pki.Identity{Role: pki.RoleMaster, Name: c.ID})
				}
			})
			waitUntil(b, "cluster", func() bool { return formed(ms) })
			leader := leaderOf(ms).s
			inv := simInventory(b, "dgx-h100", "bench001")
			ctx := context.Background()
			var lat []time.Duration
			gen := uint64(0)
			b.ResetTimer()
			for b.Loop() {
				gen++
				next := proto.CloneOf(inv)
				next.Generation = gen
				if gen%2 == 0 {
					next.Gpus[0].Nvlinks[0].State = ginv1.LinkState_LINK_STATE_DOWN
				}
				t0 := time.Now()
				if _, err := leader.putInventory(ctx, next); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
