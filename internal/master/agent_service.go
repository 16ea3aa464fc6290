package master

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/authz"
	"github.com/gin-topology/gin/internal/inventory"
	"github.com/gin-topology/gin/internal/ratelog"
	"github.com/gin-topology/gin/internal/state"
)

// agentService holds the agents' session streams on any master. It is a
// part of its own (parts.go): Server.New gives it exactly what it uses of
// the master.
type agentService struct {
	ginv1.UnimplementedAgentServiceServer
	log      *slog.Logger
	agentLog *ratelog.Bucket // attach, detach and session-end lines
	// helloTimeout bounds the wait for a session's hello, and how long a
	// handshake holds its slot (gin-master --hello-timeout).
	helloTimeout time.Duration
	admission    *admission  // handshake slots and attached agents' writes (admission.go)
	sessions     *sessions   // this master's own agent sessions (sessions.go)
	planPush     *planPush   // pinned plans pushed to sessions (planpush.go)
	live         *liveness   // the leader's node liveness, fed by its own sessions
	closing      func() bool // shutdown has started (Server.closing)
	// outdated refuses a hello while this master's state lacks entries it
	// cannot interpret (Server.outdated); detached refuses a hello, and
	// ends a session at a heartbeat, on a follower cut off from the leader
	// (Server.detached).
	outdated, detached leadingFunc
	// heldFor is this master's record of a node once it is current enough
	// for the agent's acknowledged generation (Server.heldFor).
	heldFor func(ctx context.Context, node string, acked uint64) (state.NodeHead, bool)
	// response starts a SessionResponse (Server.response).
	response func(node string) *ginv1.SessionResponse
	// attach and detach record a session's start and end, and re-pick the
	// fabric scanner (Server.attach, Server.detach).
	attach func(node string)
	detach func(node string, left bool)
	// scanner names the fabric scanner (reports.go).
	scanner func() string
	// commitInventory and commitFabricScan commit a session's writes here
	// on the leader or through it (relay.go).
	commitInventory  func(ctx context.Context, name, machineID string, inv *ginv1.NodeInventory, delta *ginv1.InventoryDelta) (resultWithGen, error)
	commitFabricScan func(ctx context.Context, node string, scan *ginv1.FabricTopology) error
}

// Session implements the agent stream (protocol in api/proto/gin/v1/agent.proto).
func (a *agentService) Session(stream ginv1.AgentService_SessionServer) error {
	err := a.session(stream)
	if err != nil && !errors.Is(err, io.EOF) && status.Code(err) != codes.Canceled {
		if ok, skipped := a.agentLog.Allow(); ok {
			a.log.Warn("agent session ended", "err", err, "suppressed", skipped)
		}
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return toStatus(err)
}

func (a *agentService) session(stream ginv1.AgentService_SessionServer) (err error) {
	first, err := recvHello(stream, a.helloTimeout)
	if err != nil {
		return err
	}
	var as *agentSession
	if err := onFreshStack(func() (err error) {
		as, err = a.hello(stream, first)
		return err
	}); err != nil {
		return err
	}
	// An agent that closes its side of the stream ends the session itself
	// (it moves to its home master): its leaving is a sign of life.
	defer func() { as.end(errors.Is(err, io.EOF)) }()
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		if err := onFreshStack(func() error { return as.handle(req) }); err != nil {
			return err
		}
		as.freeSlot() // the first message after the HelloAck is answered
		as.handshaking = false
	}
}

// agentSession is one attached agent session: what its messages are
// handled with once the HelloAck is sent.
type agentSession struct {
	a         *agentService
	ctx       context.Context
	name      string
	machineID string
	send      *sessionSender
	// release frees the handshake slot (idempotent); holdLimit frees it
	// when the agent takes too long; unsubscribe ends plan pushes.
	release     func()
	holdLimit   *time.Timer
	unsubscribe func()
	// handshaking: the agent is not in sync yet; its first write is part
	// of its handshake. Later writes are an attached agent's, which the
	// handshakes of this master wait for (admission.go).
	handshaking bool
}

