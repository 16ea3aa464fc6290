package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/inventory"
	"github.com/gin-topology/gin/internal/masteraddr"
)

// errRedirect ends a session whose master named another leader.
var errRedirect = errors.New("master named another leader")

// outcome is how a session ended.
type outcome struct {
	// err is why the session ended (never nil unless ctx was cancelled).
	err error
	// code is the gRPC status code of the stream's end, when it had one.
	code codes.Code
	// hint is a normalised leader address other than the session's master.
	hint string
	// established is set when the master acknowledged the Hello.
	established   bool
	establishedAt time.Time
	// home is set when the agent ended the session itself to return to
	// its home master (home.go), which reports it takes sessions.
	home bool
	// joined is the home master's session, acknowledged in sync before
	// this one was left: the next session goes on with it (nil: none).
	joined *homeJoin
}

// held is what the master holds for this node, as far as the session knows.
type held struct {
	generation uint64
	// hash of the held inventory; "" when unknown (the master's copy
	// differs from anything the agent sent in this session).
	hash string
	// inv is the held inventory when known (a base for deltas).
	inv *ginv1.NodeInventory
}

// pendingUpdate is the one inventory in flight.
type pendingUpdate struct {
	generation uint64
	snap       *snapshot
	sentAt     time.Time
}

// updateEncoder turns the latest snapshot into the request that moves the
// master from what it holds to generation gen. A delta encoder
// (InventoryDelta against h.inv) can replace the full one.
type updateEncoder interface {
	encode(h held, next *snapshot, gen uint64) *ginv1.SessionRequest
}

// fullInventoryEncoder always sends the whole inventory.
type fullInventoryEncoder struct{}

func (fullInventoryEncoder) encode(_ held, next *snapshot, gen uint64) *ginv1.SessionRequest {
	inv := proto.CloneOf(next.inv)
	inv.Generation = gen
	return &ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Inventory{Inventory: inv}}
}

// deltaEncoder sends an InventoryDelta against the inventory the master
// holds when the session knows it (the master acknowledged it, or said it
// is in sync with it), and the whole inventory otherwise.
type deltaEncoder struct{}

func (deltaEncoder) encode(h held, next *snapshot, gen uint64) *ginv1.SessionRequest {
	if h.inv == nil || h.hash == "" || h.generation == 0 {
		return fullInventoryEncoder{}.encode(h, next, gen)
	}
	base := proto.CloneOf(h.inv)
	base.Generation = h.generation
	cur := proto.CloneOf(next.inv)
	cur.Generation = gen
	return &ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Delta{Delta: inventory.Diff(base, cur)}}
}

// recvResult is one message, or the end, of the response stream.
type recvResult struct {
	resp *ginv1.SessionResponse
	err  error
	// trailerHint is the leader hint in the ended stream's trailer.
	trailerHint string
}

// sessionStream is the part of the AgentService.Session client stream a
// session sends on (receiving runs in its own goroutine, into recvCh).
type sessionStream interface {
	Send(*ginv1.SessionRequest) error
	// CloseSend ends the agent's side: the master sees the agent leave.
	CloseSend() error
}

// session is one AgentService.Session with one master: the state of the
// stream and one method per message kind and per timer. Agent.session
// opens it and runs its loop; every handler returns the error that ends
// the session (nil: go on).
type session struct {
	a    *Agent
	addr string
	log  *slog.Logger
	ctx  context.Context // the stream's; ends with the session
	// parent is the connect loop's context: the home master's session,
	// opened while this one runs, outlives it (home.go).
	parent context.Context
	stream sessionStream
	recvCh <-chan recvResult

	out outcome
	// selfHint is the leader hint of the HelloAck: the name this master
	// advertises for itself, which may be spelled differently from addr.
	// Only a hint naming neither is a redirect.
	selfHint string
	// hello is the snapshot the Hello described.
	hello *snapshot

	hb      time.Duration
	silence *time.Timer
	ticker  *time.Ticker // nil until the HelloAck
	seq     uint64
	held    held
	pending *pendingUpdate
	// scanC is a.scanOut while this agent is the fabric scanner.
	scanC chan *ginv1.FabricTopology

	// homeC fires when the home master is to be probed (set while the
	// session is established away from home); homeRes receives the
	// probe's answer; stopProbe cancels a probe in flight, probes waits
	// for it (home.go).
	homeC     <-chan time.Time
	homeRes   chan bool
	stopProbe context.CancelFunc
	probes    sync.WaitGroup
	// joining is set while a session with the home master is being
	// opened (make before break: this one goes on, sending no inventory
	// meanwhile); joinRes receives its result (home.go).
	joining  bool
	joinRes  chan *homeJoin
	stopJoin context.CancelFunc
}

