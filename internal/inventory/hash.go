package inventory

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// ContentHash is the hex SHA-256 of the inventory's content: everything but
// the generation, the collection time and the order of GPUs and HCAs, which
// change without the hardware changing. Two inventories with equal hashes describe the same node state.
//
// The bytes hashed are the deterministic encoding of a copy of inv with
// those fields cleared and the GPUs and HCAs sorted. The copy is shallow:
// a new top-level message sharing inv's devices (sorted in slices of its
// own), so that hashing does not deep-copy the whole inventory, which it
// does not change (a master hashes every inventory it receives; issue #16).
func ContentHash(inv *ginv1.NodeInventory) (string, error) {
	c := &ginv1.NodeInventory{}
	cm := c.ProtoReflect()
	inv.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		cm.Set(fd, v)
		return true
	})
	cm.SetUnknown(inv.ProtoReflect().GetUnknown())
	c.Generation = 0
	c.CollectedAt = nil
	// GPUs and HCAs are sets: their order (which a delta may change) is not
	// content. Sorted in copies of the slices: inv's order stays.
	c.Gpus = slices.Clone(c.Gpus)
	c.Hcas = slices.Clone(c.Hcas)
	slices.SortStableFunc(c.Gpus, func(a, b *ginv1.Gpu) int { return cmp.Compare(a.GetUuid(), b.GetUuid()) })
	slices.SortStableFunc(c.Hcas, func(a, b *ginv1.Hca) int { return cmp.Compare(a.GetName(), b.GetName()) })
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("inventory: hash %q: %w", inv.GetNodeName(), err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