// log is the master's logger with the session's node.
func (as *agentSession) log() *slog.Logger { return as.a.log.With("node", as.name) }

// hello checks a session's first message, takes a handshake slot, answers
// with the HelloAck and attaches the session.
func (a *agentService) hello(stream ginv1.AgentService_SessionServer, first *ginv1.SessionRequest) (*agentSession, error) {
	ctx := stream.Context()
	hello := first.GetHello()
	if hello == nil {
		return nil, invalidf("hello", "the first message of a session must be a hello")
	}
	name := hello.GetNodeName()
	if err := inventory.ValidNodeName(name); err != nil {
		return nil, invalidf("hello.node_name", "%v", err)
	}
	if id, ok := authz.Identity(ctx); ok && id.Name != name {
		// With TLS on only agents reach Session (the table); an agent
		// writes only the node its certificate names.
		return nil, &forbidden{msg: fmt.Sprintf("hello for node %q with the certificate of %s: an agent writes only the node its certificate names", name, id)}
	}
	if len(hello.GetMachineId()) > inventory.MaxStringLen || len(hello.GetInventoryHash()) > 128 || len(hello.GetAgentVersion()) > inventory.MaxStringLen {
		return nil, invalidf("hello", "a field is longer than %d bytes", inventory.MaxStringLen)
	}
	as := &agentSession{a: a, ctx: ctx, name: name, machineID: hello.GetMachineId()}
	if err := a.outdated(); err != nil {
		return nil, err
	}
	// Any master holds sessions (followers relay writes to the leader);
	// one cut off from the leader sends its agents elsewhere.
	if err := a.detached(); err != nil {
		return nil, err
	}
	// A whole-cluster restart sends every Hello at once: at most
	// --max-handshakes are served together (admission.go).
	release, err := a.admission.acquire(ctx, a.helloTimeout)
	if err != nil {
		return nil, err
	}
	as.release = release
	as.holdLimit = time.AfterFunc(a.helloTimeout, release)
	attached := false
	defer func() {
		if !attached {
			as.freeSlot()
		}
	}()
	head, known := a.heldFor(ctx, name, hello.GetLastAckedGeneration())
	if known {
		if err := state.CheckBinding(name, head.Record.GetBinding(), sessionBinding(ctx)); err != nil {
			return nil, err
		}
		held := head.MachineID
		// An empty machine_id is a mismatch, never a skip: a name bound to
		// a machine stays bound to it.
		if held != "" && held != hello.GetMachineId() {
			if ok, skipped := a.agentLog.Allow(); ok {
				as.log().Warn("rejected agent: node name registered to another machine", "held_machine_id", held, "machine_id", hello.GetMachineId(), "suppressed", skipped)
			}
			// The held machine id is not told: a caller that may try names
			// must not learn what each is bound to (the log has it).
			return nil, fmt.Errorf("%w: node %q is registered to another machine; this agent is machine %q (a re-imaged or replaced machine: an admin frees the name, ginctl node delete %s)",
				state.ErrIdentityConflict, name, hello.GetMachineId(), name)
		}
	}
	ack := &ginv1.HelloAck{}
	if known {
		ack.HeldGeneration = head.Generation
		ack.InSync = head.Record.GetContentHash() == hello.GetInventoryHash()
	}
	resp := a.response(name)
	resp.Msg = &ginv1.SessionResponse_HelloAck{HelloAck: ack}
	if err := stream.Send(resp); err != nil {
		return nil, err
	}
	as.handshaking = !ack.InSync
	if ack.InSync {
		as.freeSlot()
	}
	if ok, skipped := a.agentLog.Allow(); ok {
		as.log().Info("agent attached", "held_generation", ack.GetHeldGeneration(), "in_sync", ack.GetInSync(), "agent_version", hello.GetAgentVersion(), "suppressed", skipped)
	}
	attached = true
	a.attach(name)
	// Plans pinned while the session is open are pushed on it; its own
	// answers and the pushes share one sender.
	as.send = &sessionSender{stream: stream}
	as.unsubscribe = a.planPush.subscribe(name, as.pushPlan)
	a.live.seen(ctx, name) // the leader's own sessions; followers report theirs
	return as, nil
}