// openStream is one open AgentService.Session stream and the goroutine
// that receives on it: what a session runs on.
type openStream struct {
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ctx    context.Context // the stream's; cancelled by close
	stream ginv1.AgentService_SessionClient
	recvCh chan recvResult
}

// openSession dials addr and opens a Session stream that lives until
// close or until ctx is done; nothing is sent yet.
func (a *Agent) openSession(ctx context.Context, addr string) (*openStream, error) {
	conn, err := grpc.NewClient(addr, a.dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("agent: dial master %s: %w", addr, err)
	}
	sctx, cancel := context.WithCancel(ctx)
	stream, err := ginv1.NewAgentServiceClient(conn).Session(sctx)
	if err != nil {
		cancel()
		_ = conn.Close()
		return nil, fmt.Errorf("agent: open session with %s: %w", addr, err)
	}
	o := &openStream{conn: conn, cancel: cancel, ctx: sctx, stream: stream, recvCh: make(chan recvResult)}
	o.wg.Go(func() {
		for {
			resp, err := stream.Recv()
			r := recvResult{resp: resp, err: err}
			if err != nil {
				r.trailerHint = apierr.LeaderHint(stream.Trailer())
			}
			select {
			case o.recvCh <- r:
			case <-sctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	})
	return o, nil
}

// close ends the stream (if still open), its receiver and its connection.
func (o *openStream) close() {
	o.cancel()
	o.wg.Wait()
	_ = o.conn.Close()
}

// session runs one AgentService.Session with the master at addr until it
// fails, is redirected, or ctx is done. With joined (the home master's
// session, opened and acknowledged while the agent was still attached
// elsewhere: home.go) it goes on with that stream and its HelloAck instead
// of opening one.
func (a *Agent) session(ctx context.Context, addr string, joined *homeJoin) (out outcome) {
	defer func() {
		if out.err != nil {
			if s, ok := status.FromError(out.err); ok {
				out.code = s.Code()
			}
		}
	}()
	o := joined.stream()
	if o == nil {
		var err error
		if o, err = a.openSession(ctx, addr); err != nil {
			return outcome{err: err}
		}
	}
	defer o.close()
	s := a.newSession(o.ctx, addr, o.stream, o.recvCh)
	s.parent = ctx
	defer s.stop()
	if joined != nil {
		s.out.err = s.runJoined(ctx, joined)
	} else {
		s.out.err = s.run(ctx)
	}
	return s.out
}

// newSession prepares a session on an open stream; nothing is sent yet.
func (a *Agent) newSession(ctx context.Context, addr string, stream sessionStream, recvCh <-chan recvResult) *session {
	hb := a.heartbeatInterval()
	return &session{a: a, addr: addr, log: a.log.With(slog.String("master", addr)), ctx: ctx, parent: ctx, stream: stream, recvCh: recvCh,
		hb: hb, silence: time.NewTimer(a.silenceTimeout(hb)), homeRes: make(chan bool, 1), joinRes: make(chan *homeJoin, 1)}
}

// stop releases the session's timers and ends a probe of the home master.
func (s *session) stop() {
	if s.stopProbe != nil {
		s.stopProbe()
	}
	if s.stopJoin != nil {
		s.stopJoin()
	}
	s.probes.Wait()
	select {
	case j := <-s.joinRes:
		// This session ended while the home master's was being opened:
		// leave that one too (the connect loop starts over).
		j.leave(s.a.silenceTimeout(s.hb))
	default:
	}
	s.silence.Stop()
	if s.ticker != nil {
		s.ticker.Stop()
	}
}

// run sends the Hello, then handles messages, timers and local events
// until one ends the session; it returns why.
func (s *session) run(ctx context.Context) error {
	if err := s.sendHello(); err != nil {
		return err
	}
	return s.loop(ctx)
}

// loop handles messages, timers and local events until one ends the
// session; it returns why.
func (s *session) loop(ctx context.Context) error {
	for {
		var tickC <-chan time.Time
		if s.ticker != nil {
			tickC = s.ticker.C
		}
		var err error
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.silence.C:
			err = s.onSilence()
		case <-tickC:
			err = s.onTick()
		case <-s.a.changed:
			err = s.maybeSendInventory()
		case f := <-s.scanC:
			err = s.onFabricScan(f)
		case <-s.homeC:
			s.onHomeProbeDue()
		case serving := <-s.homeRes:
			err = s.onHomeProbed(serving)
		case j := <-s.joinRes:
			err = s.onHomeJoined(j)
		case r := <-s.recvCh:
			if r.err != nil {
				return s.ended(r)
			}
			err = s.onResponse(r.resp)
		}
		if err != nil {
			return err
		}
	}
}

// redirectTo is the normalised leader a hint names when that is another
// master than this session's ("" otherwise, or when the hint is malformed).
func (s *session) redirectTo(hint string) string {
	if hint == "" {
		return ""
	}
	norm, err := masteraddr.One(hint)
	if err != nil {
		s.log.Warn("ignoring malformed leader hint", slog.String("leader_hint", hint), slog.Any("err", err))
		return ""
	}
	if norm == s.addr || norm == s.selfHint {
		return ""
	}
	return norm
}

// ended records the end of the stream: its error, and a leader named in
// its trailer.
func (s *session) ended(r recvResult) error {
	if s.out.hint == "" {
		s.out.hint = s.redirectTo(r.trailerHint)
	}
	if errors.Is(r.err, io.EOF) {
		return fmt.Errorf("agent: master %s ended the session", s.addr)
	}
	return fmt.Errorf("agent: session with %s: %w", s.addr, r.err)
}

// send sends one request; when the stream is already broken, the real
// status comes from the receive side.
func (s *session) send(req *ginv1.SessionRequest, what string) error {
	err := s.stream.Send(req)
	if err == nil {
		return nil
	}
	if !errors.Is(err, io.EOF) {
		return fmt.Errorf("agent: send %s to %s: %w", what, s.addr, err)
	}
	// Drain to the stream's status, keeping any leader hint sent before it.
	for {
		select {
		case r := <-s.recvCh:
			if r.err != nil {
				return fmt.Errorf("agent: send %s: %w", what, s.ended(r))
			}
			if _, ack := r.resp.GetMsg().(*ginv1.SessionResponse_HelloAck); !ack {
				if h := s.redirectTo(r.resp.GetLeaderHint()); h != "" {
					s.out.hint = h
				}
			}
		case <-s.ctx.Done():
			return fmt.Errorf("agent: send %s to %s: %w", what, s.addr, s.ctx.Err())
		}
	}
}

// sendHello opens the session: who this node is and what it last had
// acknowledged.
func (s *session) sendHello() error {
	var hello *ginv1.Hello
	s.hello, hello = s.a.newHello()
	if err := s.send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Hello{Hello: hello}}, "hello"); err != nil {
		return err
	}
	s.log.Debug("hello sent", slog.Uint64("generation", hello.GetLastAckedGeneration()), slog.String("hash", short(s.hello.hash)))
	return nil
}

