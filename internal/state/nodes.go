package state

import (
	"bytes"
	"compress/flate"
	"fmt"
	"io"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
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
	head NodeHead
	inv  []byte // the inventory: deterministic wire form, deflated
	// dict is the preset dictionary inv was deflated with; nil: none.
	dict   *invDict
	rawLen int // length of the wire form
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

// hcasField is NodeInventory.hcas's field number (TestHCAsField checks it).
const hcasField = 7

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
//
// Inventories of one kind of node (system model, GPU model and count, HCA
// count) differ in little but serial numbers, UUIDs, GUIDs and addresses,
// so each is deflated against a preset dictionary: the wire form of the
// first inventory of its kind the codec saw (issue #16: a DGX H100
// inventory deflates to ~1.4 KB against it, ~3.2 KB alone; a GB200 tray's
// to ~0.7 KB, ~1.6 KB alone). At most maxDicts kinds get one (then
// inventories deflate alone); a dictionary is immutable and lives as long
// as the codec, so an entry can always be expanded.
//
// The flate writers and readers are pooled: each holds hundreds of KB of
// state that would otherwise be garbage per inventory.
type invCodec struct {
	writers sync.Pool // *flate.Writer without a dictionary
	readers sync.Pool // io.ReadCloser that is a flate.Resetter

	mu       sync.Mutex
	dicts    map[invKind]*invDict
	maxDicts int // 0: defaultMaxInvDicts
}

// invKind is what makes inventories alike enough to share a dictionary.
type invKind struct {
	systemModel, gpuModel string
	gpus, hcas            int
}

// invDict is one kind's preset dictionary.
type invDict struct {
	raw     []byte    // immutable: the tail (maxDictBytes) of a wire form
	writers sync.Pool // *flate.Writer made with raw
}

const (
	// defaultMaxInvDicts bounds the dictionaries (kinds of node) a codec
	// keeps: at most this many × maxDictBytes.
	defaultMaxInvDicts = 64
	// maxDictBytes is deflate's window: a longer dictionary is not used.
	maxDictBytes = 32 << 10
	// invCompression trades a little size for speed: registration is
	// CPU-bound. Level 2 is the fastest that uses a preset dictionary
	// (BestSpeed ignores it).
	invCompression = 2
)

// dictFor returns the dictionary of inventories of kind k, making raw (the
// wire form of one) the dictionary when the kind has none and there is
// room; nil when there is none.
func (c *invCodec) dictFor(k invKind, raw []byte) *invDict {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.dicts[k]; ok {
		return d
	}
	limit := c.maxDicts
	if limit == 0 {
		limit = defaultMaxInvDicts
	}
	if len(c.dicts) >= limit {
		return nil
	}
	if c.dicts == nil {
		c.dicts = map[invKind]*invDict{}
	}
	d := &invDict{raw: bytes.Clone(raw[max(0, len(raw)-maxDictBytes):])}
	c.dicts[k] = d
	return d
}

// entry builds the entry of rec (whose inventory is inv).
func (c *invCodec) entry(rec *statev1.NodeRecord, inv *ginv1.NodeInventory) (*nodeEntry, error) {
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(inv)
	if err != nil {
		return nil, fmt.Errorf("encode inventory of %q: %w", inv.GetNodeName(), err)
	}
	head := headOf(withoutInventory(rec), inv)
	d := c.dictFor(invKind{head.SystemModel, head.GPUModel, head.GPUs, len(inv.GetHcas())}, raw)
	pool, dict := &c.writers, []byte(nil)
	if d != nil {
		pool, dict = &d.writers, d.raw
	}
	var buf bytes.Buffer
	buf.Grow(len(raw)/4 + 64)
	w, _ := pool.Get().(*flate.Writer)
	if w == nil {
		if w, err = flate.NewWriterDict(&buf, invCompression, dict); err != nil {
			return nil, err
		}
	} else {
		w.Reset(&buf) // keeps the writer's dictionary
	}
	if _, err := w.Write(raw); err != nil {
		return nil, fmt.Errorf("compress inventory of %q: %w", inv.GetNodeName(), err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("compress inventory of %q: %w", inv.GetNodeName(), err)
	}
	pool.Put(w)
	return &nodeEntry{head: head, inv: bytes.Clone(buf.Bytes()), dict: d, rawLen: len(raw)}, nil
}

// raw appends e's inventory in wire form to dst.
func (c *invCodec) raw(dst []byte, e *nodeEntry) ([]byte, error) {
	var dict []byte
	if e.dict != nil {
		dict = e.dict.raw
	}
	r, _ := c.readers.Get().(io.ReadCloser)
	if r == nil {
		r = flate.NewReaderDict(bytes.NewReader(e.inv), dict)
	} else if err := r.(flate.Resetter).Reset(bytes.NewReader(e.inv), dict); err != nil {
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

// hcas decodes only the HCAs of e's inventory (new messages each call):
// a few KB instead of the whole inventory's tens.
func (c *invCodec) hcas(e *nodeEntry) ([]*ginv1.Hca, error) {
	raw, err := c.raw(nil, e)
	if err != nil {
		return nil, err
	}
	var out []*ginv1.Hca
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			return nil, fmt.Errorf("decode the stored inventory of %q: %w", e.head.Name, protowire.ParseError(n))
		}
		raw = raw[n:]
		if num != hcasField || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, raw); n < 0 {
				return nil, fmt.Errorf("decode the stored inventory of %q: %w", e.head.Name, protowire.ParseError(n))
			}
			raw = raw[n:]
			continue
		}
		b, n := protowire.ConsumeBytes(raw)
		if n < 0 {
			return nil, fmt.Errorf("decode the stored inventory of %q: %w", e.head.Name, protowire.ParseError(n))
		}
		raw = raw[n:]
		h := &ginv1.Hca{}
		if err := proto.Unmarshal(b, h); err != nil {
			return nil, fmt.Errorf("decode the stored inventory of %q: %w", e.head.Name, err)
		}
		out = append(out, h)
	}
	return out, nil
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
