package agent

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/dialerr"
	"github.com/gin-topology/gin/internal/masteraddr"
	"github.com/gin-topology/gin/internal/ratelog"
)

// connectLoop keeps a session open to some master until ctx is done: it
// starts at this node's place in the master list (masteraddr.StartIndex: agents
// spread over the masters, each of which holds sessions and relays writes
// to the leader), rotates through the candidates on failure, follows a
// master's hint when it refuses the session and names another (older
// masters sent followers' agents to the leader), and waits between
// attempts.
func (a *Agent) connectLoop(ctx context.Context) {
	// A session needs an inventory for its Hello.
	select {
	case <-ctx.Done():
		return
	case <-a.first:
	}
	c := &connectState{
		bo:  newBackoff(a.cfg.InitialBackoff, a.cfg.MaxBackoff, a.rnd),
		rc:  newReach(time.Now),
		idx: masteraddr.StartIndex(a.cfg.NodeName, a.numCandidates()),
		// One line per busyLogEvery about masters answering RESOURCE_EXHAUSTED.
		busyLog: ratelog.New(1/busyLogEvery.Seconds(), 1, time.Now),
		// One line per busyLogEvery about a master this agent cannot talk to
		// as configured (TLS on one side only, the HTTP port).
		mismatchLog: ratelog.New(1/busyLogEvery.Seconds(), 1, time.Now),
	}
	for {
		addr, i := a.candidate(c.idx)
		c.idx = i
		if c.attempts > 0 {
			a.mu.Lock()
			a.status.Reconnects++
			a.mu.Unlock()
		}
		c.attempts++

		out := a.session(ctx, addr, c.joined)
		c.joined = nil
		if out.joined == nil {
			a.setDisconnected()
		}
		if ctx.Err() != nil {
			out.joined.leave(0)
			return
		}
		log := a.log.With(slog.String("master", addr))
		if masterAnswered(out) || out.home {
			c.rc.answered(addr)
		} else {
			c.rc.failed(addr)
		}
		a.noteOutcome(c, out, log)
		wait := a.nextMaster(c, out, addr, log)
		// A master that is busy (RESOURCE_EXHAUSTED with a retry hint:
		// too many handshakes at once) is not asked again sooner.
		wait = c.bo.atLeast(wait, apierr.RetryHint(out.err))
		if wait > 0 && !sleep(ctx, wait) {
			return
		}
	}
}

// connectState is what connectLoop keeps between session attempts.
type connectState struct {
	bo            *backoff
	rc            *reach
	idx           int       // the candidate master to try next
	redirects     int       // consecutive redirects without an established session
	attempts      uint64    // sessions attempted
	everConnected bool      // a session was established once
	reportedDown  bool      // the loss of the masters was logged (and not since a session)
	joined        *homeJoin // the home master's session, opened before the last one was left
	busyLog       *ratelog.Bucket
	mismatchLog   *ratelog.Bucket
}

// noteOutcome records and logs how a session attempt ended.
func (a *Agent) noteOutcome(c *connectState, out outcome, log *slog.Logger) {
	switch {
	case out.home:
		c.everConnected, c.redirects, c.reportedDown = true, 0, false
		c.bo.reset()
		log.Info("returning to the home master, which takes sessions again", slog.String("home", a.home()))
	case out.established:
		c.everConnected = true
		c.redirects = 0
		if time.Since(out.establishedAt) > a.heartbeatInterval() {
			c.bo.reset()
		}
		gen, _ := a.acked()
		if out.hint != "" {
			c.reportedDown = false
			log.Info("leaving master for the leader it named", slog.String("leader_hint", out.hint), slog.Uint64("generation", gen))
		} else {
			c.reportedDown = true
			a.recordError(out.err)
			if rejected(out.code) || out.code == codes.ResourceExhausted {
				break // logged by nextMaster
			}
			log.Warn("disconnected from master; collection continues, reconnecting", slog.Uint64("generation", gen), slog.Any("err", out.err))
		}
	case out.hint != "":
		log.Debug("master named another leader", slog.String("leader_hint", out.hint))
	case out.code == codes.ResourceExhausted:
		a.recordError(out.err) // logged by nextMaster, rate limited
	case mismatch(out.code, out.err) != "":
		c.reportedDown = true
		a.recordError(out.err)
		if ok, skipped := c.mismatchLog.Allow(); ok {
			log.Error(mismatch(out.code, out.err)+"; retrying", slog.Uint64("suppressed", skipped), slog.Any("err", out.err))
		}
	case !c.reportedDown:
		c.reportedDown = true
		a.recordError(out.err)
		if c.everConnected {
			log.Warn("cannot reach a master; collection continues, retrying", slog.Any("err", out.err))
		} else {
			log.Warn("no master reachable yet; collection continues, retrying", slog.Any("err", out.err))
		}
	default:
		a.recordError(out.err)
		log.Debug("session attempt failed", slog.Any("err", out.err))
	}
}

