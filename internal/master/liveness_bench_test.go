package master

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// BenchmarkMarkLeafDown is what a failed leaf switch costs the leader: 512
// registered nodes marked DOWN at once (what check proposes when their
// sessions stopped together), timed from the proposal until every change
// is applied on the leader (its watch tells), with the Raft entries that
// took. batch=512 is liveness's batching; batch=1 commits one change an
// entry, one after the other: the path before it (one SetNodeState per
// node, each proposed once the one before committed). Real masters on
// loopback, real Raft data dirs, fsync on every commit; 1 and 3 masters.
// Between ops (untimed) the nodes are brought back UP the same way.
func BenchmarkMarkLeafDown(b *testing.B) {
	const nodes = 512
	for _, masters := range []int{1, 3} {
		for _, batch := range []int{maxBatch, 1} {
			b.Run(fmt.Sprintf("masters=%d/batch=%d", masters, batch), func(b *testing.B) {
				var all []*Server
				if masters == 1 {
					srv, err := New(Config{ID: "m1", Bind: "127.0.0.1:0", RaftBind: "127.0.0.1:0", DataDir: b.TempDir(), Bootstrap: true,
						FastRaft: true, HeartbeatInterval: time.Minute, Logger: slog.New(slog.DiscardHandler)})
					if err != nil {
						b.Fatal(err)
					}
					ctx, cancel := context.WithCancel(context.Background())
					done := make(chan error, 1)
					go func() { done <- srv.Serve(ctx) }()
					b.Cleanup(func() { cancel(); <-done; _ = srv.Close() })
					waitUntil(b, "leader", func() bool { return srv.node.IsLeader() && srv.store.ClusterID() != "" && registered(srv) })
					all = []*Server{srv}
				} else {
					ms := startClusterWith(b, masters, func(c *Config) { c.HeartbeatInterval = time.Minute })
					waitUntil(b, "cluster", func() bool { return formed(ms) })
					for _, m := range ms {
						all = append(all, m.s)
					}
				}
				for _, s := range all {
					s.live.mu.Lock()
					s.live.maxBatch = batch
					s.live.mu.Unlock()
				}
				// The leader now (under load FastRaft's leader can step
				// down; markAll proposes again on the next one).
				lead := func() *Server {
					var l *Server
					waitUntil(b, "a leader", func() bool {
						for _, s := range all {
							if s.node.IsLeader() {
								l = s
								return true
							}
						}
						return false
					})
					return l
				}
				names := registerLeaf(b, lead, nodes)
				var entries uint64
				b.ResetTimer()
				for range b.N {
					b.StopTimer()
					markAll(b, lead, names, ginv1.NodeState_NODE_STATE_UP)
					s := lead()
					before := s.store.Index()
					b.StartTimer()
					markAll(b, lead, names, ginv1.NodeState_NODE_STATE_DOWN)
					b.StopTimer()
					entries += s.store.Index() - before
					b.StartTimer()
				}
				b.ReportMetric(float64(entries)/float64(b.N), "entries/op")
			})
		}
	}
}

// registerLeaf registers n nodes through the leader (16 at a time) and
// marks them DOWN, so that the benchmark's first UP has work to do.
func registerLeaf(b *testing.B, lead func() *Server, n int) []string {
	b.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("leaf%03d", i)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				inv := simInventory(b, "rtx3090-nvlink-pair", names[i])
				inv.Generation = 1
				var err error
				for range 20 { // a leader that stepped down: the next one
					if _, err = lead().commitInventory(context.Background(), names[i], "", inv, nil); err == nil {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range names {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	markAll(b, lead, names, ginv1.NodeState_NODE_STATE_DOWN)
	return names
}

// markAll proposes st for every node at once (as check does) on the leader
// and returns once it has applied them all; when it is no longer leader
// meanwhile, the next one is asked (what it holds already is not queued).
func markAll(b *testing.B, lead func() *Server, names []string, st ginv1.NodeState) {
	b.Helper()
	changes := make([]stateChange, len(names))
	for i, n := range names {
		changes[i] = stateChange{n, st, "benchmark"}
	}
	for range 20 {
		s := lead()
		events, cancel := s.store.Watch()
		left := len(names) - inState(s.store, names, st)
		s.live.propose(changes...)
		timeout := time.After(10 * time.Second)
	wait:
		for left > 0 {
			select {
			case e, ok := <-events:
				if !ok {
					break wait
				}
				if e.Kind == ginv1.WatchEventKind_WATCH_EVENT_KIND_NODE_STATE && e.NewState == st {
					left--
				}
			case <-timeout:
				break wait
			}
		}
		cancel()
		if inState(s.store, names, st) == len(names) {
			return
		}
	}
	b.Fatalf("nodes not all %v after 20 tries", st)
}
