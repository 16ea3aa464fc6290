package state

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

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

	mu          sync.RWMutex
	nodes       map[string]*statev1.NodeRecord
	fabric      *ginv1.FabricTopology
	fabricIndex uint64
	graph       *graph.Graph
	index       uint64
	// plans are the pinned job plans by job id; never modified once stored.
	plans map[string]*ginv1.Plan
	// servers are the masters' registered addresses, by server id.
	servers   map[string]*statev1.RegisterServer
	clusterID string
	// measurements are the calibration measurements by id.
	measurements map[string]*ginv1.Measurement

	watchers watchers
}

// New returns an empty store.
func New(log *slog.Logger) *Store {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g, _ := graph.Build(nil, nil)
	return &Store{log: log, nodes: map[string]*statev1.NodeRecord{}, graph: g, plans: map[string]*ginv1.Plan{}, measurements: map[string]*ginv1.Measurement{}}
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
	Fabric *ginv1.FabricTopology
	nodes  map[string]*statev1.NodeRecord
}

// View returns the current state. It copies only the node map.
func (s *Store) View() View {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := make(map[string]*statev1.NodeRecord, len(s.nodes))
	for k, v := range s.nodes {
		m[k] = v
	}
	return View{Index: s.index, Graph: s.graph, Fabric: s.fabric, nodes: m}
}

// Counts returns how many nodes are registered and how many plans are
// pinned, without copying anything (for the caps at the edge and metrics).
func (s *Store) Counts() (nodes, plans int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.nodes), len(s.plans)
}

// Node returns a node's record; callers must not modify it.
func (s *Store) Node(name string) (*statev1.NodeRecord, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.nodes[name]
	return r, ok
}

// Graph returns the current canonical graph (immutable).
func (s *Store) Graph() *graph.Graph {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.graph
}

// Node returns a node's record from the view.
func (v View) Node(name string) (*statev1.NodeRecord, bool) {
	r, ok := v.nodes[name]
	return r, ok
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
	if err != nil {
		return Result{Index: index, Generation: prev.GetInventory().GetGeneration()}, err
	}
	if dup, err := CheckInventory(prev, inv, hash); err != nil || dup {
		return Result{Index: index, Generation: prev.GetInventory().GetGeneration()}, err
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
	}
	if prev != nil {
		rec.State, rec.StateReason, rec.StateChangedAt = prev.GetState(), prev.GetStateReason(), prev.GetStateChangedAt()
	} else {
		rec.StateChangedAt = cmd.GetAt()
		rec.StateReason = "registered"
	}
	s.nodes[name] = rec
	s.graph = g
	s.watchers.publish(Event{Index: index, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_NODE_UPDATED, Node: name, At: eventTime(cmd.GetAt()),
		OldGeneration: prev.GetInventory().GetGeneration(), NewGeneration: inv.GetGeneration()})
	return Result{Index: index, Changed: true, Generation: inv.GetGeneration()}, nil
}

// canonicalInventory applies the inventory edge's one rule for device
// identities (inventory.Canonical) to an inventory the log or a snapshot
// holds: the master writes them canonical, but entries written before that
// rule hold identities as the agent's source wrote them. A rewritten
// inventory gets the content hash of what is stored, so that an agent
// (which hashes the canonical form) is found in sync.
func canonicalInventory(inv *ginv1.NodeInventory, hash string) (*ginv1.NodeInventory, string, error) {
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

// CheckInventory applies the rules for storing inv (with content hash
// hash) over prev, the node's current record (nil for a new node): the
// machine must be the same, the generation must not go back, and a held
// generation may only be re-sent with the same content, which is a
// duplicate (dup true: nothing to store). The FSM applies it in log order;
// the master applies it at the edge to refuse or answer without a write.
func CheckInventory(prev *statev1.NodeRecord, inv *ginv1.NodeInventory, hash string) (dup bool, err error) {
	if prev == nil {
		return false, nil
	}
	name, held := inv.GetNodeName(), prev.GetInventory().GetGeneration()
	if pm, nm := prev.GetInventory().GetHost().GetMachineId(), inv.GetHost().GetMachineId(); pm != "" && nm != "" && pm != nm {
		return false, fmt.Errorf("%w: node %q is machine %q, not %q", ErrIdentityConflict, name, pm, nm)
	}
	switch {
	case inv.GetGeneration() < held:
		return false, fmt.Errorf("%w: node %q holds generation %d, got %d", ErrStaleGeneration, name, held, inv.GetGeneration())
	case inv.GetGeneration() == held && prev.GetContentHash() == hash:
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
	prev, ok := s.nodes[cmd.GetNodeName()]
	if !ok {
		return Result{Index: index}, fmt.Errorf("%w: %q", ErrUnknownNode, cmd.GetNodeName())
	}
	if prev.GetState() == cmd.GetState() {
		return Result{Index: index, Generation: prev.GetInventory().GetGeneration()}, nil
	}
	rec := proto.CloneOf(prev)
	rec.Inventory = prev.Inventory // immutable; share it
	rec.State, rec.StateReason, rec.StateChangedAt, rec.UpdatedIndex = cmd.GetState(), cmd.GetReason(), cmd.GetAt(), index
	s.nodes[cmd.GetNodeName()] = rec
	s.watchers.publish(Event{Index: index, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_NODE_STATE, Node: cmd.GetNodeName(), At: eventTime(cmd.GetAt()),
		OldState: prev.GetState(), NewState: cmd.GetState(), Reason: cmd.GetReason()})
	return Result{Index: index, Changed: true, Generation: prev.GetInventory().GetGeneration()}, nil
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
	s.fabric, s.fabricIndex, s.graph = cmd.GetFabric(), index, g
	s.watchers.publish(Event{Index: index, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_FABRIC_IMPORTED, At: eventTime(cmd.GetFabric().GetScannedAt())})
	return Result{Index: index, Changed: true}, nil
}

func (s *Store) bump(index uint64) {
	if index > s.index {
		s.index = index
	}
}

// Snapshot returns the whole state as a snapshot message. Records are shared,
// not copied: they are immutable.
func (s *Store) Snapshot() *statev1.Snapshot {
	s.mu.RLock()
	defer s.mu.RUnlock()
	snap := &statev1.Snapshot{FormatVersion: SnapshotFormat, Fabric: s.fabric, FabricIndex: s.fabricIndex}
	jobs := make([]string, 0, len(s.plans))
	for j := range s.plans {
		jobs = append(jobs, j)
	}
	sort.Strings(jobs)
	for _, j := range jobs {
		snap.Plans = append(snap.Plans, s.plans[j])
	}
	snap.ClusterId = s.clusterID
	snap.Measurements = sortedMeasurements(s.measurements)
	ids := make([]string, 0, len(s.servers))
	for id := range s.servers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		snap.Servers = append(snap.Servers, s.servers[id])
	}
	names := make([]string, 0, len(s.nodes))
	for n := range s.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		snap.Nodes = append(snap.Nodes, s.nodes[n])
	}
	return snap
}

