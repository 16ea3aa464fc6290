package master

import (
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
)

// What one node's inventory may cost the cluster (issue #21: one agent
// certificate committed 2.1 MB inventories at 10 MB/s, every byte on every
// master's log and disk).
const (
	// MaxInventoryBytes bounds one node's inventory, encoded: the largest
	// real one (a DGX H100, 12 KB; docs/SECURITY.md) twenty times over.
	MaxInventoryBytes = 256 << 10
	// InventoryChangesPerMinute bounds the inventory changes one node
	// commits (a duplicate is no change), as a bucket of this many refilled
	// at this rate: far above what link flaps and health changes send,
	// and with MaxInventoryBytes at most 7.5 MiB a minute from one agent
	// certificate.
	InventoryChangesPerMinute = 30
)

// inventoryBounds holds each node's change bucket on the leader (a new
// leader starts every node full). Its zero value is ready; now is the
// clock (time.Now when nil).
type inventoryBounds struct {
	now func() time.Time

	mu        sync.Mutex
	buckets   map[string]changeBucket
	lastPrune time.Time
}

// changeBucket is one node's tokens at last.
type changeBucket struct {
	tokens float64
	last   time.Time
}

// checkSize refuses an inventory over MaxInventoryBytes.
func checkInventorySize(inv *ginv1.NodeInventory) error {
	if n := proto.Size(inv); n > MaxInventoryBytes {
		return exhaustedf(apierr.ReasonInventoryTooLarge, "inventory of node %q: %d bytes encoded, more than the %d one node's inventory may hold",
			inv.GetNodeName(), n, MaxInventoryBytes)
	}
	return nil
}

// admitChange takes one of node's changes, or refuses naming the bound and
// when the next one is due.
func (b *inventoryBounds) admitChange(node string) error {
	now := time.Now()
	if b.now != nil {
		now = b.now()
	}
	const perSecond = float64(InventoryChangesPerMinute) / 60
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buckets == nil {
		b.buckets = map[string]changeBucket{}
	}
	c, ok := b.buckets[node]
	if !ok {
		c = changeBucket{tokens: InventoryChangesPerMinute, last: now}
	}
	c.tokens = min(InventoryChangesPerMinute, c.tokens+now.Sub(c.last).Seconds()*perSecond)
	c.last = now
	if c.tokens < 1 {
		b.buckets[node] = c
		wait := time.Duration((1 - c.tokens) / perSecond * float64(time.Second)).Round(time.Millisecond)
		return exhaustedf(apierr.ReasonInventoryRate, "inventory of node %q: more than %d changes in a minute, the most one node may commit; the next is accepted in %s",
			node, InventoryChangesPerMinute, wait)
	}
	c.tokens--
	b.buckets[node] = c
	b.pruneLocked(now)
	return nil
}

// pruneLocked forgets buckets that have refilled (a full bucket is what a
// node without one gets), so the map holds only nodes changing now.
// It runs at most once a minute.
func (b *inventoryBounds) pruneLocked(now time.Time) {
	if now.Sub(b.lastPrune) < time.Minute {
		return
	}
	b.lastPrune = now
	for node, c := range b.buckets {
		if now.Sub(c.last) >= time.Minute {
			delete(b.buckets, node)
		}
	}
}
