//go:build !cgo

package nvml

import (
	"context"

	"github.com/gin-topology/gin/internal/discovery"
)

// Collector reads GPUs through NVML. In this build (no cgo) it cannot: New
// returns ErrNoNVML and every method reports ErrNoNVML.
type Collector struct{}

// New returns ErrNoNVML: NVML needs a cgo build.
func New() (*Collector, error) { return nil, ErrNoNVML }

// Close does nothing.
func (c *Collector) Close() error { return nil }

// Inventory reports ErrNoNVML.
func (c *Collector) Inventory(ctx context.Context) (Result, []discovery.ItemError) {
	return Result{}, noNVML()
}

// Counters reports ErrNoNVML.
func (c *Collector) Counters(ctx context.Context) ([]discovery.NVLinkCounters, []discovery.GPUSample, []discovery.ItemError) {
	return nil, nil, noNVML()
}

// P2P reports ErrNoNVML.
func (c *Collector) P2P(ctx context.Context) ([]P2PPair, []discovery.ItemError) {
	return nil, noNVML()
}

func noNVML() []discovery.ItemError {
	return []discovery.ItemError{{Source: source, Item: "library", Err: ErrNoNVML}}
}
