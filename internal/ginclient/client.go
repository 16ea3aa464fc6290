package ginclient

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/redirect"
)

// MaxResponseBytes bounds a response (a topology matrix of 512 devices fits).
const MaxResponseBytes = 64 << 20

// Client talks to a list of masters.
type Client struct {
	masters []string
	opts    []grpc.DialOption

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn // the list's, and leaders named by hints
}

// New prepares connections to masters (nothing is dialled until used).
func New(masters []string, opts ...grpc.DialOption) (*Client, error) {
	if len(masters) == 0 {
		return nil, errors.New("ginclient: no master address")
	}
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxResponseBytes)),
		grpc.WithChainUnaryInterceptor(captureLeaderHint))
	c := &Client{masters: masters, conns: map[string]*grpc.ClientConn{}, opts: opts}
	for _, m := range masters {
		if _, err := c.conn(m); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// conn returns the connection to addr, creating it the first time.
func (c *Client) conn(addr string) (*grpc.ClientConn, error) {
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
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
}

// Do runs fn against the masters through the one redirect follower
// (internal/redirect): each in turn, and the leader a follower names in its
// leader hint (from any unary call fn makes) right after that follower. It
// moves on only when a master is unavailable, not the leader or a leader
// whose data dir is full, and walks the list again within ctx's deadline
// while the masters are between leaders; any other refusal is returned as
// the master sent it. When no master answers, the error is UNAVAILABLE and
// names the masters tried (or the DATA_DIR_FULL refusal, if one was sent).
func (c *Client) Do(ctx context.Context, fn func(ctx context.Context, conn *grpc.ClientConn) error) error {
	_, err := redirect.Do(ctx, c.masters, redirect.Options{FollowHints: true}, func(actx context.Context, addr string) (string, error) {
		conn, err := c.conn(addr)
		if err != nil {
			return "", err
		}
		slot := &hintSlot{}
		err = fn(context.WithValue(actx, hintSlotKey{}, slot), conn)
		return slot.get(), err
	})
	if re := (*redirect.RefusedError)(nil); errors.As(err, &re) {
		return re.Unwrap() // the master's status, as it sent it
	}
	return err
}

// hintSlot receives the leader hint of the calls made in one attempt.
type hintSlot struct {
	mu   sync.Mutex
	hint string
}

func (h *hintSlot) set(v string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hint = v
}

func (h *hintSlot) get() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hint
}

type hintSlotKey struct{}

// captureLeaderHint records the leader hint of a unary call made inside Do
// in that attempt's slot.
func captureLeaderHint(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	slot, ok := ctx.Value(hintSlotKey{}).(*hintSlot)
	if !ok {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	var hdr, trl metadata.MD
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Header(&hdr), grpc.Trailer(&trl))...)
	if h := apierr.LeaderHint(hdr, trl); h != "" {
		slot.set(h)
	}
	return err
}