// nextMaster picks the master to try after a session attempt ended and
// how long to wait first.
func (a *Agent) nextMaster(c *connectState, out outcome, addr string, log *slog.Logger) time.Duration {
	var wait time.Duration
	switch {
	case out.home:
		// At once, on the home session already acknowledged.
		c.idx, c.joined = a.homeIndex(), out.joined
	case out.hint != "" && c.rc.avoid(out.hint):
		// A follower still names the leader that just went away (until
		// its own heartbeat timeout), or one that just said it cannot
		// take this agent: try another master instead.
		log.Debug("not following a hint to a master that just failed", slog.String("leader_hint", out.hint))
		c.idx = c.rc.next(c.idx, a.numCandidates(), a.candidateAt)
		wait = c.rc.pace(c.bo.next())
	case out.hint != "":
		c.idx = a.addCandidate(out.hint)
		c.redirects++
		// Hints are followed at once, unless masters keep pointing at
		// each other (an election in progress): then back off.
		if c.redirects > a.numCandidates() {
			wait = c.rc.pace(c.bo.next())
		}
	case rejected(out.code):
		gen, _ := a.acked()
		wait = c.bo.saturate()
		log.Error("master REJECTED this agent; fix the node, its inventory or its identity; retrying later",
			slog.String("code", out.code.String()),
			slog.String("reason", statusMessage(out.err)),
			slog.Any("fields", badFields(out.err)),
			slog.Uint64("generation", gen), slog.Duration("retry_in", wait), slog.Any("err", out.err))
		// Stay with this master: it is the leader that judged the inventory.
	case out.code == codes.ResourceExhausted:
		// This master cannot take the agent now (its caps on nodes or
		// streams, its data dir full): pass over it for busyMemory and
		// try the next master after a jittered backoff that keeps
		// growing (not capped by the live-cluster pace: the master is
		// alive, and agents retrying every second would keep it
		// exhausted). The next Hello carries the acknowledged generation
		// and hash, so a master holding them gets no inventory again.
		c.rc.exhausted(addr)
		c.idx = c.rc.next(c.idx, a.numCandidates(), a.candidateAt)
		wait = c.bo.atLeast(c.bo.next(), apierr.RetryHint(out.err))
		if ok, skipped := c.busyLog.Allow(); ok {
			log.Warn("master cannot take this agent now; trying another master after a backoff",
				slog.String("reason", statusMessage(out.err)), slog.Duration("retry_in", wait),
				slog.Uint64("suppressed", skipped))
		}
	default:
		// FAILED_PRECONDITION / UNAVAILABLE without a hint, and every
		// other failure: the next master that did not just fail, after
		// a jittered wait (short while some master answers). When the
		// master this agent was attached to failed, its agents spread
		// over the others (masteraddr.MoveFrom) rather than all landing on the next.
		from := c.idx
		if out.established {
			from = masteraddr.MoveFrom(a.cfg.NodeName, c.idx, a.numCandidates())
		}
		c.idx = c.rc.next(from, a.numCandidates(), a.candidateAt)
		wait = c.rc.pace(c.bo.next())
	}
	return wait
}

// busyLogEvery is the most often the connect loop logs a master's
// RESOURCE_EXHAUSTED (a cluster at its caps answers every agent so).
const busyLogEvery = 30 * time.Second

// masterAnswered reports whether the session's end came from the master
// itself (a redirect, a refusal with a status) rather than from a
// connection that could not be made, broke, or went silent (an ack timeout
// is a local error without a status: code OK).
func masterAnswered(out outcome) bool {
	if out.hint != "" {
		return true
	}
	switch out.code {
	case codes.OK, codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unknown:
		return false
	}
	return true
}

// rejected reports whether a stream ended because the master refused this
// agent's inventory (INVALID_ARGUMENT names the field) or identity (the node
// name is registered to another machine, or the credentials are refused):
// retrying soon cannot help, but the node may change, so the agent retries
// after the maximum backoff.
func rejected(c codes.Code) bool {
	switch c {
	case codes.InvalidArgument, codes.AlreadyExists, codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}

// mismatch is the sentence saying why this agent cannot talk to a master
// as configured, or "" when err is no such failure (internal/dialerr tells
// them, as for ginctl).
func mismatch(code codes.Code, err error) string {
	if err == nil || code != codes.Unavailable {
		return ""
	}
	switch dialerr.Classify(err.Error()) {
	case dialerr.TLSRequired:
		return "the master closed the connection without answering: it serves mutual TLS and this agent dials plaintext; give gin-agent --tls-ca, --tls-cert and --tls-key (or GIN_TLS_CA, GIN_TLS_CERT, GIN_TLS_KEY) with an agent certificate naming this node (ginctl tls cert create --role agent --name NODE; docs/SECURITY.md)"
	case dialerr.NotTLS:
		return "the master address does not speak TLS: a master started with --insecure (leave out this agent's --tls-* and GIN_TLS_*) or the master's HTTP port (/metrics, 5002 by default; give its gRPC port, 5000 by default, in --master or GIN_MASTER_HOST)"
	case dialerr.HTTPPort:
		return "the master address answers HTTP, not gRPC: it is the master's HTTP port (/metrics, 5002 by default); give its gRPC port (5000 by default) in --master or GIN_MASTER_HOST"
	}
	return ""
}

// statusMessage is the message of the gRPC status in err's chain, or
// err's text when there is none.
func statusMessage(err error) string {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus().Message()
	}
	return err.Error()
}

// badFields lists the fields named by the BadRequest details of the gRPC
// status in err's chain.
func badFields(err error) []string {
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return nil
	}
	var fields []string
	for _, d := range se.GRPCStatus().Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fields = append(fields, v.GetField()+": "+v.GetDescription())
			}
		}
	}
	return fields
}

// sleep waits d or until ctx is done; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