// newHello is the Hello of a new session and the snapshot it describes.
func (a *Agent) newHello() (*snapshot, *ginv1.Hello) {
	snap := a.latestSnapshot()
	ackedGen, _ := a.acked()
	return snap, &ginv1.Hello{
		NodeName:            a.cfg.NodeName,
		MachineId:           snap.inv.GetHost().GetMachineId(),
		AgentVersion:        a.cfg.Version,
		LastAckedGeneration: ackedGen,
		InventoryHash:       snap.hash,
	}
}

// maybeSendInventory sends the latest inventory when it differs from what
// the master holds and nothing is in flight.
func (s *session) maybeSendInventory() error {
	if !s.out.established || s.pending != nil || s.joining {
		return nil
	}
	next := s.a.latestSnapshot()
	if next.hash == s.held.hash {
		return nil
	}
	gen := s.held.generation + 1
	req := s.a.encoder.encode(s.held, next, gen)
	if err := s.send(req, fmt.Sprintf("inventory generation %d", gen)); err != nil {
		return err
	}
	s.pending = &pendingUpdate{generation: gen, snap: next, sentAt: time.Now()}
	s.a.mu.Lock()
	s.a.status.InventoriesSent++
	s.a.mu.Unlock()
	s.log.Info("inventory sent", slog.Uint64("generation", gen), slog.String("hash", short(next.hash)))
	return nil
}

