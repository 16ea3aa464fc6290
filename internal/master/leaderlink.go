package master

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
)

// leaderLink is a follower's tie to the leader: its one client connection
// to the leader (relayed agent writes, session reports and forwarded calls
// share it, dialled again when the leader's address changes) and what the
// session reports say about reaching it (reports.go: detached, and
// sessionhealth.go: whether this master may take agent sessions).
type leaderLink struct {
	hint  func() string // the leader's client address, "" when none is known
	creds grpc.DialOption

	mu   sync.Mutex
	addr string
	cc   *grpc.ClientConn

	// reached (unix ns) is when this master last led or had a session
	// report accepted by the leader.
	reached atomic.Int64
	// failed counts the session reports that failed in a row since (the
	// grace measured on this master's progress).
	failed atomic.Int64
	// accepted is set once the leader has accepted a session report of
	// this master: it reaches the leader, so it may tell agents it takes
	// sessions.
	accepted atomic.Bool
}

// newLeaderLink is a link not dialled yet, counted as reached at now (a
// starting master is not cut off before it has tried).
func newLeaderLink(hint func() string, creds grpc.DialOption, now time.Time) *leaderLink {
	l := &leaderLink{hint: hint, creds: creds}
	l.reached.Store(now.UnixNano())
	return l
}

// conn is the connection to the current leader (errNoLeader while none is
// known).
func (l *leaderLink) conn() (*grpc.ClientConn, error) {
	addr := l.hint()
	if addr == "" {
		return nil, errNoLeader
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cc == nil || l.addr != addr {
		if l.cc != nil {
			_ = l.cc.Close()
			l.cc = nil
		}
		cc, err := grpc.NewClient(addr, l.creds, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes)))
		if err != nil {
			return nil, fmt.Errorf("dial leader %s: %w", addr, err)
		}
		l.addr, l.cc = addr, cc
	}
	return l.cc, nil
}

// relay is a RelayService client on the current leader.
func (l *leaderLink) relay() (ginv1.RelayServiceClient, error) {
	cc, err := l.conn()
	if err != nil {
		return nil, err
	}
	return ginv1.NewRelayServiceClient(cc), nil
}

// close closes the connection to the leader.
func (l *leaderLink) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cc != nil {
		_ = l.cc.Close()
		l.cc = nil
	}
}

// reachedAt records that this master led, or had a report accepted, at t.
func (l *leaderLink) reachedAt(t time.Time) {
	l.reached.Store(t.UnixNano())
	l.failed.Store(0)
}

// unreachedSince is how long ago the leader was last reached.
func (l *leaderLink) unreachedSince(now time.Time) time.Duration {
	return max(now.Sub(time.Unix(0, l.reached.Load())), 0)
}
