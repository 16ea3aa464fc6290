package sources

import (
	"context"
	"testing"

	"github.com/gin-topology/gin/internal/discovery/sim"
	"github.com/gin-topology/gin/internal/inventory"
)

// BenchmarkCollectDGXH100 is one full collection of a simulated DGX H100 as
// the agent does it every collect interval: the source (with counters and the
// link-health verdicts) and the content hash that decides whether to send.
func BenchmarkCollectDGXH100(b *testing.B) {
	s, err := sim.NewSource("dgx-h100", sim.NodeOptions{NodeName: "node001"})
	if err != nil {
		b.Fatal(err)
	}
	src := WithHealth(s, 10)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		inv, err := src.Collect(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := inventory.ContentHash(inv); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCollectDGXH100Baseline is the same collection without link health
// and hashing: the floor the agent's own work is compared against.
func BenchmarkCollectDGXH100Baseline(b *testing.B) {
	s, err := sim.NewSource("dgx-h100", sim.NodeOptions{NodeName: "node001"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Collect(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