// onSilence: the master sent nothing for the silence timeout.
func (s *session) onSilence() error {
	return status.Errorf(codes.Unavailable, "agent: master %s sent nothing for %s", s.addr, s.a.silenceTimeout(s.hb))
}

// onTick sends a heartbeat, unless the inventory in flight has gone
// unacknowledged for the silence timeout (then the session ends).
func (s *session) onTick() error {
	if s.pending != nil && time.Since(s.pending.sentAt) > s.a.silenceTimeout(s.hb) {
		return status.Errorf(codes.Unavailable, "agent: master %s did not acknowledge generation %d within %s",
			s.addr, s.pending.generation, s.a.silenceTimeout(s.hb))
	}
	s.seq++
	return s.send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Heartbeat{Heartbeat: &ginv1.Heartbeat{
		Sequence: s.seq, Generation: s.held.generation,
	}}}, "heartbeat")
}

// onFabricScan uploads a scan (only while this agent is the scanner).
func (s *session) onFabricScan(f *ginv1.FabricTopology) error {
	if err := s.send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_FabricScan{FabricScan: f}}, "fabric scan"); err != nil {
		return err
	}
	s.a.mu.Lock()
	s.a.status.FabricScans++
	s.a.mu.Unlock()
	return nil
}

// onResponse handles what every response carries (liveness, the scanner
// role, a leader hint, the heartbeat interval), then its message.
func (s *session) onResponse(resp *ginv1.SessionResponse) error {
	resetTimer(s.silence, s.a.silenceTimeout(s.hb))
	_, isAck := resp.GetMsg().(*ginv1.SessionResponse_HelloAck)
	if s.out.established || isAck {
		s.a.setScanner(resp.GetFabricScanner())
		if resp.GetFabricScanner() {
			s.scanC = s.a.scanOut
		} else {
			s.scanC = nil
		}
	}
	// A hint before the HelloAck is a follower's answer; after it, a hint
	// naming another master means leadership moved.
	if isAck && !s.out.established {
		if h := resp.GetLeaderHint(); h != "" {
			if norm, err := masteraddr.One(h); err == nil {
				s.selfHint = norm
			}
		}
	} else if h := s.redirectTo(resp.GetLeaderHint()); h != "" {
		s.log.Info("master named another leader", slog.String("leader_hint", h))
		s.out.hint = h
		return fmt.Errorf("agent: %s: %w %s", s.addr, errRedirect, h)
	}
	if d := resp.GetHeartbeatInterval(); d != nil && d.AsDuration() > 0 {
		s.onHeartbeatInterval(d.AsDuration())
	}
	for _, p := range resp.GetPlans() {
		s.onPlan(p)
	}
	switch m := resp.GetMsg().(type) {
	case *ginv1.SessionResponse_HelloAck:
		return s.onHelloAck(m.HelloAck)
	case *ginv1.SessionResponse_InventoryAck:
		return s.onInventoryAck(m.InventoryAck)
	case *ginv1.SessionResponse_HeartbeatAck:
		// Liveness only: the silence timer was reset above.
	case nil:
		// A follower that knows no leader yet (an election) answers with
		// the session's settings only; its stream ends next.
		s.log.Debug("master sent no message (it knows no leader)")
	default:
		s.log.Warn("master sent a response with no known message; ignoring it", slog.String("type", fmt.Sprintf("%T", resp.GetMsg())))
	}
	return nil
}

