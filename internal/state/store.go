package state

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/graph"
	"github.com/gin-topology/gin/internal/inventory"
)

// SnapshotFormat is the layout version written into snapshots.
const SnapshotFormat = 1

// Errors returned by the apply functions. They are deterministic: every
// replica returns the same error for the same entry.
var (
	ErrStaleGeneration  = errors.New("stale generation")
	ErrGenerationReused = errors.New("generation reused with different content")
	ErrIdentityConflict = errors.New("node name registered to another machine")
	ErrUnknownNode      = errors.New("unknown node")
)

// Result is what applying one command did.
type Result struct {
	Index   uint64
	Changed bool
	// Generation held for the node after the command (PutInventory).
	Generation uint64
}

// Store holds the replicated state.
type Store struct {
	log *slog.Logger

	codec *invCodec

	mu          sync.RWMutex
	nodes       map[string]*nodeEntry
	fabric      *fabricBlob // nil: none imported
	fabricIndex uint64
	graph       *graph.Graph
	index       uint64
	// plans are the pinned job plans by job id; never modified once stored.
	plans map[string]*ginv1.Plan
	// plansOnNode counts, per node name, the pinned plans whose nodes
	// include it (PlansOnNode): kept with plans, rebuilt on restore.
	plansOnNode map[string]int
	// servers are the masters' registered addresses, by server id.
	servers   map[string]*statev1.RegisterServer
	clusterID string
	// admissions are the masters an admin admitted to join that have not
	// registered yet, by server id (admission.go).
	admissions map[string]*statev1.AdmitServer
	// measurements are the calibration measurements by id.
	measurements map[string]*ginv1.Measurement
	// denied is the certificate deny list by serial; onDeny are told when
	// it grows.
	denied map[string]*ginv1.DeniedCertificate
	onDeny []func()

	watchers watchers
}

// New returns an empty store.
func New(log *slog.Logger) *Store {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g, _ := graph.Build(nil, nil)
	return &Store{log: log, codec: &invCodec{}, nodes: map[string]*nodeEntry{}, graph: g, plans: map[string]*ginv1.Plan{}, plansOnNode: map[string]int{}, measurements: map[string]*ginv1.Measurement{},
		denied: map[string]*ginv1.DeniedCertificate{}}
}

// Index is the Raft index of the last applied entry.
func (s *Store) Index() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.index
}

// SetIndex records that the entry at index was applied (for entries that do
// not change the state, so reads still report the true applied index).
func (s *Store) SetIndex(index uint64) {
	s.mu.Lock()
	if index > s.index {
		s.index = index
	}
	s.mu.Unlock()
}

// View is a consistent, immutable view of the state at one index.
type View struct {
	Index  uint64
	Graph  *graph.Graph
	fabric *fabricBlob
	nodes  map[string]*nodeEntry
	codec  *invCodec
	log    *slog.Logger
}

// View returns the current state. It copies only the node map.
func (s *Store) View() View {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := make(map[string]*nodeEntry, len(s.nodes))
	for k, v := range s.nodes {
		m[k] = v
	}
	return View{Index: s.index, Graph: s.graph, fabric: s.fabric, nodes: m, codec: s.codec, log: s.log}
}

// Fabric returns the imported fabric scan (nil when none), decoded for
// this call: a new message each time.
func (v View) Fabric() *ginv1.FabricTopology {
	f, err := v.fabric.unpack()
	if err != nil {
		// The store wrote these bytes: a bug, logged rather than crash a reader.
		v.log.Error("stored fabric unreadable", "err", err)
		return nil
	}
	return f
}

// Counts returns how many nodes are registered and how many plans are
// pinned, without copying anything (for the caps at the edge and metrics).
func (s *Store) Counts() (nodes, plans int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.nodes), len(s.plans)
}

