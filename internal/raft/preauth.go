package raft

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/gin-topology/gin/internal/preauth"
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
//     of them together at most strangers, each for the short deadline:
//     the count the gRPC and HTTP ports keep too (internal/preauth).
//
// A member is known by its source address: a master dials from the
// address the configuration names (one interface per host). A stranger on
// a member's host shares that member's pool, which is bounded too.
type preAuth struct {
	members         chan struct{}
	strangers       *preauth.Limiter
	memberTimeout   time.Duration
	strangerTimeout time.Duration

	refusedMembers atomic.Uint64 // the members' pool was full
}

func newPreAuth(members, strangers, perSource int, memberTimeout, strangerTimeout time.Duration) *preAuth {
	// No logger: the Raft port's refusals are counted, not logged
	// (gin_master_raft_connections_refused_total).
	l, err := preauth.New("raft", perSource, strangers, nil)
	if err != nil {
		panic(err) // constant bounds
	}
	return &preAuth{members: make(chan struct{}, members), strangers: l, memberTimeout: memberTimeout, strangerTimeout: strangerTimeout}
}

// admit takes a handshake slot for a connection from remote, without
// waiting: ok is false when there is none (the caller closes it).
// isMember reports whether an IP is a member's.
func (p *preAuth) admit(remote net.Addr, isMember func(net.IP) bool) (release func(), timeout time.Duration, ok bool) {
	if ip := addrIP(remote); ip != nil && isMember(ip) {
		select {
		case p.members <- struct{}{}:
			return func() { <-p.members }, p.memberTimeout, true
		default:
			p.refusedMembers.Add(1)
			return nil, 0, false
		}
	}
	release, ok = p.strangers.Admit(remote)
	if !ok {
		return nil, 0, false
	}
	return release, p.strangerTimeout, true
}

// refused counts the refusals of both pools.
func (p *preAuth) refused() PreAuthRefused {
	r := p.strangers.Refused()
	// A prefix refusal is a source refusal here: a stranger's network.
	return PreAuthRefused{Source: r.Source + r.Prefix, Busy: r.Busy + p.refusedMembers.Load()}
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
