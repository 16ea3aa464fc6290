package raft

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"

	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/ratelog"
	"github.com/gin-topology/gin/internal/state"
)

// Bounds of the TLS stream layer.
const (
	// raftHandshakeTimeout bounds one TLS handshake from a member's
	// address (see preauth.go).
	raftHandshakeTimeout = 5 * time.Second
	// strangerHandshakeTimeout bounds one TLS handshake from any other
	// address: a TLS 1.3 handshake takes milliseconds, so a peer that has
	// not finished in this time holds its slot for nothing.
	strangerHandshakeTimeout = 2 * time.Second
	// maxRaftHandshakes bounds the handshakes from strangers in flight;
	// a connection past it is closed at once (preauth.go).
	maxRaftHandshakes = 64
	// maxMemberHandshakes bounds the handshakes from members' addresses
	// in flight, in a pool of their own.
	maxMemberHandshakes = 32
	// maxHandshakesPerSource bounds the handshakes one stranger address
	// holds in flight.
	maxHandshakesPerSource = 4
	// refusedLogRate and refusedLogBurst bound the log lines about refused
	// handshakes (a token bucket): the first ones, then one a second that
	// says how many were left out ("suppressed").
	refusedLogRate  = 1
	refusedLogBurst = 10
)

// tlsLayer is a hashicorp/raft StreamLayer over TLS 1.3 that accepts and
// dials only peers presenting a master certificate of the cluster CA whose
// serial is not on the replicated deny list (the Raft transport itself
// trusts whatever it reads). When a serial is denied, the connections
// already open with that certificate are closed (endDenied). Handshakes run in their
// own goroutines with a deadline, as etcd's TLS listener does, so one slow
// or hostile peer cannot stall Accept; Accept returns only verified
// connections, and an error only once the layer is closed.
type tlsLayer struct {
	lis       net.Listener
	advertise net.Addr
	server    *tls.Config
	src       *pki.Source
	log       *slog.Logger
	deny      pki.DenyList
	// guard checks every inbound RPC against the Raft configuration
	// (rpcguard.go); its membership is set once Raft runs.
	guard *rpcGuard
	// admit bounds the handshakes before authentication (preauth.go).
	admit *preAuth
	// refusedLog bounds the lines about refused handshakes: anyone who
	// reaches the Raft port can cause one per connection.
	refusedLog *ratelog.Bucket

	// open are the verified connections handed to the transport, by
	// their peer's certificate serial (for endDenied).
	open pki.Conns

	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

// caCheckInterval is how often the Raft layer looks for changed TLS files.
const caCheckInterval = 10 * time.Second

// watchFiles calls changed (the transport's CloseStreams) whenever src
// reloaded its files, so pooled Raft connections made under the old CA or
// certificate are redialled under the new ones, until the layer closes.
func (l *tlsLayer) watchFiles(src *pki.Source, every time.Duration, changed func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		last := src.Generation()
		for {
			select {
			case <-l.closed:
				return
			case <-t.C:
				if g := src.Generation(); g != last {
					last = g
					l.log.Info("TLS files changed: closing pooled Raft connections so they are redialled")
					changed()
				}
			}
		}
	}()
}

// track records a verified connection under its peer's serial.
func (l *tlsLayer) track(tc *tls.Conn) net.Conn {
	return l.open.Track(tc, peerSerial(tc))
}

func peerSerial(tc *tls.Conn) string {
	cs := tc.ConnectionState()
	if len(cs.PeerCertificates) > 0 {
		return pki.FormatSerial(cs.PeerCertificates[0].SerialNumber)
	}
	return ""
}

// endDenied closes every open connection whose peer certificate is on the
// deny list now (called when entries are added); the transport redials
// and the handshake refuses the certificate.
func (l *tlsLayer) endDenied() {
	for _, addr := range l.open.CloseDenied(l.deny) {
		l.log.Warn("closed a Raft connection: its peer's certificate is denied", "peer", addr.String())
	}
}