// Restore replaces the whole state with a snapshot taken at index.
func (s *Store) Restore(index uint64, snap *statev1.Snapshot) error {
	if snap.GetFormatVersion() != SnapshotFormat {
		return fmt.Errorf("snapshot format %d, this binary reads %d", snap.GetFormatVersion(), SnapshotFormat)
	}
	nodes := make(map[string]*statev1.NodeRecord, len(snap.GetNodes()))
	invs := make([]*ginv1.NodeInventory, 0, len(snap.GetNodes()))
	for i, r := range snap.GetNodes() {
		name := r.GetInventory().GetNodeName()
		if name == "" {
			return fmt.Errorf("snapshot node %d has no name", i)
		}
		if _, dup := nodes[name]; dup {
			return fmt.Errorf("snapshot lists node %q twice", name)
		}
		inv, hash, err := canonicalInventory(r.GetInventory(), r.GetContentHash())
		if err != nil {
			return fmt.Errorf("snapshot node %q: %w", name, err)
		}
		if inv != r.GetInventory() { // written before identities were canonical
			r = proto.CloneOf(r)
			r.Inventory, r.ContentHash = inv, hash
		}
		nodes[name] = r
		invs = append(invs, inv)
	}
	plans := make(map[string]*ginv1.Plan, len(snap.GetPlans()))
	for i, p := range snap.GetPlans() {
		if p.GetJobId() == "" {
			return fmt.Errorf("snapshot plan %d has no job id", i)
		}
		plans[p.GetJobId()] = p
	}
	measurements := make(map[string]*ginv1.Measurement, len(snap.GetMeasurements()))
	for i, m := range snap.GetMeasurements() {
		if err := CheckMeasurement(m); err != nil {
			return fmt.Errorf("snapshot measurement %d: %w", i, err)
		}
		measurements[m.GetId()] = m
	}
	servers := make(map[string]*statev1.RegisterServer, len(snap.GetServers()))
	for _, r := range snap.GetServers() {
		servers[r.GetServerId()] = r
	}
	g, err := graph.Build(nil, nil)
	if err != nil {
		return err
	}
	for _, inv := range invs {
		ng, err := g.WithNode(inv)
		if err != nil {
			s.log.Warn("snapshot inventory not added to the graph", "node", inv.GetNodeName(), "err", err)
			continue
		}
		g = ng
	}
	if f := snap.GetFabric(); f != nil {
		if g, err = g.WithFabric(f); err != nil {
			return fmt.Errorf("snapshot fabric: %w", err)
		}
	}
	s.mu.Lock()
	s.nodes, s.fabric, s.fabricIndex, s.graph, s.index, s.plans = nodes, snap.GetFabric(), snap.GetFabricIndex(), g, index, plans
	s.servers, s.clusterID, s.measurements = servers, snap.GetClusterId(), measurements
	s.mu.Unlock()
	s.watchers.restored(index)
	s.watchers.publish(Event{Index: index, Kind: ginv1.WatchEventKind_WATCH_EVENT_KIND_FABRIC_IMPORTED, At: time.Now()})
	return nil
}
