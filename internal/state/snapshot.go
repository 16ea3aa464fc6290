package state

import (
	"fmt"
	"sort"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/graph"
)

// Snapshot field numbers the encoder writes itself (gin.state.v1.Snapshot).
const (
	snapshotNodesField = 2
)

// Capture is the state at one moment, for a Raft snapshot: immutable
// entries, encoded later (off the FSM goroutine) by Encode. Taking it
// copies only pointers.
type Capture struct {
	meta    *statev1.Snapshot // all but the nodes, the fabric and the format version
	fabric  *fabricBlob
	entries []*nodeEntry // sorted by name
	codec   *invCodec
}

// Capture returns the current state for a snapshot.
func (s *Store) Capture() *Capture {
	s.mu.RLock()
	defer s.mu.RUnlock()
	meta := &statev1.Snapshot{FabricIndex: s.fabricIndex, ClusterId: s.clusterID,
		Measurements: sortedMeasurements(s.measurements), DeniedCertificates: sortedDenied(s.denied)}
	meta.Plans = byKey(s.plans)
	meta.Servers = byKey(s.servers)
	meta.Admissions = byKey(s.admissions)
	entries := byKey(s.nodes)
	return &Capture{meta: meta, fabric: s.fabric, entries: entries, codec: s.codec}
}

// fullMeta is the captured meta with the fabric decoded: a new message
// sharing meta's immutable values.
func (c *Capture) fullMeta() (*statev1.Snapshot, error) {
	f, err := c.fabric.unpack()
	if err != nil {
		return nil, err
	}
	out := &statev1.Snapshot{}
	dst := out.ProtoReflect()
	c.meta.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		dst.Set(fd, v)
		return true
	})
	out.Fabric = f
	return out, nil
}

// byKey is m's values in the order of their keys.
func byKey[V any](m map[string]V) []V {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]V, 0, len(m))
	for _, k := range keys {
		out = append(out, m[k])
	}
	return out
}

// Encode yields the snapshot as a gin.state.v1.Snapshot in deterministic
// wire form, in pieces: the same bytes proto.MarshalOptions{Deterministic:
// true} writes for the whole message (format version, nodes by name, then
// the rest in field order), without ever holding more than one node's
// record expanded. A piece is valid only until yield returns. Encode may
// be called more than once and yields the same bytes each time.
func (c *Capture) Encode(yield func(piece []byte) error) error {
	det := proto.MarshalOptions{Deterministic: true}
	head, err := det.Marshal(&statev1.Snapshot{FormatVersion: SnapshotFormat})
	if err != nil {
		return fmt.Errorf("encode snapshot header: %w", err)
	}
	if err := yield(head); err != nil {
		return err
	}
	var raw, rest, buf []byte
	for _, e := range c.entries {
		if raw, err = c.codec.raw(raw[:0], e); err != nil {
			return err
		}
		if rest, err = det.MarshalAppend(rest[:0], e.head.Record); err != nil {
			return fmt.Errorf("encode the record of %q: %w", e.head.Name, err)
		}
		inner := protowire.SizeTag(inventoryField) + protowire.SizeBytes(len(raw)) + len(rest)
		buf = protowire.AppendTag(buf[:0], snapshotNodesField, protowire.BytesType)
		buf = protowire.AppendVarint(buf, uint64(inner))
		buf = protowire.AppendTag(buf, inventoryField, protowire.BytesType)
		buf = protowire.AppendVarint(buf, uint64(len(raw)))
		buf = append(buf, raw...)
		buf = append(buf, rest...)
		if err := yield(buf); err != nil {
			return err
		}
	}
	meta, err := c.fullMeta()
	if err != nil {
		return err
	}
	tail, err := det.Marshal(meta)
	if err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	return yield(tail)
}

// Len is the number of nodes captured.
func (c *Capture) Len() int { return len(c.entries) }

// Snapshot returns the whole state as one snapshot message, every
// inventory decoded: for tests and small states (a Raft snapshot is
// written from Capture, which holds one node expanded at a time).
func (s *Store) Snapshot() *statev1.Snapshot {
	c := s.Capture()
	snap := proto.CloneOf(c.meta)
	if f, err := c.fabric.unpack(); err != nil {
		s.log.Error("stored fabric unreadable", "err", err)
	} else {
		snap.Fabric = f
	}
	snap.FormatVersion = SnapshotFormat
	for _, e := range c.entries {
		snap.Nodes = append(snap.Nodes, decodeEntry(c.codec, s.log, e))
	}
	return snap
}

// Restorer rebuilds a store's state from a snapshot read one node at a
// time (internal/raft streams them), so that restoring never holds every
// inventory decoded at once. Nothing changes in the store until Finish
// succeeds.
type Restorer struct {
	s     *Store
	nodes map[string]*nodeEntry
	g     *graph.Graph
}

