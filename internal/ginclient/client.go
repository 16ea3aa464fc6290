package ginclient

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gin-topology/gin/internal/apierr"
)

// MaxResponseBytes bounds a response (a topology matrix of 512 devices fits).
const MaxResponseBytes = 64 << 20

// Client talks to a list of masters.
type Client struct {
	masters []string
	conns   map[string]*grpc.ClientConn
	opts    []grpc.DialOption
}

// New prepares connections to masters (nothing is dialled until used).
func New(masters []string, opts ...grpc.DialOption) (*Client, error) {
	if len(masters) == 0 {
		return nil, errors.New("ginclient: no master address")
	}
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxResponseBytes)))
	c := &Client{masters: masters, conns: map[string]*grpc.ClientConn{}, opts: opts}
	for _, m := range masters {
		conn, err := grpc.NewClient(m, opts...)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("ginclient: %s: %w", m, err)
		}
		c.conns[m] = conn
	}
	return c, nil
}

// Close closes every connection.
func (c *Client) Close() {
	for _, conn := range c.conns {
		_ = conn.Close()
	}
}

// retryable reports whether another master may succeed where this one
// failed: it is unreachable, or it is a follower redirecting to the leader.
// Any other refusal (a stale generation, a conflicting cluster id, ...)
// would be the same on every master and is returned as it is.
func retryable(err error) bool {
	return status.Code(err) == codes.Unavailable || apierr.IsNotLeader(err)
}

// Do runs fn against each master in turn until one answers with something
// other than "unavailable" or "not the leader". It returns the last error,
// annotated with every master tried.
func (c *Client) Do(ctx context.Context, fn func(ctx context.Context, conn *grpc.ClientConn) error) error {
	var errs []string
	for _, m := range c.masters {
		err := fn(ctx, c.conns[m])
		if err == nil {
			return nil
		}
		if !retryable(err) || ctx.Err() != nil {
			return err
		}
		errs = append(errs, fmt.Sprintf("%s: %s", m, status.Convert(err).Message()))
	}
	return status.Errorf(codes.Unavailable, "no master answered (%s)", strings.Join(errs, "; "))
}
