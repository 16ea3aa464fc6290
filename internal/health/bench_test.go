package health

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// BenchmarkAssessDGXH100: the node rules over one simulated DGX H100
// inventory (what the master reruns when one node's record changes).
func BenchmarkAssessDGXH100(b *testing.B) {
	inv := simNodeB(b)
	n := Node{Name: "n1", State: ginv1.NodeState_NODE_STATE_UP, Inventory: inv, Leaf: "leaf1"}
	b.ReportAllocs()
	for b.Loop() {
		Assess(n, Thresholds{})
	}
}

// BenchmarkVerdicts10k: the cluster rules and verdicts over 10,000 kept
// assessments (what the master runs once per applied index a Check sees).
func BenchmarkVerdicts10k(b *testing.B) {
	inv := simNodeB(b)
	as := make([]Assessment, 10000)
	for i := range as {
		c := proto.Clone(inv).(*ginv1.NodeInventory)
		name := fmt.Sprintf("node%05d", i)
		as[i] = Assess(Node{Name: name, State: ginv1.NodeState_NODE_STATE_UP, Inventory: c, Leaf: fmt.Sprintf("leaf%d", i/32)}, Thresholds{})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Verdicts(as, Thresholds{})
	}
}

func simNodeB(b *testing.B) *ginv1.NodeInventory { return simNodeTB(b) }
