package inventory

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// ContentHash is the hex SHA-256 of the inventory's content: everything but
// the generation and the collection time, which change without the hardware
// changing. Two inventories with equal hashes describe the same node state.
func ContentHash(inv *ginv1.NodeInventory) (string, error) {
	c := proto.CloneOf(inv)
	c.Generation = 0
	c.CollectedAt = nil
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("inventory: hash %q: %w", inv.GetNodeName(), err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