// end detaches a session that hello attached; left is set when its agent
// ended it.
func (as *agentSession) end(left bool) {
	as.unsubscribe()
	as.a.detach(as.name, left)
	as.freeSlot()
}

// freeSlot frees the session's handshake slot, if it still holds it, and
// drops the timer that would.
func (as *agentSession) freeSlot() {
	as.release()
	if as.holdLimit != nil {
		as.holdLimit.Stop()
		as.holdLimit = nil
	}
}

// handle answers one message of an attached session.
func (as *agentSession) handle(req *ginv1.SessionRequest) error {
	a, ctx, name := as.a, as.ctx, as.name
	if a.closing() {
		_ = as.send.Send(a.response(name))
		return errShuttingDown
	}
	switch m := req.GetMsg().(type) {
	case *ginv1.SessionRequest_Heartbeat:
		if err := a.detached(); err != nil {
			return err
		}
		a.sessions.beat(name, time.Now())
		a.live.seen(ctx, name)
		r := a.response(name)
		r.Msg = &ginv1.SessionResponse_HeartbeatAck{HeartbeatAck: &ginv1.HeartbeatAck{Sequence: m.Heartbeat.GetSequence(), ServerTime: timestamppb.Now()}}
		return as.send.Send(r)
	case *ginv1.SessionRequest_Inventory:
		return a.write(as.handshaking, func() error {
			return a.putInventory(ctx, as.send, as.log(), name, as.machineID, m.Inventory, nil)
		})
	case *ginv1.SessionRequest_Delta:
		return a.write(as.handshaking, func() error {
			return a.putInventory(ctx, as.send, as.log(), name, as.machineID, nil, m.Delta)
		})
	case *ginv1.SessionRequest_FabricScan:
		if sc := a.scanner(); sc != name {
			as.log().Warn("fabric scan rejected: this agent is not the fabric scanner")
			return fmt.Errorf("%w: node %q is not the fabric scanner; %q is", errFailedPrecondition, name, sc)
		}
		return a.write(as.handshaking, func() error { return a.commitFabricScan(ctx, name, m.FabricScan) })
	case *ginv1.SessionRequest_Hello:
		return invalidf("hello", "a session sends hello only once")
	default:
		return invalidf("msg", "empty or unknown session message")
	}
}

// write runs one write of a session; an attached agent's (past its
// handshake) is counted in flight, so that new handshakes wait for it.
func (a *agentService) write(handshaking bool, f func() error) error {
	if handshaking {
		return f()
	}
	a.admission.writes.begin()
	defer a.admission.writes.end()
	return f()
}

// pushPlan sends one plan pinned for the session's node on its stream.
func (as *agentSession) pushPlan(pl *ginv1.Plan) error {
	return as.a.pushPlan(as.send, as.name, pl, as.log())
}

// pushPlan sends one plan pinned for node on its session.
func (a *agentService) pushPlan(send responder, node string, pl *ginv1.Plan, log *slog.Logger) error {
	r := a.response(node)
	r.Plans = []*ginv1.Plan{pl}
	if err := send.Send(r); err != nil {
		log.Warn("plan not pushed: the stream failed", "job", pl.GetJobId(), "err", err)
		return err
	}
	log.Info("plan pushed", "job", pl.GetJobId(), "hash", pl.GetContentHash())
	return nil
}