// onHeartbeatInterval applies the interval the master asks for.
func (s *session) onHeartbeatInterval(d time.Duration) {
	nhb, changed := s.a.setHeartbeatInterval(d)
	if !changed {
		return
	}
	s.log.Info("heartbeat interval set by master", slog.Duration("heartbeat_interval", nhb))
	s.hb = nhb
	if s.ticker != nil {
		s.ticker.Reset(s.hb)
	}
	resetTimer(s.silence, s.a.silenceTimeout(s.hb))
}

// onHelloAck establishes the session: what the master holds, heartbeats
// from now on, and the inventory when the master's copy differs.
func (s *session) onHelloAck(ack *ginv1.HelloAck) error {
	if s.out.established {
		s.log.Warn("ignoring a second hello ack")
		return nil
	}
	s.out.established, s.out.establishedAt = true, time.Now()
	s.held.generation = ack.GetHeldGeneration()
	if ack.GetInSync() {
		s.held.hash, s.held.inv = s.hello.hash, s.hello.inv
		s.a.setAcked(s.held.generation, s.held.hash)
	}
	s.a.setConnected(s.addr)
	s.log.Info("connected to master", slog.Uint64("generation", s.held.generation), slog.Bool("in_sync", ack.GetInSync()))
	s.ticker = time.NewTicker(s.hb)
	if s.a.awayFromHome(s.addr) {
		s.homeC = s.a.after(s.a.nextHomeProbe())
	}
	return s.maybeSendInventory()
}

// onHomeProbeDue probes the home master in the background (the session
// goes on meanwhile; one probe at a time).
func (s *session) onHomeProbeDue() {
	s.homeC = nil
	ctx, cancel := context.WithCancel(s.ctx)
	s.stopProbe = cancel
	home := s.a.home()
	s.probes.Go(func() {
		defer cancel()
		serving, err := s.a.probe(ctx, home)
		if err != nil {
			s.log.Debug("home master not reachable", slog.String("home", home), slog.Any("err", err))
		}
		s.homeRes <- serving // capacity 1, one probe at a time
	})
}

// leave ends the session from the agent's side: it closes its half of the
// stream and waits (at most the silence timeout) for the master to end
// its half, so the master sees the agent leave rather than a broken
// stream.
func (s *session) leave() error {
	if err := s.stream.CloseSend(); err != nil {
		return fmt.Errorf("agent: leave %s: %w", s.addr, errGoingHome)
	}
	resetTimer(s.silence, s.a.silenceTimeout(s.hb))
	for {
		select {
		case r := <-s.recvCh:
			if r.err != nil {
				return fmt.Errorf("agent: left %s: %w", s.addr, errGoingHome)
			}
			for _, p := range r.resp.GetPlans() {
				s.onPlan(p) // pinned while the agent was leaving: kept
			}
		case <-s.silence.C:
			return fmt.Errorf("agent: left %s (it did not end the stream): %w", s.addr, errGoingHome)
		case <-s.ctx.Done():
			return fmt.Errorf("agent: leave %s: %w", s.addr, s.ctx.Err())
		}
	}
}

// onInventoryAck records the generation the master committed and sends
// the next inventory if one is waiting. An ack for any other generation
// ends the session: a new Hello resynchronises rather than guessing.
func (s *session) onInventoryAck(ack *ginv1.InventoryAck) error {
	accepted := ack.GetAcceptedGeneration()
	if s.pending == nil || accepted != s.pending.generation {
		want := uint64(0)
		if s.pending != nil {
			want = s.pending.generation
		}
		return fmt.Errorf("agent: master %s acknowledged generation %d, expected %d", s.addr, accepted, want)
	}
	s.held = held{generation: accepted, hash: s.pending.snap.hash, inv: s.pending.snap.inv}
	s.a.setAcked(accepted, s.held.hash)
	s.log.Info("inventory acknowledged", slog.Uint64("generation", accepted),
		slog.Uint64("raft_index", ack.GetIndex()),
		slog.Duration("latency", time.Since(s.pending.sentAt)))
	s.pending = nil
	return s.maybeSendInventory()
}

// resetTimer re-arms t to d.
func resetTimer(t *time.Timer, d time.Duration) {
	t.Reset(d) // Go ≥1.23 timers: Reset discards a pending fire.
}
