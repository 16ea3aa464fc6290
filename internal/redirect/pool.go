package redirect

import (
	"errors"
	"sync"

	"google.golang.org/grpc"
)

// Pool is one lazily dialled connection per master address, for a client
// that walks a master list again and again (the agent's plan fetches and
// live windows); safe for concurrent use.
type Pool struct {
	opts  []grpc.DialOption
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// NewPool returns an empty pool dialling with opts.
func NewPool(opts ...grpc.DialOption) *Pool {
	return &Pool{opts: opts, conns: map[string]*grpc.ClientConn{}}
}

// Conn returns addr's connection, creating it (grpc.NewClient does not
// connect) on first use.
func (p *Pool) Conn(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr, p.opts...)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return c, nil
}

// Close closes every connection.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for addr, c := range p.conns {
		errs = append(errs, c.Close())
		delete(p.conns, addr)
	}
	return errors.Join(errs...)
}
