package raft

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// preAuth bounds what anyone who reaches the Raft port can hold before
// authentication (the TLS handshake), so that strangers never starve the
// members. Invariants:
//   - the accept loop never waits for a slot: a connection without one is
//     closed at once, so connections from members are accepted however
//     many strangers connect;
//   - connections from the address of a server of the Raft configuration
//     (its host, as the configuration names it) take handshake slots from
//     a pool of their own, with the longer deadline;
//   - every other address holds at most perSource handshakes at once, all
//     of them together at most strangers, each for the short deadline.
//
// A member is known by its source address: a master dials from the
// address the configuration names (one interface per host). A stranger on
// a member's host shares that member's pool, which is bounded too.
type preAuth struct {
	members, strangers chan struct{}
	perSource          int
	memberTimeout      time.Duration
	strangerTimeout    time.Duration

	mu       sync.Mutex
	inFlight map[string]int // stranger address → handshakes held

	refusedSource, refusedBusy atomic.Uint64
}

func newPreAuth(members, strangers, perSource int, memberTimeout, strangerTimeout time.Duration) *preAuth {
	return &preAuth{members: make(chan struct{}, members), strangers: make(chan struct{}, strangers), perSource: perSource,
		memberTimeout: memberTimeout, strangerTimeout: strangerTimeout, inFlight: map[string]int{}}
}

// admit takes a handshake slot for a connection from remote, without
// waiting: ok is false when there is none (the caller closes it).
// isMember reports whether an IP is a member's.
func (p *preAuth) admit(remote net.Addr, isMember func(net.IP) bool) (release func(), timeout time.Duration, ok bool) {
	ip := addrIP(remote)
	if ip != nil && isMember(ip) {
		select {
		case p.members <- struct{}{}:
			return func() { <-p.members }, p.memberTimeout, true
		default:
			p.refusedBusy.Add(1)
			return nil, 0, false
		}
	}
	key := ""
	if ip != nil {
		key = ip.String()
	}
	p.mu.Lock()
	if p.inFlight[key] >= p.perSource {
		p.mu.Unlock()
		p.refusedSource.Add(1)
		return nil, 0, false
	}
	select {
	case p.strangers <- struct{}{}:
	default:
		p.mu.Unlock()
		p.refusedBusy.Add(1)
		return nil, 0, false
	}
	p.inFlight[key]++
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		if p.inFlight[key]--; p.inFlight[key] <= 0 {
			delete(p.inFlight, key)
		}
		p.mu.Unlock()
		<-p.strangers
	}, p.strangerTimeout, true
}

func addrIP(a net.Addr) net.IP {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return nil
	}
	return net.ParseIP(host)
}

// memberHost reports whether ip is the host of a server of the latest
// configuration (false before Raft runs).
func (g *rpcGuard) memberHost(ip net.IP) bool {
	mp := g.members.Load()
	if mp == nil {
		return false
	}
	conf, ok := (*mp)()
	if !ok {
		return false
	}
	for _, s := range conf.Servers {
		host, _, err := net.SplitHostPort(string(s.Address))
		if err != nil {
			continue
		}
		if sip := net.ParseIP(host); sip != nil && sip.Equal(ip) {
			return true
		}
	}
	return false
}

// PreAuthRefused are the connections the Raft port closed before their
// TLS handshake: source (a stranger address held its most handshakes) and
// busy (every slot of its pool taken).
type PreAuthRefused struct{ Source, Busy uint64 }
