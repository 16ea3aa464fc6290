package inventory

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// ContentHash is the hex SHA-256 of the inventory's content: everything but
// the generation, the collection time and the order of GPUs and HCAs, which
// change without the hardware changing. Two inventories with equal hashes describe the same node state.
func ContentHash(inv *ginv1.NodeInventory) (string, error) {
	c := proto.CloneOf(inv)
	c.Generation = 0
	c.CollectedAt = nil
	// GPUs and HCAs are sets: their order (which a delta may change) is not content.
	slices.SortStableFunc(c.Gpus, func(a, b *ginv1.Gpu) int { return cmp.Compare(a.GetUuid(), b.GetUuid()) })
	slices.SortStableFunc(c.Hcas, func(a, b *ginv1.Hca) int { return cmp.Compare(a.GetName(), b.GetName()) })
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("inventory: hash %q: %w", inv.GetNodeName(), err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