// Node returns a node's record with its inventory, decoded for this call
// (tens of microseconds and ~44 KB for a DGX H100): paths that need only
// the state, generation, machine or models use Head.
func (s *Store) Node(name string) (*statev1.NodeRecord, bool) {
	s.mu.RLock()
	e, ok := s.nodes[name]
	s.mu.RUnlock()
	if !ok {
		return nil, false
	}
	return decodeEntry(s.codec, s.log, e), true
}

// Head returns a node's record without its inventory and the inventory
// fields read often, without decoding anything.
func (s *Store) Head(name string) (NodeHead, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.nodes[name]
	if !ok {
		return NodeHead{}, false
	}
	return e.head, true
}

// decodeEntry is e's whole record. The store wrote the bytes it decodes,
// so an error is a bug (or memory corruption): it is logged and the
// record returned without its inventory rather than crash a reader.
func decodeEntry(c *invCodec, log *slog.Logger, e *nodeEntry) *statev1.NodeRecord {
	rec, err := c.record(e)
	if err != nil {
		log.Error("stored inventory unreadable", "node", e.head.Name, "err", err)
		return withoutInventory(e.head.Record)
	}
	return rec
}

// Graph returns the current canonical graph (immutable).
func (s *Store) Graph() *graph.Graph {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.graph
}

// Node returns a node's record from the view, its inventory decoded for
// this call (see Store.Node; Head for what needs no inventory).
func (v View) Node(name string) (*statev1.NodeRecord, bool) {
	e, ok := v.nodes[name]
	if !ok {
		return nil, false
	}
	return decodeEntry(v.codec, v.log, e), true
}

// HCAs returns a node's HCAs from the view, decoding only them from the
// stored inventory (new messages each call): for callers that walk every
// node's HCAs (the admin port coverage), ~2 KB per DGX H100 node instead of
// the ~44 KB of a whole inventory.
func (v View) HCAs(name string) ([]*ginv1.Hca, bool) {
	e, ok := v.nodes[name]
	if !ok {
		return nil, false
	}
	hs, err := v.codec.hcas(e)
	if err != nil {
		v.log.Error("stored inventory unreadable", "node", name, "err", err)
		return nil, true
	}
	return hs, true
}

// Head returns a node's head from the view (see Store.Head).
func (v View) Head(name string) (NodeHead, bool) {
	e, ok := v.nodes[name]
	if !ok {
		return NodeHead{}, false
	}
	return e.head, true
}