// Restorer starts a restore of s.
func (s *Store) Restorer() *Restorer {
	g, _ := graph.Build(nil, nil)
	return &Restorer{s: s, nodes: map[string]*nodeEntry{}, g: g}
}

// AddNode adds one node record of the snapshot. Records written before
// device identities were canonical are stored canonical (rec itself is
// not modified).
func (r *Restorer) AddNode(rec *statev1.NodeRecord) error {
	name := rec.GetInventory().GetNodeName()
	if name == "" {
		return fmt.Errorf("snapshot node %d has no name", len(r.nodes))
	}
	if _, dup := r.nodes[name]; dup {
		return fmt.Errorf("snapshot lists node %q twice", name)
	}
	inv, hash, err := canonicalInventory(rec.GetInventory(), rec.GetContentHash())
	if err != nil {
		return fmt.Errorf("snapshot node %q: %w", name, err)
	}
	stored := withoutInventory(rec)
	stored.ContentHash = hash
	e, err := r.s.codec.entry(stored, inv)
	if err != nil {
		return fmt.Errorf("snapshot node %q: %w", name, err)
	}
	r.nodes[name] = e
	g, err := r.g.WithNode(inv)
	if err != nil {
		r.s.log.Warn("snapshot inventory not added to the graph", "node", name, "err", err)
		return nil
	}
	r.g = g
	return nil
}

// Finish checks the rest of the snapshot (meta's nodes are ignored: they
// came through AddNode) and replaces the store's state with it, taken at
// index.
func (r *Restorer) Finish(index uint64, meta *statev1.Snapshot) error {
	s := r.s
	if meta.GetFormatVersion() != SnapshotFormat {
		return fmt.Errorf("snapshot format %d, this binary reads %d", meta.GetFormatVersion(), SnapshotFormat)
	}
	plans := make(map[string]*ginv1.Plan, len(meta.GetPlans()))
	for i, p := range meta.GetPlans() {
		if p.GetJobId() == "" {
			return fmt.Errorf("snapshot plan %d has no job id", i)
		}
		plans[p.GetJobId()] = p
	}
	measurements := make(map[string]*ginv1.Measurement, len(meta.GetMeasurements()))
	for i, m := range meta.GetMeasurements() {
		if err := CheckMeasurement(m); err != nil {
			return fmt.Errorf("snapshot measurement %d: %w", i, err)
		}
		measurements[m.GetId()] = m
	}
	denied, err := restoreDenied(meta.GetDeniedCertificates())
	if err != nil {
		return err
	}
	servers := make(map[string]*statev1.RegisterServer, len(meta.GetServers()))
	for _, sv := range meta.GetServers() {
		servers[sv.GetServerId()] = sv
	}
	if len(meta.GetAdmissions()) > MaxAdmissions {
		return fmt.Errorf("snapshot holds %d admissions, at most %d", len(meta.GetAdmissions()), MaxAdmissions)
	}
	admissions := make(map[string]*statev1.AdmitServer, len(meta.GetAdmissions()))
	for _, a := range meta.GetAdmissions() {
		admissions[a.GetServerId()] = a
	}
	g := r.g
	if f := meta.GetFabric(); f != nil {
		if g, err = g.WithFabric(f); err != nil {
			return fmt.Errorf("snapshot fabric: %w", err)
		}
	}
	fb, err := packFabric(meta.GetFabric())
	if err != nil {
		return fmt.Errorf("snapshot fabric: %w", err)
	}
	s.mu.Lock()
	s.nodes, s.fabric, s.fabricIndex, s.graph, s.index, s.plans = r.nodes, fb, meta.GetFabricIndex(), g, index, plans
	s.plansOnNode = map[string]int{}
	for _, p := range plans {
		countPlanNodes(s.plansOnNode, p, 1)
	}
	s.servers, s.clusterID, s.measurements, s.denied = servers, meta.GetClusterId(), measurements, denied
	s.admissions = admissions
	hooks := s.onDeny
	s.mu.Unlock()
	if len(denied) > 0 {
		for _, fn := range hooks {
			fn()
		}
	}
	s.watchers.restored(index)
	s.watchers.publish(Event{Index: index, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_FABRIC_IMPORTED, At: time.Now()})
	return nil
}

// Restore replaces the whole state with a snapshot taken at index (every
// node in memory at once: internal/raft streams them through Restorer).
func (s *Store) Restore(index uint64, snap *statev1.Snapshot) error {
	if snap.GetFormatVersion() != SnapshotFormat {
		return fmt.Errorf("snapshot format %d, this binary reads %d", snap.GetFormatVersion(), SnapshotFormat)
	}
	r := s.Restorer()
	for _, rec := range snap.GetNodes() {
		if err := r.AddNode(rec); err != nil {
			return err
		}
	}
	return r.Finish(index, snap)
}
