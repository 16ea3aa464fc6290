package state

import (
	"bytes"
	"compress/flate"
	"fmt"
	"io"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/inventory"
)

// NodeHead is a node's record without its inventory, plus the few
// inventory fields the master reads on its hot paths (hellos, heartbeats,
// liveness checks, node lists, metrics): what the store answers without
// decoding the inventory, which it keeps compressed (issue #16: a decoded
// DGX H100 inventory is ~44 KB of Go objects, its wire form ~12.6 KB,
// compressed ~3 KB).
type NodeHead struct {
	// Record is the stored record with Inventory nil; never modified.
	Record      *statev1.NodeRecord
	Name        string
	Generation  uint64
	MachineID   string
	SystemModel string
	GPUs        int
	// GPU0Model is the model of the first GPU listed; GPUModel the first
	// model any GPU reports.
	GPU0Model, GPUModel string
	// ComputeEthernet: the compute ports are all Ethernet (RoCE), as
	// inventory.ComputeEthernet says.
	ComputeEthernet bool
}

// State is the node's liveness state.
func (h NodeHead) State() ginv1.NodeState { return h.Record.GetState() }

// nodeEntry is how the store keeps one node. Entries are immutable: an
// update stores a new entry (a state change shares the inventory bytes).
type nodeEntry struct {
	head   NodeHead
	inv    []byte // the inventory: deterministic wire form, deflated
	rawLen int    // length of the wire form
}

func headOf(rec *statev1.NodeRecord, inv *ginv1.NodeInventory) NodeHead {
	h := NodeHead{Record: rec, Name: inv.GetNodeName(), Generation: inv.GetGeneration(),
		MachineID: inv.GetHost().GetMachineId(), SystemModel: inv.GetHost().GetSystemModel(), GPUs: len(inv.GetGpus()),
		ComputeEthernet: inventory.ComputeEthernet(inv)}
	for i, g := range inv.GetGpus() {
		if i == 0 {
			h.GPU0Model = g.GetModel()
		}
		if h.GPUModel == "" {
			h.GPUModel = g.GetModel()
		}
	}
	return h
}

// inventoryField is NodeRecord.inventory's field number.
const inventoryField = 1

// withoutInventory is every field of rec but the inventory (unknown ones
// too), in a new record sharing rec's immutable values.
func withoutInventory(rec *statev1.NodeRecord) *statev1.NodeRecord {
	out := &statev1.NodeRecord{}
	dst := out.ProtoReflect()
	rec.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Number() != inventoryField {
			dst.Set(fd, v)
		}
		return true
	})
	dst.SetUnknown(rec.ProtoReflect().GetUnknown())
	return out
}

// invCodec compresses inventories for the store and expands them again.
// The flate writers and readers are pooled: each holds hundreds of KB of
// state that would otherwise be garbage per inventory.
type invCodec struct {
	writers sync.Pool // *flate.Writer
	readers sync.Pool // io.ReadCloser that is a flate.Resetter
}

// invCompression trades a little size for speed: registration is
// CPU-bound, and BestSpeed keeps a DGX H100 inventory at ~3.2 KB (default
// level: ~2.9 KB).
const invCompression = flate.BestSpeed

// entry builds the entry of rec (whose inventory is inv).
func (c *invCodec) entry(rec *statev1.NodeRecord, inv *ginv1.NodeInventory) (*nodeEntry, error) {
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(inv)
	if err != nil {
		return nil, fmt.Errorf("encode inventory of %q: %w", inv.GetNodeName(), err)
	}
	var buf bytes.Buffer
	buf.Grow(len(raw)/3 + 64)
	w, _ := c.writers.Get().(*flate.Writer)
	if w == nil {
		if w, err = flate.NewWriter(&buf, invCompression); err != nil {
			return nil, err
		}
	} else {
		w.Reset(&buf)
	}
	if _, err := w.Write(raw); err != nil {
		return nil, fmt.Errorf("compress inventory of %q: %w", inv.GetNodeName(), err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("compress inventory of %q: %w", inv.GetNodeName(), err)
	}
	c.writers.Put(w)
	return &nodeEntry{head: headOf(withoutInventory(rec), inv), inv: bytes.Clone(buf.Bytes()), rawLen: len(raw)}, nil
}

// raw appends e's inventory in wire form to dst.
func (c *invCodec) raw(dst []byte, e *nodeEntry) ([]byte, error) {
	r, _ := c.readers.Get().(io.ReadCloser)
	if r == nil {
		r = flate.NewReader(bytes.NewReader(e.inv))
	} else if err := r.(flate.Resetter).Reset(bytes.NewReader(e.inv), nil); err != nil {
		return dst, err
	}
	n := len(dst)
	dst = append(dst, make([]byte, e.rawLen)...)
	if _, err := io.ReadFull(r, dst[n:]); err != nil {
		return dst[:n], fmt.Errorf("expand the stored inventory of %q: %w", e.head.Name, err)
	}
	c.readers.Put(r)
	return dst, nil
}

// record is e's whole record, inventory decoded: a new message each call.
func (c *invCodec) record(e *nodeEntry) (*statev1.NodeRecord, error) {
	raw, err := c.raw(nil, e)
	if err != nil {
		return nil, err
	}
	inv := &ginv1.NodeInventory{}
	if err := proto.Unmarshal(raw, inv); err != nil {
		return nil, fmt.Errorf("decode the stored inventory of %q: %w", e.head.Name, err)
	}
	rec := withoutInventory(e.head.Record)
	rec.Inventory = inv
	return rec, nil
}
