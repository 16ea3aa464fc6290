package state

import (
	"errors"
	"fmt"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/inventory"
)

// ErrContentHashMismatch: an inventory's content no longer has the
// content hash written with it (the log entry or snapshot was changed on
// disk after it was written). The state is not to be served.
var ErrContentHashMismatch = errors.New("inventory content does not match its content hash")

// verifyContentHash checks that inv hashes to hash. Only a well-formed
// content hash (64 lower-case hex digits, what inventory.ContentHash
// writes and the master stores with every inventory it commits) is
// checked: an entry whose hash is not one was not written by a master
// (hand-made state in tests); a corrupted hash field alone changes no
// content that is served.
func verifyContentHash(inv *ginv1.NodeInventory, hash string) error {
	if !wellFormedHash(hash) {
		return nil
	}
	got, err := inventory.ContentHash(inv)
	if err != nil {
		return fmt.Errorf("node %q: hash its inventory: %w", inv.GetNodeName(), err)
	}
	if got != hash {
		return fmt.Errorf("%w: node %q hashes to %s, the entry says %s", ErrContentHashMismatch, inv.GetNodeName(), got, hash)
	}
	return nil
}

func wellFormedHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for i := range len(h) {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
