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

// session runs one AgentService.Session with the master at addr until it
// fails, is redirected, or ctx is done.
func (a *Agent) session(ctx context.Context, addr string) (out outcome) {
	log := a.log.With(slog.String("master", addr))
	defer func() {
		if out.err != nil {
			if s, ok := status.FromError(out.err); ok {
				out.code = s.Code()
			}
		}
	}()

	conn, err := grpc.NewClient(addr, a.dialOpts...)
	if err != nil {
		out.err = fmt.Errorf("agent: dial master %s: %w", addr, err)
		return out
	}
	defer func() { _ = conn.Close() }()

	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	stream, err := ginv1.NewAgentServiceClient(conn).Session(sctx)
	if err != nil {
		out.err = fmt.Errorf("agent: open session with %s: %w", addr, err)
		return out
	}

	recvCh := make(chan recvResult)
	wg.Go(func() {
		for {
			resp, err := stream.Recv()
			r := recvResult{resp: resp, err: err}
			if err != nil {
				r.trailerHint = apierr.LeaderHint(stream.Trailer())
			}
			select {
			case recvCh <- r:
			case <-sctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	})

	// selfHint is the leader hint of the HelloAck: the name this master
	// advertises for itself, which may be spelled differently from addr.
	// Only a hint naming neither is a redirect.
	var selfHint string
	redirectTo := func(hint string) string {
		if hint == "" {
			return ""
		}
		norm, err := masteraddr.One(hint)
		if err != nil {
			log.Warn("ignoring malformed leader hint", slog.String("leader_hint", hint), slog.Any("err", err))
			return ""
		}
		if norm == addr || norm == selfHint {
			return ""
		}
		return norm
	}
	// ended records the end of the stream: its error, and a leader named
	// in its trailer.
	ended := func(r recvResult) error {
		if out.hint == "" {
			out.hint = redirectTo(r.trailerHint)
		}
		if errors.Is(r.err, io.EOF) {
			return fmt.Errorf("agent: master %s ended the session", addr)
		}
		return fmt.Errorf("agent: session with %s: %w", addr, r.err)
	}

	// send sends one request; when the stream is already broken, the real
	// status comes from the receive side.
	send := func(req *ginv1.SessionRequest, what string) error {
		err := stream.Send(req)
		if err == nil {
			return nil
		}
		if errors.Is(err, io.EOF) {
			// Drain to the stream's status, keeping any leader hint sent
			// before it.
			for {
				select {
				case r := <-recvCh:
					if r.err != nil {
						return fmt.Errorf("agent: send %s: %w", what, ended(r))
					}
					if _, ack := r.resp.GetMsg().(*ginv1.SessionResponse_HelloAck); !ack {
						if h := redirectTo(r.resp.GetLeaderHint()); h != "" {
							out.hint = h
						}
					}
				case <-sctx.Done():
					return fmt.Errorf("agent: send %s to %s: %w", what, addr, sctx.Err())
				}
			}
		}
		return fmt.Errorf("agent: send %s to %s: %w", what, addr, err)
	}

	snap := a.latestSnapshot()
	ackedGen, _ := a.acked()
	hello := &ginv1.Hello{
		NodeName:            a.cfg.NodeName,
		MachineId:           snap.inv.GetHost().GetMachineId(),
		AgentVersion:        a.cfg.Version,
		LastAckedGeneration: ackedGen,
		InventoryHash:       snap.hash,
	}
	if err := send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Hello{Hello: hello}}, "hello"); err != nil {
		out.err = err
		return out
	}
	log.Debug("hello sent", slog.Uint64("generation", ackedGen), slog.String("hash", short(snap.hash)))

	hb := a.heartbeatInterval()
	silence := time.NewTimer(a.silenceTimeout(hb))
	defer silence.Stop()
	var (
		ticker  *time.Ticker
		tickC   <-chan time.Time
		seq     uint64
		h       held
		pending *pendingUpdate
		// scanC is a.scanOut while this agent is the fabric scanner.
		scanC chan *ginv1.FabricTopology
	)
	defer func() {
		if ticker != nil {
			ticker.Stop()
		}
	}()

	// maybeSend sends the latest inventory when it differs from what the
	// master holds and nothing is in flight.
	maybeSend := func() error {
		if !out.established || pending != nil {
			return nil
		}
		next := a.latestSnapshot()
		if next.hash == h.hash {
			return nil
		}
		gen := h.generation + 1
		req := a.encoder.encode(h, next, gen)
		if err := send(req, fmt.Sprintf("inventory generation %d", gen)); err != nil {
			return err
		}
		pending = &pendingUpdate{generation: gen, snap: next, sentAt: time.Now()}
		a.mu.Lock()
		a.status.InventoriesSent++
		a.mu.Unlock()
		log.Info("inventory sent", slog.Uint64("generation", gen), slog.String("hash", short(next.hash)))
		return nil
	}

	for {
		select {
		case <-ctx.Done():
			out.err = ctx.Err()
			return out

		case <-silence.C:
			out.err = status.Errorf(codes.Unavailable, "agent: master %s sent nothing for %s", addr, a.silenceTimeout(hb))
			return out

		case <-tickC:
			if pending != nil && time.Since(pending.sentAt) > a.silenceTimeout(hb) {
				out.err = status.Errorf(codes.Unavailable, "agent: master %s did not acknowledge generation %d within %s",
					addr, pending.generation, a.silenceTimeout(hb))
				return out
			}
			seq++
			hbReq := &ginv1.SessionRequest{Msg: &ginv1.SessionRequest_Heartbeat{Heartbeat: &ginv1.Heartbeat{
				Sequence: seq, Generation: h.generation,
			}}}
			if err := send(hbReq, "heartbeat"); err != nil {
				out.err = err
				return out
			}

		case <-a.changed:
			if err := maybeSend(); err != nil {
				out.err = err
				return out
			}

		case f := <-scanC:
			if err := send(&ginv1.SessionRequest{Msg: &ginv1.SessionRequest_FabricScan{FabricScan: f}}, "fabric scan"); err != nil {
				out.err = err
				return out
			}
			a.mu.Lock()
			a.status.FabricScans++
			a.mu.Unlock()

		case r := <-recvCh:
			if r.err != nil {
				out.err = ended(r)
				return out
			}
			resetTimer(silence, a.silenceTimeout(hb))
			resp := r.resp
			if out.established || resp.GetHelloAck() != nil {
				a.setScanner(resp.GetFabricScanner())
				if resp.GetFabricScanner() {
					scanC = a.scanOut
				} else {
					scanC = nil
				}
			}

			// A hint before the HelloAck is a follower's answer; after it,
			// a hint naming another master means leadership moved.
			if _, isAck := resp.GetMsg().(*ginv1.SessionResponse_HelloAck); isAck && !out.established {
				if h := resp.GetLeaderHint(); h != "" {
					if norm, err := masteraddr.One(h); err == nil {
						selfHint = norm
					}
				}
			} else if h := redirectTo(resp.GetLeaderHint()); h != "" {
				log.Info("master named another leader", slog.String("leader_hint", h))
				out.hint = h
				out.err = fmt.Errorf("agent: %s: %w %s", addr, errRedirect, h)
				return out
			}
			if d := resp.GetHeartbeatInterval(); d != nil && d.AsDuration() > 0 {
				if nhb, changed := a.setHeartbeatInterval(d.AsDuration()); changed {
					log.Info("heartbeat interval set by master", slog.Duration("heartbeat_interval", nhb))
					hb = nhb
					if ticker != nil {
						ticker.Reset(hb)
					}
					resetTimer(silence, a.silenceTimeout(hb))
				}
			}

			switch m := resp.GetMsg().(type) {
			case *ginv1.SessionResponse_HelloAck:
				if out.established {
					log.Warn("ignoring a second hello ack")
					break
				}
				ack := m.HelloAck
				out.established, out.establishedAt = true, time.Now()
				h.generation = ack.GetHeldGeneration()
				if ack.GetInSync() {
					h.hash, h.inv = snap.hash, snap.inv
					a.setAcked(h.generation, h.hash)
				}
				a.setConnected(addr)
				log.Info("connected to master", slog.Uint64("generation", h.generation), slog.Bool("in_sync", ack.GetInSync()))
				ticker = time.NewTicker(hb)
				tickC = ticker.C
				if err := maybeSend(); err != nil {
					out.err = err
					return out
				}

			case *ginv1.SessionResponse_InventoryAck:
				accepted := m.InventoryAck.GetAcceptedGeneration()
				if pending == nil || accepted != pending.generation {
					want := uint64(0)
					if pending != nil {
						want = pending.generation
					}
					// Resynchronise through a new Hello rather than guess.
					out.err = fmt.Errorf("agent: master %s acknowledged generation %d, expected %d", addr, accepted, want)
					return out
				}
				h = held{generation: accepted, hash: pending.snap.hash, inv: pending.snap.inv}
				a.setAcked(accepted, h.hash)
				log.Info("inventory acknowledged", slog.Uint64("generation", accepted),
					slog.Uint64("raft_index", m.InventoryAck.GetIndex()),
					slog.Duration("latency", time.Since(pending.sentAt)))
				pending = nil
				if err := maybeSend(); err != nil {
					out.err = err
					return out
				}

			case *ginv1.SessionResponse_HeartbeatAck:
				// Liveness only: the silence timer was reset above.
			case nil:
				// A follower that knows no leader yet (an election) answers
				// with the session's settings only; its stream ends next.
				log.Debug("master sent no message (it knows no leader)")
			default:
				log.Warn("master sent a response with no known message; ignoring it", slog.String("type", fmt.Sprintf("%T", resp.GetMsg())))
			}
		}
	}
}

// resetTimer re-arms t to d.
func resetTimer(t *time.Timer, d time.Duration) {
	t.Reset(d) // Go ≥1.23 timers: Reset discards a pending fire.
}
