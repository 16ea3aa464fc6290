package master

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/inventory"
)

// benchMaster is one leader serving on loopback, in this process, with a
// plaintext client connection.
func benchMaster(b *testing.B) (*Server, *grpc.ClientConn) {
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
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return s, conn
}

// procMiB is this process's VmRSS and VmHWM (peak since clearPeak) in MiB.
func procMiB(b *testing.B) (rss, hwm float64) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			hwm = kb / 1024
		}
	}
	return rss, hwm
}

// BenchmarkHostlistBomb is issue #21's hostlist bomb: conc GetMatrix calls
// at once, each naming a×240[000000-131071] (131,072 names of 246 bytes),
// against a master in this process; it reports the process's RSS before
// and its peak (VmHWM, reset through /proc/self/clear_refs) during the
// wave. Run: go test -run '^$' -bench BenchmarkHostlistBomb -benchtime 1x ./internal/master
func BenchmarkHostlistBomb(b *testing.B) {
	bomb := strings.Repeat("a", 240) + "[000000-131071]"
	for _, conc := range []int{8, 48} {
		b.Run(fmt.Sprintf("concurrent=%d", conc), func(b *testing.B) {
			_, conn := benchMaster(b)
			topo := ginv1.NewTopologyServiceClient(conn)
			for b.Loop() {
				runtime.GC()
				debug.FreeOSMemory()
				if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
					b.Fatalf("resetting the peak RSS: %v", err)
				}
				before, _ := procMiB(b)
				var wg sync.WaitGroup
				codes := make([]string, conc)
				start := time.Now()
				for i := range conc {
					wg.Go(func() {
						_, err := topo.GetMatrix(context.Background(), &ginv1.GetMatrixRequest{Nodes: bomb})
						codes[i] = status.Code(err).String()
					})
				}
				wg.Wait()
				took := time.Since(start)
				_, peak := procMiB(b)
				b.ReportMetric(before, "rss-before-MiB")
				b.ReportMetric(peak, "rss-peak-MiB")
				b.ReportMetric(took.Seconds(), "wave-s")
				b.Logf("%d bombs: answers %v, RSS %.0f MiB before, peak %.0f MiB, %s", conc, codes[0], before, peak, took.Round(time.Millisecond))
			}
		})
	}
}

// bloat grows inv past bytes with GIDs of 255 characters on its HCA ports
// (valid: a GID is a string of at most 256 bytes, 256 per port).
func bloat(inv *ginv1.NodeInventory, bytes int) {
	gid := strings.Repeat("f", 255)
	for _, h := range inv.GetHcas() {
		for _, p := range h.GetPorts() {
			for len(p.Gids) < inventory.MaxGIDsPerPort && proto.Size(inv) < bytes {
				p.Gids = append(p.Gids, gid)
			}
		}
	}
}

// BenchmarkAgentInventoryBytes is issue #21's inventory bloat: one agent
// (node001, one session, a new session after each refusal) commits
// changing inventories of about 250 KB as fast as the master takes them
// for GIN_BLOAT_SECONDS (default 20); it reports the bytes committed, per
// minute. Run: go test -run '^$' -bench BenchmarkAgentInventoryBytes -benchtime 1x ./internal/master
func BenchmarkAgentInventoryBytes(b *testing.B) {
	secs := 20
	if v := os.Getenv("GIN_BLOAT_SECONDS"); v != "" {
		secs, _ = strconv.Atoi(v)
	}
	_, conn := benchMaster(b)
	inv := simInventory(b, "dgx-h100", "node001")
	bloat(inv, 250_000)
	size := proto.Size(inv)
	next := nextGenerations(inv)
	for b.Loop() {
		var committed, refused, sessions int
		deadline := time.Now().Add(time.Duration(secs) * time.Second)
		for time.Now().Before(deadline) {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			st, err := ginv1.NewAgentServiceClient(conn).Session(ctx)
			if err != nil {
				cancel()
				b.Fatal(err)
			}
			sessions++
			hash, _ := inventory.ContentHash(inv)
			_ = st.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Hello{Hello: &ginv1.Hello{
				NodeName: inv.GetNodeName(), MachineId: inv.GetHost().GetMachineId(), InventoryHash: hash}}})
			if _, err := st.Recv(); err != nil {
				cancel()
				continue
			}
			for {
				if err := st.Send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Inventory{Inventory: next()}}); err != nil {
					break
				}
				if _, err := st.Recv(); err != nil {
					refused++
					break
				}
				committed++
			}
			cancel()
		}
		perMin := float64(committed*size) / float64(secs) * 60 / (1 << 20)
		b.ReportMetric(float64(size), "inventory-bytes")
		b.ReportMetric(float64(committed), "committed")
		b.ReportMetric(perMin, "MiB/min")
		b.Logf("%d s: %d inventories of %d bytes committed (%.1f MiB/min), %d refused, %d sessions", secs, committed, size, perMin, refused, sessions)
	}
}
