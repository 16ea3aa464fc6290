package main

// The client side of the masters' gRPC API: it dials the master list and
// runs each call through the one failover walk (internal/redirect), which
// tries every master in turn when one is unreachable; any master answers,
// since followers forward writes to the leader.

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gin-topology/gin/internal/redirect"
)

// maxResponseBytes bounds a response (a topology matrix of 512 devices fits).
const maxResponseBytes = 64 << 20

// masterClient talks to a list of masters.
type masterClient struct {
	masters []string
	opts    []grpc.DialOption

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn // one per address of the list
}

// newMasterClient prepares connections to masters (nothing is dialled until used).
func newMasterClient(masters []string, opts ...grpc.DialOption) (*masterClient, error) {
	if len(masters) == 0 {
		return nil, errors.New("ginclient: no master address")
	}
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxResponseBytes)))
	c := &masterClient{masters: masters, conns: map[string]*grpc.ClientConn{}, opts: opts}
	for _, m := range masters {
		if _, err := c.conn(m); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// conn returns the connection to addr, creating it the first time.
func (c *masterClient) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if conn, ok := c.conns[addr]; ok {
		return conn, nil
	}
	conn, err := grpc.NewClient(addr, c.opts...)
	if err != nil {
		return nil, fmt.Errorf("ginclient: %s: %w", addr, err)
	}
	c.conns[addr] = conn
	return conn, nil
}

// Close closes every connection.
func (c *masterClient) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
}

// Do runs fn against the masters through the one failover walk
// (internal/redirect): each in turn, moving on only when a master is
// unavailable, knows no leader (an older master's NOT_LEADER) or leads
// with a full data dir, and walking the list again within ctx's deadline
// while the masters are between leaders; any other refusal is returned as
// the master sent it. A follower forwards writes to the leader itself.
// When no master answers, the error is UNAVAILABLE and names the masters
// tried (or the DATA_DIR_FULL refusal, if one was sent).
func (c *masterClient) Do(ctx context.Context, fn func(ctx context.Context, conn *grpc.ClientConn) error) error {
	_, err := redirect.Do(ctx, c.masters, redirect.Options{}, func(actx context.Context, addr string) error {
		conn, err := c.conn(addr)
		if err != nil {
			return err
		}
		return fn(actx, conn)
	})
	if re := (*redirect.RefusedError)(nil); errors.As(err, &re) {
		return re.Unwrap() // the master's status, as it sent it
	}
	return err
}
