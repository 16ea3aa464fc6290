package master

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/inventory"
)

// BenchmarkRegistration is the cost of registering one new node from cold
// (issue #16): a real gin-master (one-voter Raft on a fresh data
// directory, fsync on every commit) on loopback, and one op is one new
// agent's session over real gRPC: Hello, its DGX H100 inventory at
// generation 1 (validation, Raft apply, FSM apply, graph update), the
// InventoryAck, the session closed. regConcurrency sessions at a time,
// each on its own connection, like agents. Handshake pacing is off (a
// rate far above what the machine does) so that the figure is the CPU's
// (pacing is measured by its own tests). cpu-ms/reg is this process's CPU
// (user+system) per registration: the master's, and the load generator's
// gRPC client side (its inventories and hashes are made before the timer).
func BenchmarkRegistration(b *testing.B) {
	const regConcurrency = 16
	s, err := New(Config{ID: "m1", Bind: "127.0.0.1:0", RaftBind: "127.0.0.1:0", DataDir: b.TempDir(),
		Bootstrap: true, FastRaft: true, HeartbeatInterval: time.Minute, MissedHeartbeats: 3,
		HandshakeRate: 1e6, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	b.Cleanup(func() { cancel(); <-served; _ = s.Close() })
	waitUntil(b, "leader", func() bool { return s.node.IsLeader() && s.store.ClusterID() != "" && registered(s) })

	conns := make([]*grpc.ClientConn, regConcurrency)
	for i := range conns {
		c, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		conns[i] = c
		b.Cleanup(func() { _ = c.Close() })
	}
	// The inventories and their hashes are made before the timer: n
	// distinct nodes.
	invs := make([]*ginv1.NodeInventory, b.N)
	hashes := make([]string, b.N)
	for i := range invs {
		invs[i] = simInventory(b, "dgx-h100", fmt.Sprintf("reg%05d", i+1))
		invs[i].Generation = 1
		if hashes[i], err = inventory.ContentHash(invs[i]); err != nil {
			b.Fatal(err)
		}
	}
	next := make(chan int)
	errs := make(chan error, regConcurrency)
	var wg sync.WaitGroup
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for w := range regConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := registerOnce(ctx, conns[w], invs[i], hashes[i]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range b.N {
		next <- i
	}
	close(next)
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/reg")
	if got := s.store.View().Len(); got < b.N {
		b.Fatalf("%d nodes stored, want at least %d", got, b.N)
	}
}

// registerOnce is one agent's registration: Hello, the inventory, its
// InventoryAck, the session closed.
func registerOnce(ctx context.Context, conn *grpc.ClientConn, inv *ginv1.NodeInventory, hash string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err := ginv1.NewAgentServiceClient(conn).Session(ctx)
	if err != nil {
		return err
	}
	if err := st.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Hello{Hello: &ginv1.Hello{
		NodeName: inv.GetNodeName(), MachineId: inv.GetHost().GetMachineId(), InventoryHash: hash}}}); err != nil {
		return fmt.Errorf("%s: hello: %w", inv.GetNodeName(), err)
	}
	if _, err := st.Recv(); err != nil {
		return fmt.Errorf("%s: hello ack: %w", inv.GetNodeName(), err)
	}
	if err := st.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Inventory{Inventory: inv}}); err != nil {
		return fmt.Errorf("%s: inventory: %w", inv.GetNodeName(), err)
	}
	resp, err := st.Recv()
	if err != nil {
		return fmt.Errorf("%s: inventory ack: %w", inv.GetNodeName(), err)
	}
	if resp.GetInventoryAck().GetAcceptedGeneration() != 1 {
		return fmt.Errorf("%s: want an InventoryAck of generation 1, got %v", inv.GetNodeName(), resp)
	}
	return st.CloseSend()
}

// cpuTime is this process's CPU time so far (user and system).
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
