package raft

import (
	"log/slog"
	"net"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
)

// TestPreAuthBounds: slots are taken without waiting; a stranger address
// holds at most perSource, strangers together at most their pool, and
// members' addresses have a pool of their own that strangers never touch.
func TestPreAuthBounds(t *testing.T) {
	member := net.ParseIP("10.0.0.1")
	isMember := func(ip net.IP) bool { return ip.Equal(member) }
	addr := func(ip string, port int) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: port} }
	p := newPreAuth(2, 5, 3, 5*time.Second, 2*time.Second)
	var held []func()
	take := func(ip string, want bool, wantTimeout time.Duration) {
		t.Helper()
		release, timeout, ok := p.admit(addr(ip, 40000+len(held)), isMember)
		if ok != want {
			t.Fatalf("admit from %s: %v, want %v (held %d)", ip, ok, want, len(held))
		}
		if ok {
			if timeout != wantTimeout {
				t.Fatalf("admit from %s: deadline %s, want %s", ip, timeout, wantTimeout)
			}
			held = append(held, release)
		}
	}
	for range 3 {
		take("10.0.0.9", true, 2*time.Second)
	}
	take("10.0.0.9", false, 0) // its per-source bound
	take("10.0.0.8", true, 2*time.Second)
	take("10.0.0.7", true, 2*time.Second)
	take("10.0.0.6", false, 0) // the strangers' pool is full
	take("10.0.0.1", true, 5*time.Second)
	take("10.0.0.1", true, 5*time.Second)
	take("10.0.0.1", false, 0) // the members' pool is full
	if got := p.refused(); got != (PreAuthRefused{Source: 1, Busy: 2}) {
		t.Fatalf("refused %+v, want 1 by source and 2 busy", got)
	}
	for _, r := range held {
		r()
	}
	if p.strangers.InFlight() != 0 || len(p.members) != 0 {
		t.Fatalf("after release: %d stranger and %d member slots held", p.strangers.InFlight(), len(p.members))
	}
	take("10.0.0.9", true, 2*time.Second) // free again
}

// TestRaftPortFloodDoesNotStarveMembers: 300 connections from a stranger
// address that send half a TLS record and hold it; a member dialling from
// its configured address completes its handshake meanwhile (before the
// bounds, the flood took every handshake slot and Accept waited for them,
// so the member waited for the flood's deadlines).
func TestRaftPortFloodDoesNotStarveMembers(t *testing.T) {
	p := newRaftPKI(t)
	quiet := slog.New(slog.DiscardHandler)
	layer, err := newTLSLayer("127.0.0.1:0", nil, p.source(t, master("m1")), nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer layer.Close()
	go func() { // the transport's side: take what is accepted
		for {
			c, err := layer.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	peer, err := newTLSLayer("127.0.0.1:0", nil, p.source(t, master("m2")), nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	conf := hraft.Configuration{Servers: []hraft.Server{
		{ID: "m1", Address: hraft.ServerAddress(layer.Addr().String())},
		{ID: "m2", Address: hraft.ServerAddress(peer.Addr().String())},
	}}
	layer.guard.setMembership(func() (hraft.Configuration, bool) { return conf, true })
	peer.guard.setMembership(func() (hraft.Configuration, bool) { return conf, true })

	// The flood, from 127.0.0.2 (loopback, another address than the
	// members' 127.0.0.1): a TLS handshake record header announcing 512
	// bytes, then 100 of them.
	halfRecord := append([]byte{0x16, 0x03, 0x01, 0x02, 0x00}, make([]byte, 100)...)
	dialer := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			_ = c.Close()
		}
	}()
	for range 300 {
		c, err := dialer.Dial("tcp", layer.Addr().String())
		if err != nil {
			t.Fatalf("flood dial: %v", err)
		}
		_, _ = c.Write(halfRecord)
		flood = append(flood, c)
	}
	start := time.Now()
	c, err := peer.Dial(hraft.ServerAddress(layer.Addr().String()), 10*time.Second)
	if err != nil {
		t.Fatalf("a member's dial under the flood: %v (after %s)", err, time.Since(start))
	}
	_ = c.Close()
	if got := layer.admit.refused().Source; got < 300-maxHandshakesPerSource {
		t.Fatalf("the flood's connections closed by the per-source bound: %d, want at least %d", got, 300-maxHandshakesPerSource)
	}
	t.Logf("member's handshake under a 300-connection flood: %s", time.Since(start))
}
