package plan

import (
	"testing"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// TestEveryAlgorithmAndProtocolHasNCCLsName: a value added to the proto
// enums without NCCL's name here would print as "NCCL's choice".
func TestEveryAlgorithmAndProtocolHasNCCLsName(t *testing.T) {
	seen := map[string]bool{}
	for v := range ginv1.Algorithm_name {
		a := ginv1.Algorithm(v)
		name := AlgorithmName(a)
		if (a == ginv1.Algorithm_ALGORITHM_UNSPECIFIED) != (name == "") || (name != "" && seen[name]) {
			t.Errorf("AlgorithmName(%s) = %q", a, name)
		}
		seen[name] = true
	}
	for v := range ginv1.Protocol_name {
		p := ginv1.Protocol(v)
		name := ProtocolName(p)
		if (p == ginv1.Protocol_PROTOCOL_UNSPECIFIED) != (name == "") || (name != "" && seen[name]) {
			t.Errorf("ProtocolName(%s) = %q", p, name)
		}
		seen[name] = true
	}
}