// newTLSLayer listens on bind; deny (nil: none) is consulted at every
// handshake, in both directions.
func newTLSLayer(bind string, advertise net.Addr, src *pki.Source, deny pki.DenyList, log *slog.Logger) (*tlsLayer, error) {
	lis, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = lis.Addr()
	}
	masters := pki.RequireRole(pki.RoleMaster)
	l := &tlsLayer{
		lis: lis, advertise: advertise, log: log, deny: deny,
		refusedLog: ratelog.New(refusedLogRate, refusedLogBurst, nil),
		guard:      newRPCGuard(log),
		admit:      newPreAuth(maxMemberHandshakes, maxRaftHandshakes, maxHandshakesPerSource, raftHandshakeTimeout, strangerHandshakeTimeout),
		server:     pki.ServerConfigDenying(src, masters, deny),
		src:        src,
		conns:      make(chan net.Conn), closed: make(chan struct{}),
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

func (l *tlsLayer) acceptLoop() {
	defer l.wg.Done()
	for {
		c, err := l.lis.Accept()
		if err != nil {
			select {
			case <-l.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			l.log.Warn("raft listener accept failed", "err", err)
			select {
			case <-l.closed:
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		// Never blocks: a connection without a slot is closed here, so a
		// flood cannot stall Accept for the members behind it.
		release, timeout, ok := l.admit.admit(c.RemoteAddr(), l.guard.memberHost)
		if !ok {
			_ = c.Close()
			continue
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer release()
			l.handshake(c, timeout)
		}()
	}
}

func (l *tlsLayer) handshake(c net.Conn, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tc := tls.Server(c, l.server)
	_ = c.SetDeadline(time.Now().Add(timeout))
	if err := tc.HandshakeContext(ctx); err != nil {
		if ok, skipped := l.refusedLog.Allow(); ok {
			l.log.Warn("raft connection refused in the TLS handshake (only master certificates of the cluster CA may speak Raft)",
				"peer", c.RemoteAddr().String(), "err", err, "suppressed", skipped)
		}
		_ = c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	peer, err := pki.PeerIdentity(tc.ConnectionState())
	if err != nil { // the server config checked the role: cannot happen
		_ = c.Close()
		return
	}
	tracked := newGuardedConn(l.track(tc), l.guard, peer, peerSerial(tc))
	select {
	case l.conns <- tracked:
	case <-l.closed:
		_ = tracked.Close()
	}
}

// Accept returns the next verified connection.
func (l *tlsLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close stops accepting; connections already handed out stay open.
func (l *tlsLayer) Close() error {
	var err error
	l.once.Do(func() {
		close(l.closed)
		err = l.lis.Close()
		l.wg.Wait()
	})
	return err
}

// Addr is the advertised address (what peers dial).
func (l *tlsLayer) Addr() net.Addr { return l.advertise }

// Dial connects to a peer and requires a master certificate of the cluster
// CA; when the configuration has a server at address, the certificate must
// name that server (another master answering there is refused). The host
// name is not checked: Raft addresses are resolved IPs that certificates
// rarely name; the name is what binds the peer to the configuration.
func (l *tlsLayer) Dial(address hraft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if _, _, err := net.SplitHostPort(string(address)); err != nil {
		return nil, fmt.Errorf("raft dial %s: %w", address, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", string(address))
	if err != nil {
		return nil, err
	}
	// No ServerName: chain, role and the configuration's name for address.
	tc := tls.Client(c, pki.ClientConfigDenying(l.src, l.guard.dialCheck(address), l.deny))
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("raft dial %s: TLS: %w", address, err)
	}
	return l.track(tc), nil
}

// newTransport is the Raft network transport: plain TCP, or the TLS layer
// when cfg.TLS is set, refusing the certificates store's deny list names.
// With TLS the returned guard checks every inbound RPC against the
// configuration once its membership is set; nil for plain TCP.
func newTransport(cfg Config, adv net.Addr, store *state.Store, hlog hclog.Logger, log *slog.Logger) (*hraft.NetworkTransport, *rpcGuard, *preAuth, error) {
	if cfg.TLS == nil {
		t, err := hraft.NewTCPTransportWithLogger(cfg.Bind, adv, 3, 10*time.Second, hlog)
		return t, nil, nil, err
	}
	layer, err := newTLSLayer(cfg.Bind, adv, cfg.TLS, store, log)
	if err != nil {
		return nil, nil, nil, err
	}
	if adv == nil {
		if ta, ok := layer.lis.Addr().(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
			_ = layer.Close()
			return nil, nil, nil, errors.New("local bind address is not advertisable")
		}
	}
	trans := hraft.NewNetworkTransportWithConfig(&hraft.NetworkTransportConfig{
		Stream: layer, MaxPool: 3, Timeout: 10 * time.Second, Logger: hlog,
	})
	layer.watchFiles(cfg.TLS, caCheckInterval, trans.CloseStreams)
	// Closing a connection may wait for its TLS close_notify to be
	// written: never on the FSM's goroutine.
	store.OnDeny(func() { go layer.endDenied() })
	return trans, layer.guard, layer.admit, nil
}
