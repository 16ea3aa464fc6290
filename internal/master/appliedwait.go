package master

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// waitApplied (leader) returns once every other master the leader reaches
// (reach: its session reports arrive) has applied the entry at index to
// its state, so that a write whose effect every master enforces locally
// (the certificate deny list, checked at each listener) holds on all of
// them when its caller hears success. A master the leader does not reach
// is not waited for: it cannot be called in time to matter, and waiting
// for it would hold every such write for the whole bound.
//
// The bound is the caller's deadline less a tenth (so the answer still
// arrives), at most appliedWaitMax. A master still behind then is named in
// the error (notAppliedError); the change stays committed.
//
// A follower's progress is read as the index of the state that served a
// read (ReadInfo.index): hashicorp/raft's applied index (GetClusterInfo)
// counts a batch as soon as it is handed to the FSM goroutine, before the
// store holds it. ListMeasurements is the smallest read that carries it
// (measurements without their points).
func (s *Server) waitApplied(ctx context.Context, index uint64, what string) error {
	if !s.node.IsLeader() {
		return nil
	}
	addrs := map[string]string{}
	for _, m := range s.node.Stats().Members {
		if m.ID == s.cfg.ID {
			continue
		}
		if ok, _, _ := s.live.reach(m.ID); !ok {
			continue
		}
		if r, ok := s.store.Server(m.ID); ok && r.GetClientAddress() != "" {
			addrs[m.ID] = r.GetClientAddress()
		}
	}
	if len(addrs) == 0 {
		return nil
	}
	bound := appliedWaitMax
	if dl, ok := ctx.Deadline(); ok {
		bound = min(bound, time.Until(dl)*9/10)
	}
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var (
		mu     sync.Mutex
		behind []string
		wg     sync.WaitGroup
	)
	for id, addr := range addrs {
		wg.Go(func() {
			if err := s.waitPeerApplied(wctx, addr, index); err != nil {
				s.log.Warn("a master had not applied an entry when the wait ended", "peer", id, "index", index, "err", err)
				mu.Lock()
				behind = append(behind, id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(behind) == 0 {
		return nil
	}
	sort.Strings(behind)
	return &notAppliedError{msg: fmt.Sprintf("%s at commit index %d, but %s had not applied it within %s and may act without it until they do (ginctl cluster shows each master's applied index)",
		what, index, strings.Join(behind, ", "), bound.Round(time.Millisecond))}
}

// notAppliedError: a committed change that masters the leader reaches had
// not applied when waitApplied's bound passed (ABORTED, errors.go).
type notAppliedError struct{ msg string }

func (e *notAppliedError) Error() string { return e.msg }

// waitDenyApplied waits (waitApplied) for a deny-list change at index to
// hold on every master the leader reaches; without TLS no master checks
// certificates, so there is nothing to wait for.
func (s *Server) waitDenyApplied(ctx context.Context, index uint64, what string) error {
	if s.cfg.TLS == nil {
		return nil
	}
	return s.waitApplied(ctx, index, what)
}

// appliedWaitMax bounds waitApplied without a caller's deadline.
const appliedWaitMax = 10 * time.Second

// waitPeerApplied polls the master at addr until its state holds index:
// a follower learns a commit from the leader's next AppendEntries (Raft's
// commit timeout) and applies it right after, so the first polls come
// quickly and then back off.
func (s *Server) waitPeerApplied(ctx context.Context, addr string, index uint64) error {
	conn, err := s.dialPeer(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	c := ginv1.NewCalibrationServiceClient(conn)
	wait := 2 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := c.ListMeasurements(cctx, &ginv1.ListMeasurementsRequest{})
		cancel()
		if err == nil && resp.GetRead().GetIndex() >= index {
			return nil
		}
		if status.Code(err) == codes.Unauthenticated {
			// A valid master certificate is refused only as denied: this
			// peer applied a deny of the leader's own certificate, and no
			// later poll can tell more.
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return err
			}
			return fmt.Errorf("applied index %d: %w", resp.GetRead().GetIndex(), ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}