// putInventory commits a full inventory or a delta (one is set) of the
// session's node, here on the leader or through it, and acknowledges it
// once committed.
func (a *agentService) putInventory(ctx context.Context, stream responder, log *slog.Logger, name, machineID string, inv *ginv1.NodeInventory, delta *ginv1.InventoryDelta) error {
	if inv != nil && inv.GetNodeName() != name {
		return invalidf("inventory.node_name", "%q does not match the session's node %q", inv.GetNodeName(), name)
	}
	a.sessions.writeStarted(name)
	res, err := a.commitInventory(ctx, name, machineID, inv, delta)
	a.sessions.writeDone(name, time.Now())
	a.live.seen(ctx, name)
	if err != nil {
		gen := inv.GetGeneration()
		if delta != nil {
			gen = delta.GetGeneration()
		}
		log.Warn("inventory rejected", "generation", gen, "err", err)
		return err
	}
	log.Info("inventory committed", "generation", res.Generation, "index", res.Index, "changed", res.Changed)
	r := a.response(name)
	r.Msg = &ginv1.SessionResponse_InventoryAck{InventoryAck: &ginv1.InventoryAck{AcceptedGeneration: res.Generation, Index: res.Index}}
	return stream.Send(r)
}

// response starts a SessionResponse with the fields every response carries.
// It names no leader: the master that accepted a session keeps it, leader
// or not (agents move only when it fails or ends the session).
func (s *Server) response(node string) *ginv1.SessionResponse {
	return &ginv1.SessionResponse{
		HeartbeatInterval: durationpb.New(s.cfg.HeartbeatInterval),
		FabricScanner:     node != "" && s.scanner() == node,
	}
}

// attach records a new session of node (the leader may name it scanner).
func (s *Server) attach(node string) {
	s.sessions.add(node, time.Now())
	s.refreshScanner()
}

// detach records the end of a session of node; left is set when its agent
// ended it.
func (s *Server) detach(node string, left bool) {
	s.sessions.remove(node, left, time.Now())
	s.refreshScanner()
}

// heldFor is this master's record of node, once it is current enough for
// an agent that was last acknowledged generation acked: a follower's state
// may lag the leader's by the last entries, and an agent must not be told
// a generation older than one it was acknowledged (it would send its whole
// inventory again). It waits for the local state to catch up, at most
// heldWait; past that (the node was deleted, or this master is cut off) it
// answers what it holds, and the agent's next write goes to the leader,
// which judges it.
func (s *Server) heldFor(ctx context.Context, node string, acked uint64) (state.NodeHead, bool) {
	head, ok := s.store.Head(node)
	if acked == 0 || (ok && head.Generation >= acked) {
		return head, ok
	}
	ctx, cancel := context.WithTimeout(ctx, heldWait)
	defer cancel()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.log.Warn("agent's acknowledged generation is ahead of this master's state; answering from it", "node", node, "acked", acked, "held", head.Generation)
			return head, ok
		case <-t.C:
		}
		if head, ok = s.store.Head(node); ok && head.Generation >= acked {
			return head, ok
		}
	}
}

// heldWait bounds how long a Hello waits for this master's state to catch
// up with what the agent was acknowledged.
const heldWait = 3 * time.Second

// putInventory validates an inventory at the edge and commits it. Device
// identities are made canonical first (an agent older than that rule sends
// them as its source wrote them), so the log, the hash and every client
// see one form; the FSM applies the same rule to older entries.
func (s *Server) putInventory(ctx context.Context, inv *ginv1.NodeInventory) (resultWithGen, error) {
	return s.putInventoryBound(ctx, inv, sessionBinding(ctx), false)
}

