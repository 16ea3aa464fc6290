package discovery

import (
	"context"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// Source discovers one node's inventory. Implementations are safe to call
// repeatedly; each call reflects the hardware at that moment.
type Source interface {
	// Name is the --source spec the source was opened with ("sim:dgx-h100").
	Name() string
	// Collect discovers the node's inventory now. The generation is left 0:
	// the agent assigns generations.
	Collect(ctx context.Context) (*ginv1.NodeInventory, error)
}

// CounterSource is a Source that also reads counters (for Prometheus and
// link health) at any time.
type CounterSource interface {
	Counters(ctx context.Context) Counters
}
