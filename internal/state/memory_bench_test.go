package state

import (
	"context"
	"runtime"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/inventory"
)

const memNodes = 2000

// memProfiles are the node mixes BenchmarkStoreMemoryPerNode measures,
// memNodes nodes each.
func memProfiles() []memProfile {
	return []memProfile{
		{"dgx-h100", sim.NodesOf("dgx-h100", "node", 0, memNodes)},
		{"gb200-nvl72", sim.NodesOf("gb200-nvl72", "tray", 0, memNodes)},
		{"mixed", append(sim.NodesOf("gb200-nvl72", "tray", 0, memNodes/2), sim.NodesOf("dgx-h100", "node", 0, memNodes/2)...)},
	}
}

type memProfile struct {
	name  string
	nodes []sim.FabricNode
}

// memEntries are the nodes' simulated inventories as the FSM gets them:
// PutInventory commands marshaled into Raft log entries.
func memEntries(b testing.TB, nodes []sim.FabricNode) [][]byte {
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
	return out
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
// Raft entries, and how much of it is the decoded inventories alone.
func BenchmarkStoreMemoryPerNode(b *testing.B) {
	for _, mp := range memProfiles() {
		b.Run(mp.name, func(b *testing.B) { storeMemory(b, memEntries(b, mp.nodes)) })
	}
}

func storeMemory(b *testing.B, entries [][]byte) {
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
		for i, e := range entries {
			var c statev1.Command
			if err := proto.Unmarshal(e, &c); err != nil {
				b.Fatal(err)
			}
			if _, err := s.PutInventory(uint64(i+1), c.GetPutInventory()); err != nil {
				b.Fatal(err)
			}
		}
		after := heapNow()
		runtime.KeepAlive(s)
		b.ReportMetric(float64(after-base)/memNodes, "B/node")
		b.ReportMetric(float64(mid-before)/memNodes, "inventory-B/node")
		b.ReportMetric(float64(wire)/memNodes, "wire-B/node")
	}
}

// BenchmarkPutInventory is the FSM's cost of storing one new node: a DGX
// H100 inventory applied as a PutInventory entry (identity and generation
// checks, graph update, marshal and deflate), into stores of up to
// memNodes nodes.
func BenchmarkPutInventory(b *testing.B) {
	entries := memEntries(b, memProfiles()[0].nodes)
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