// putInventoryBound is putInventory for a node whose agent's certificate is
// binding (nil without TLS): the session's own, or the one a relaying
// master verified. An agent's write (fromAgent) is bounded in changes per
// minute (inventorybounds.go); every write in size.
func (s *Server) putInventoryBound(ctx context.Context, inv *ginv1.NodeInventory, binding *statev1.NodeBinding, fromAgent bool) (resultWithGen, error) {
	if err := checkInventorySize(inv); err != nil {
		return resultWithGen{}, err
	}
	inv, _ = inventory.Canonical(inv)
	if err := inventory.Validate(inv); err != nil {
		return resultWithGen{}, err
	}
	if err := s.store.Graph().CheckNode(inv); err != nil {
		return resultWithGen{}, invalidf("inventory", "%v", err)
	}
	hash, err := inventory.ContentHash(inv)
	if err != nil {
		return resultWithGen{}, err
	}
	// Answer what the FSM would answer without writing a log entry: a
	// duplicate is already committed, a stale generation is refused. The FSM
	// checks again, in log order.
	if head, ok := s.store.Head(inv.GetNodeName()); ok {
		// The FSM skips the machine check when either id is empty (older
		// log entries must replay the same); the edge does not.
		if held := head.MachineID; held != "" && held != inv.GetHost().GetMachineId() {
			return resultWithGen{}, fmt.Errorf("%w: node %q is registered to another machine; this inventory names machine %q (a re-imaged or replaced machine: an admin frees the name, ginctl node delete %s)",
				state.ErrIdentityConflict, inv.GetNodeName(), inv.GetHost().GetMachineId(), inv.GetNodeName())
		}
		dup, err := state.CheckHead(head, inv, hash)
		if err != nil {
			return resultWithGen{}, err
		}
		if dup {
			return resultWithGen{Index: head.Record.GetUpdatedIndex(), Generation: head.Generation}, nil
		}
	} else if n, _ := s.store.Counts(); n >= s.cfg.MaxNodes {
		return resultWithGen{}, exhaustedf(apierr.ReasonNodeLimit, "node %q not registered: %d nodes are, the most gin-master --max-nodes allows (%d); raise it on every master",
			inv.GetNodeName(), n, s.cfg.MaxNodes)
	}
	if fromAgent {
		if err := s.invBounds.admitChange(inv.GetNodeName()); err != nil {
			return resultWithGen{}, err
		}
	}
	res, err := s.apply(ctx, &statev1.Command{Command: &statev1.Command_PutInventory{PutInventory: &statev1.PutInventory{
		Inventory: inv, ContentHash: hash, At: timestamppb.Now(), Binding: binding,
	}}})
	if err != nil {
		return resultWithGen{}, err
	}
	return resultWithGen{Index: res.Index, Generation: res.Generation, Changed: res.Changed}, nil
}

type resultWithGen struct {
	Index, Generation uint64
	Changed           bool
}

// setNodeStates commits node state changes as one Raft entry (liveness
// batches them) and returns its index: a SetNodeStates, or for a lone
// change the SetNodeState every version knows (a master older than
// SetNodeStates skips it and stops serving until upgraded). An error
// wrapping state.ErrUnknownNode is an entry applied without those nodes
// (deleted since they were queued); any other, an entry that did not
// commit or whose outcome is unknown.
func (s *Server) setNodeStates(ctx context.Context, changes []stateChange) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	at := timestamppb.Now()
	cmds := make([]*statev1.SetNodeState, len(changes))
	for i, c := range changes {
		cmds[i] = &statev1.SetNodeState{NodeName: c.node, State: c.state, Reason: c.reason, At: at}
	}
	cmd := &statev1.Command{Command: &statev1.Command_SetNodeStates{SetNodeStates: &statev1.SetNodeStates{Changes: cmds}}}
	if len(cmds) == 1 {
		cmd = &statev1.Command{Command: &statev1.Command_SetNodeState{SetNodeState: cmds[0]}}
	}
	res, err := s.apply(ctx, cmd)
	switch {
	case err == nil:
	case errors.Is(err, state.ErrUnknownNode):
		return res.Index, err
	case len(changes) == 1:
		return 0, fmt.Errorf("set %s %s: %w", changes[0].node, changes[0].state, err)
	default:
		return 0, fmt.Errorf("set the state of %d nodes: %w", len(changes), err)
	}
	return res.Index, nil
}

// recvHello waits at most d for a session's first message. On timeout the
// handler returns, which cancels the stream and ends the blocked Recv.
func recvHello(stream ginv1.AgentService_SessionServer, d time.Duration) (*ginv1.SessionRequest, error) {
	type result struct {
		m   *ginv1.SessionRequest
		err error
	}
	ch := make(chan result, 1)
	go func() {
		m, err := stream.Recv()
		ch <- result{m, err}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.m, r.err
	case <-t.C:
		return nil, fmt.Errorf("no hello within %s of opening the session: %w", d, context.DeadlineExceeded)
	}
}
