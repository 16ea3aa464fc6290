package sim

import (
	"context"
	"errors"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// PLACEHOLDER: the real implementation replaces this file.

// NodeOptions places one simulated node in its simulated cluster.
type NodeOptions struct {
	// NodeName is the node's name; identities (UUIDs, GUIDs, serials) derive from it.
	NodeName string
	// Index is the node's position in the cluster (0-based): it picks the
	// MNNVL rack (clique) of rack-scale profiles.
	Index int
	// Cluster seeds every derived identity, so two clusters never collide.
	Cluster string
	// Neighbors are the leaf-switch ports the node's HCA ports are cabled to
	// (from Fabric.Neighbors); nil when no fabric is simulated.
	Neighbors []*ginv1.FabricNeighbor
}

// Source is a simulated node.
type Source struct{ name string }

// NewSource returns the simulated node for a profile.
func NewSource(profile string, opts NodeOptions) (*Source, error) {
	return nil, errors.New("sim: not implemented yet")
}

// Profiles lists the profile names.
func Profiles() []string { return nil }

// Name implements discovery.Source.
func (s *Source) Name() string { return s.name }

// Collect implements discovery.Source.
func (s *Source) Collect(ctx context.Context) (*ginv1.NodeInventory, error) {
	return nil, errors.New("sim: not implemented yet")
}