// NodeNames returns the names of all nodes, sorted.
func (v View) NodeNames() []string {
	names := make([]string, 0, len(v.nodes))
	for n := range v.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Len is the number of nodes.
func (v View) Len() int { return len(v.nodes) }

// PutInventory stores a node's inventory (see statev1.PutInventory).
func (s *Store) PutInventory(index uint64, cmd *statev1.PutInventory) (Result, error) {
	inv, hash, err := canonicalInventory(cmd.GetInventory(), cmd.GetContentHash())
	name := inv.GetNodeName()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bump(index)
	prev := s.nodes[name]
	var prevHead *NodeHead
	if prev != nil {
		prevHead = &prev.head
	}
	if err != nil {
		return Result{Index: index, Generation: prevHead.generation()}, err
	}
	if err := CheckBinding(name, prevHead.binding(), cmd.GetBinding()); err != nil {
		return Result{Index: index, Generation: prevHead.generation()}, err
	}
	if dup, err := checkInventory(prevHead, inv, hash); err != nil || dup {
		return Result{Index: index, Generation: prevHead.generation()}, err
	}
	g, err := s.graph.WithNode(inv)
	if err != nil {
		// The master checks this before proposing; an entry that still fails
		// (written by another version) keeps the node out of the graph.
		s.log.Warn("inventory not added to the graph", "node", name, "index", index, "err", err)
		g = s.graph.WithoutNode(name)
	}
	rec := &statev1.NodeRecord{
		Inventory:    inv,
		ContentHash:  hash,
		State:        ginv1.NodeState_NODE_STATE_UP,
		UpdatedIndex: index,
		Binding:      prevHead.binding(),
	}
	if rec.Binding.GetIdentity() == "" && cmd.GetBinding().GetIdentity() != "" {
		rec.Binding = cmd.GetBinding() // the first registration over TLS binds the name
	}
	if prev != nil {
		p := prev.head.Record
		rec.State, rec.StateReason, rec.StateChangedAt = p.GetState(), p.GetStateReason(), p.GetStateChangedAt()
	} else {
		rec.StateChangedAt = cmd.GetAt()
		rec.StateReason = "registered"
	}
	e, err := s.codec.entry(rec, inv)
	if err != nil {
		// Marshalling an inventory that was just unmarshalled cannot fail;
		// if it did, every replica fails alike and keeps the old record.
		return Result{Index: index, Generation: prevHead.generation()}, err
	}
	s.nodes[name] = e
	s.graph = g
	s.watchers.publish(Event{Index: index, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_NODE_UPDATED, Node: name, At: eventTime(cmd.GetAt()),
		OldGeneration: prevHead.generation(), NewGeneration: inv.GetGeneration()})
	return Result{Index: index, Changed: true, Generation: inv.GetGeneration()}, nil
}

// canonicalInventory applies the inventory edge's one rule for device
// identities (inventory.Canonical) to an inventory the log or a snapshot
// holds: the master writes them canonical, but entries written before that
// rule hold identities as the agent's source wrote them. A rewritten
// inventory gets the content hash of what is stored, so that an agent
// (which hashes the canonical form) is found in sync.
//
// It first checks hash against the inventory as stored (the content hash
// the master computed at the edge, before the entry was written): a
// mismatch is an entry or snapshot changed after it was written (a byte
// changed on disk), ErrContentHashMismatch; nothing is stored from it.
func canonicalInventory(inv *ginv1.NodeInventory, hash string) (*ginv1.NodeInventory, string, error) {
	if err := verifyContentHash(inv, hash); err != nil {
		return inv, hash, err
	}
	c, changed := inventory.Canonical(inv)
	if !changed {
		return inv, hash, nil
	}
	h, err := inventory.ContentHash(c)
	if err != nil {
		return inv, hash, fmt.Errorf("canonical device identities: %w", err)
	}
	return c, h, nil
}

// CheckHead applies the rules for storing inv (with content hash hash)
// over prev, the head of the node's current record: the machine must be
// the same, the generation must not go back, and a held generation may
// only be re-sent with the same content, which is a duplicate (dup true:
// nothing to store). The FSM applies them in log order; the master applies
// them at the edge to refuse or answer without a write.
func CheckHead(prev NodeHead, inv *ginv1.NodeInventory, hash string) (dup bool, err error) {
	return checkInventory(&prev, inv, hash)
}

// checkInventory is CheckHead; prev nil is a new node.
func checkInventory(prev *NodeHead, inv *ginv1.NodeInventory, hash string) (dup bool, err error) {
	if prev == nil {
		return false, nil
	}
	name, held := inv.GetNodeName(), prev.Generation
	if pm, nm := prev.MachineID, inv.GetHost().GetMachineId(); pm != "" && nm != "" && pm != nm {
		// The held id is not told (it reaches the agent that sent inv).
		return false, fmt.Errorf("%w: node %q is another machine, not %q", ErrIdentityConflict, name, nm)
	}
	switch {
	case inv.GetGeneration() < held:
		return false, fmt.Errorf("%w: node %q holds generation %d, got %d", ErrStaleGeneration, name, held, inv.GetGeneration())
	case inv.GetGeneration() == held && prev.Record.GetContentHash() == hash:
		return true, nil
	case inv.GetGeneration() == held:
		return false, fmt.Errorf("%w: node %q generation %d", ErrGenerationReused, name, held)
	}
	return false, nil
}

// SetNodeState changes a node's liveness state; a no-op when unchanged.
func (s *Store) SetNodeState(index uint64, cmd *statev1.SetNodeState) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bump(index)
	return s.setNodeState(index, cmd)
}

