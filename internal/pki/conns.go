package pki

import (
	"net"
	"sync"
)

// Conns tracks open connections under their peer certificate's serial, so
// that the connections of a certificate denied later can be closed
// (CloseDenied). The gRPC listener (internal/authz) and the Raft TLS
// layer (internal/raft) each keep one. The zero value is ready to use.
type Conns struct {
	mu sync.Mutex
	m  map[*trackedConn]string
}

type trackedConn struct {
	net.Conn
	set  *Conns
	once sync.Once
}

// Close closes the connection and forgets it.
func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.set.mu.Lock()
		delete(c.set.m, c)
		c.set.mu.Unlock()
	})
	return c.Conn.Close()
}

// Track returns conn, whose peer certificate has serial (FormatSerial
// form), wrapped so that it is tracked until closed.
func (s *Conns) Track(conn net.Conn, serial string) net.Conn {
	c := &trackedConn{Conn: conn, set: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[*trackedConn]string{}
	}
	s.m[c] = serial
	return c
}

// CloseDenied closes every tracked connection whose serial is on list now
// and returns the remote addresses of those it closed. Closing a TLS
// connection may wait for its close_notify to be written: call it off
// goroutines that must not block (the FSM's).
func (s *Conns) CloseDenied(list DenyList) []net.Addr {
	if list == nil {
		return nil
	}
	var denied []*trackedConn
	s.mu.Lock()
	for c, serial := range s.m {
		if _, ok := list.Denied(serial); ok {
			denied = append(denied, c)
		}
	}
	s.mu.Unlock()
	addrs := make([]net.Addr, 0, len(denied))
	for _, c := range denied {
		addrs = append(addrs, c.RemoteAddr())
		_ = c.Close()
	}
	return addrs
}

// Len is how many connections are tracked.
func (s *Conns) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
