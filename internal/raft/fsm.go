package raft

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"

	hraft "github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	"github.com/gin-topology/gin/internal/state"
)

// ErrUnknownCommand is the result of an entry this binary cannot interpret.
var ErrUnknownCommand = errors.New("unknown command type (written by a newer version?)")

// ApplyResponse is what FSM.Apply returns for each entry (the future's
// Response()).
type ApplyResponse struct {
	Result state.Result
	Err    error
}

// FSM applies log entries to a state.Store.
type FSM struct {
	store *state.Store
	log   *slog.Logger
	// skipped counts committed entries this binary could not apply (a
	// command type from a newer version, or bytes that are no command):
	// from the first one on, this replica's state lacks something the
	// others have.
	skipped atomic.Uint64
	// corrupt is the first entry whose inventory failed its content hash
	// (integrity.go).
	corrupt corruption
	// conf is the latest committed Raft configuration (membership.go).
	conf configRecord
}

// Skipped is how many committed entries this FSM could not apply.
func (f *FSM) Skipped() uint64 { return f.skipped.Load() }

// NewFSM returns an FSM writing to store.
func NewFSM(store *state.Store, log *slog.Logger) *FSM {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &FSM{store: store, log: log}
}

var _ hraft.FSM = (*FSM)(nil)

// Apply implements raft.FSM.
func (f *FSM) Apply(l *hraft.Log) any {
	if l.Type != hraft.LogCommand {
		f.store.SetIndex(l.Index)
		return nil
	}
	cmd := &statev1.Command{}
	if err := proto.Unmarshal(l.Data, cmd); err != nil {
		f.store.SetIndex(l.Index)
		f.skipped.Add(1)
		f.log.Error("raft entry is not a command; skipped", "index", l.Index, "err", err)
		return &ApplyResponse{Result: state.Result{Index: l.Index}, Err: fmt.Errorf("entry %d: %w", l.Index, err)}
	}
	res, err := f.applyCommand(l.Index, cmd)
	if errors.Is(err, state.ErrContentHashMismatch) {
		// Nothing of the entry was stored; this replica now lacks it.
		if f.corrupt.mark(l.Index, err) {
			f.log.Error("a committed Raft entry does not match its content hash (changed on disk): this master stops serving", "index", l.Index, "err", err)
		}
	}
	return &ApplyResponse{Result: res, Err: err}
}

func (f *FSM) applyCommand(index uint64, cmd *statev1.Command) (state.Result, error) {
	switch c := cmd.GetCommand().(type) {
	case *statev1.Command_PutInventory:
		return f.store.PutInventory(index, c.PutInventory)
	case *statev1.Command_SetNodeState:
		return f.store.SetNodeState(index, c.SetNodeState)
	case *statev1.Command_SetNodeStates:
		return f.store.SetNodeStates(index, c.SetNodeStates)
	case *statev1.Command_ImportFabric:
		return f.store.ImportFabric(index, c.ImportFabric)
	case *statev1.Command_PutPlan:
		return f.store.PutPlan(index, c.PutPlan)
	case *statev1.Command_DeletePlan:
		return f.store.DeletePlan(index, c.DeletePlan)
	case *statev1.Command_RegisterServer:
		return f.store.RegisterServer(index, c.RegisterServer)
	case *statev1.Command_SetClusterId:
		return f.store.SetClusterID(index, c.SetClusterId)
	case *statev1.Command_PutMeasurement:
		return f.store.PutMeasurement(index, c.PutMeasurement)
	case *statev1.Command_DeleteMeasurement:
		return f.store.DeleteMeasurement(index, c.DeleteMeasurement)
	case *statev1.Command_DenyCertificate:
		return f.store.DenyCertificate(index, c.DenyCertificate)
	case *statev1.Command_AllowCertificate:
		return f.store.AllowCertificate(index, c.AllowCertificate)
	case *statev1.Command_DeleteNode:
		return f.store.DeleteNode(index, c.DeleteNode)
	case *statev1.Command_AdmitServer:
		return f.store.AdmitServer(index, c.AdmitServer)
	default:
		f.store.SetIndex(index)
		f.skipped.Add(1)
		f.log.Error("raft entry has a command this version does not know (written by a newer version); skipped: this master stops serving until it is upgraded", "index", index)
		return state.Result{Index: index}, ErrUnknownCommand
	}
}

// Snapshot implements raft.FSM. It captures the state now (cheaply: entries
// are immutable) and encodes it in Persist, off the FSM goroutine.
func (f *FSM) Snapshot() (hraft.FSMSnapshot, error) {
	return &fsmSnapshot{snap: f.store.Capture()}, nil
}

// Restore implements raft.FSM. Node records are streamed from the snapshot
// into the store's Restorer one at a time; the state changes only once the
// whole snapshot has been read and verified.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	r := f.store.Restorer()
	// The index the snapshot was taken at is the largest node/fabric index it
	// holds; raft sets the true one as entries after it are applied.
	var idx uint64
	nodes := 0
	snap, err := ReadSnapshot(rc, func(rec *statev1.NodeRecord) error {
		idx = max(idx, rec.GetUpdatedIndex())
		nodes++
		return r.AddNode(rec)
	})
	if err != nil {
		f.log.Error("raft snapshot rejected", "err", err)
		return err
	}
	idx = max(idx, snap.GetFabricIndex())
	for _, p := range snap.GetPlans() {
		idx = max(idx, p.GetCreatedIndex())
	}
	for _, e := range snap.GetDeniedCertificates() {
		idx = max(idx, e.GetIndex())
	}
	if err := r.Finish(idx, snap); err != nil {
		return err
	}
	f.log.Info("restored state from a snapshot", "nodes", nodes, "plans", len(snap.GetPlans()), "index", idx)
	return nil
}

type fsmSnapshot struct {
	snap *state.Capture
}

func (s *fsmSnapshot) Persist(sink hraft.SnapshotSink) error {
	if err := WriteSnapshot(sink, s.snap); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}