// SetNodeStates applies many SetNodeState in one entry, in order, each
// exactly as SetNodeState does at the same index. A change naming a node
// the state does not hold (deleted since the leader queued it) is skipped
// and does not stop the others: the entry is applied, and its error, which
// wraps ErrUnknownNode, names the skipped nodes. Changed: any change did.
func (s *Store) SetNodeStates(index uint64, cmd *statev1.SetNodeStates) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bump(index)
	res := Result{Index: index}
	var unknown []string
	for _, c := range cmd.GetChanges() {
		r, err := s.setNodeState(index, c)
		if err != nil {
			unknown = append(unknown, c.GetNodeName())
			continue
		}
		res.Changed = res.Changed || r.Changed
	}
	if len(unknown) == 0 {
		return res, nil
	}
	const named = 8
	list := fmt.Sprintf("%q", unknown[:min(len(unknown), named)])
	if len(unknown) > named {
		list += fmt.Sprintf(" and %d more", len(unknown)-named)
	}
	return res, fmt.Errorf("%w: %d of %d changes skipped: %s", ErrUnknownNode, len(unknown), len(cmd.GetChanges()), list)
}

// setNodeState is SetNodeState once s.mu is held and the index bumped.
func (s *Store) setNodeState(index uint64, cmd *statev1.SetNodeState) (Result, error) {
	prev, ok := s.nodes[cmd.GetNodeName()]
	if !ok {
		return Result{Index: index}, fmt.Errorf("%w: %q", ErrUnknownNode, cmd.GetNodeName())
	}
	if prev.head.State() == cmd.GetState() {
		return Result{Index: index, Generation: prev.head.Generation}, nil
	}
	rec := withoutInventory(prev.head.Record)
	rec.State, rec.StateReason, rec.StateChangedAt, rec.UpdatedIndex = cmd.GetState(), cmd.GetReason(), cmd.GetAt(), index
	e := *prev // the inventory bytes are immutable; share them
	e.head.Record = rec
	s.nodes[cmd.GetNodeName()] = &e
	s.watchers.publish(Event{Index: index, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_NODE_STATE, Node: cmd.GetNodeName(), At: eventTime(cmd.GetAt()),
		OldState: prev.head.State(), NewState: cmd.GetState(), Reason: cmd.GetReason()})
	return Result{Index: index, Changed: true, Generation: prev.head.Generation}, nil
}

// binding is the node's certificate binding, nil for no node (or none).
func (h *NodeHead) binding() *statev1.NodeBinding {
	if h == nil {
		return nil
	}
	return h.Record.GetBinding()
}

// generation is the held generation, 0 for no node.
func (h *NodeHead) generation() uint64 {
	if h == nil {
		return 0
	}
	return h.Generation
}

// ImportFabric replaces the fabric topology.
func (s *Store) ImportFabric(index uint64, cmd *statev1.ImportFabric) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bump(index)
	g, err := s.graph.WithFabric(cmd.GetFabric())
	if err != nil {
		return Result{Index: index}, fmt.Errorf("fabric import: %w", err)
	}
	fb, err := packFabric(cmd.GetFabric())
	if err != nil {
		// Marshalling a fabric that was just unmarshalled cannot fail; if
		// it did, every replica fails alike and keeps the old fabric.
		return Result{Index: index}, fmt.Errorf("fabric import: %w", err)
	}
	s.fabric, s.fabricIndex, s.graph = fb, index, g
	s.watchers.publish(Event{Index: index, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_FABRIC_IMPORTED, At: eventTime(cmd.GetFabric().GetScannedAt())})
	return Result{Index: index, Changed: true}, nil
}

func (s *Store) bump(index uint64) {
	if index > s.index {
		s.index = index
	}
}
