package state

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/inventory"
)

// memNodes is how many nodes the memory benchmarks store: GIN_MEM_NODES
// (e.g. 10000 for a 10,000-node cluster's live heap), else 2,000.
func memNodes(tb testing.TB) int {
	v := os.Getenv("GIN_MEM_NODES")
	if v == "" {
		return 2000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 2 || n > 100_000 {
		tb.Fatalf("GIN_MEM_NODES=%q: want a node count from 2 to 100000", v)
	}
	return n
}

// memProfiles are the node mixes BenchmarkStoreMemoryPerNode measures,
// memNodes nodes each.
func memProfiles(tb testing.TB) []memProfile {
	n := memNodes(tb)
	return []memProfile{
		{"dgx-h100", sim.NodesOf("dgx-h100", "node", 0, n)},
		{"gb200-nvl72", sim.NodesOf("gb200-nvl72", "tray", 0, n)},
		{"mixed", append(sim.NodesOf("gb200-nvl72", "tray", 0, n/2), sim.NodesOf("dgx-h100", "node", 0, n-n/2)...)},
	}
}

type memProfile struct {
	name  string
	nodes []sim.FabricNode
}

// memEntries are the nodes' simulated inventories as the FSM gets them:
// PutInventory commands marshaled into Raft log entries; fabric is their
// fabric's ImportFabric command.
func memEntries(b testing.TB, nodes []sim.FabricNode) (entries [][]byte, fabric []byte) {
	b.Helper()
	fs, err := sim.ParseFabricSpec("leaf-groups=2,spines=4,oversub=2")
	if err != nil {
		b.Fatal(err)
	}
	c, err := sim.NewCluster("state", &fs, nodes)
	if err != nil {
		b.Fatal(err)
	}
	invs, err := c.Collect(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	out := make([][]byte, len(invs))
	for i, inv := range invs {
		inv, _ = inventory.Canonical(inv) // as agents send them
		h, err := inventory.ContentHash(inv)
		if err != nil {
			b.Fatal(err)
		}
		out[i], err = proto.Marshal(&statev1.Command{Command: &statev1.Command_PutInventory{PutInventory: &statev1.PutInventory{
			Inventory: inv, ContentHash: h, At: timestamppb.Now()}}})
		if err != nil {
			b.Fatal(err)
		}
	}
	fabric, err = proto.Marshal(&statev1.Command{Command: &statev1.Command_ImportFabric{ImportFabric: &statev1.ImportFabric{Fabric: c.Fabric}}})
	if err != nil {
		b.Fatal(err)
	}
	return out, fabric
}

func heapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkStoreMemoryPerNode reports the live heap the store keeps per
// registered node (record, inventory, graph), as the FSM builds it from
// Raft entries, and how much of it is the decoded inventories alone; then
// what the nodes' fabric scan adds once imported (fabric-B/node: the
// scan's message and the graph's fabric index).
func BenchmarkStoreMemoryPerNode(b *testing.B) {
	for _, mp := range memProfiles(b) {
		b.Run(mp.name, func(b *testing.B) {
			entries, fabric := memEntries(b, mp.nodes)
			storeMemory(b, entries, fabric)
		})
	}
}

func storeMemory(b *testing.B, entries [][]byte, fabric []byte) {
	wire := 0
	for _, e := range entries {
		wire += len(e)
	}
	for b.Loop() {
		before := heapNow()
		invs := make([]*ginv1.NodeInventory, len(entries))
		for i, e := range entries {
			var c statev1.Command
			if err := proto.Unmarshal(e, &c); err != nil {
				b.Fatal(err)
			}
			invs[i] = c.GetPutInventory().GetInventory()
		}
		mid := heapNow()
		runtime.KeepAlive(invs)
		invs = nil
		s := New(nil)
		base := heapNow()
		applyEntries(b, s, entries)
		after := heapNow()
		var c statev1.Command
		if err := proto.Unmarshal(fabric, &c); err != nil {
			b.Fatal(err)
		}
		if _, err := s.ImportFabric(uint64(len(entries)+1), c.GetImportFabric()); err != nil {
			b.Fatal(err)
		}
		c.Reset()
		withFabric := heapNow()
		runtime.KeepAlive(s)
		n := float64(len(entries))
		b.ReportMetric(float64(withFabric-after)/n, "fabric-B/node")
		b.ReportMetric(float64(after-base)/n, "B/node")
		b.ReportMetric(float64(mid-before)/n, "inventory-B/node")
		b.ReportMetric(float64(wire)/n, "wire-B/node")
		b.ReportMetric(float64(after-base)/(1<<20), "live-MiB")
	}
}

// BenchmarkPutInventory is the FSM's cost of storing one new node: a DGX
// H100 inventory applied as a PutInventory entry (identity and generation
// checks, graph update, marshal and deflate), into stores of up to
// memNodes nodes.
func BenchmarkPutInventory(b *testing.B) {
	entries, _ := memEntries(b, memProfiles(b)[0].nodes)
	cmds := make([]*statev1.PutInventory, len(entries))
	for i, e := range entries {
		var c statev1.Command
		if err := proto.Unmarshal(e, &c); err != nil {
			b.Fatal(err)
		}
		cmds[i] = c.GetPutInventory()
	}
	s, i := New(nil), 0
	for b.Loop() {
		if i == len(cmds) {
			b.StopTimer()
			s, i = New(nil), 0
			b.StartTimer()
		}
		if _, err := s.PutInventory(uint64(i+1), cmds[i]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkImportFabric is the FSM's cost of applying a fabric scan of
// memNodes DGX H100 nodes (the graph's fabric index, and the scan kept).
func BenchmarkImportFabric(b *testing.B) {
	_, fabric := simInventories(b, memNodes(b))
	cmd := &statev1.ImportFabric{Fabric: fabric}
	s := New(nil)
	i := uint64(0)
	for b.Loop() {
		i++
		if _, err := s.ImportFabric(i, cmd); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSnapshotEncode is a Raft snapshot's encoding of a store of
// memNodes DGX H100 nodes (Capture, then Encode's pieces counted, as the
// snapshot sink would write them): ns/node and the snapshot's bytes per
// node.
func BenchmarkSnapshotEncode(b *testing.B) {
	entries, _ := memEntries(b, memProfiles(b)[0].nodes)
	s := New(nil)
	applyEntries(b, s, entries)
	var size int
	for b.Loop() {
		size = 0
		if err := s.Capture().Encode(func(p []byte) error { size += len(p); return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(entries)), "ns/node")
	b.ReportMetric(float64(size)/float64(len(entries)), "B/node")
}

// applyEntries applies Raft entries of PutInventory commands to s, as the
// FSM does, at indexes 1, 2, ...
func applyEntries(b *testing.B, s *Store, entries [][]byte) {
	b.Helper()
	for i, e := range entries {
		var c statev1.Command
		if err := proto.Unmarshal(e, &c); err != nil {
			b.Fatal(err)
		}
		if _, err := s.PutInventory(uint64(i+1), c.GetPutInventory()); err != nil {
			b.Fatal(err)
		}
	}
}
