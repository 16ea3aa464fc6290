package authz

import (
	"context"
	"crypto/x509"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/gin-topology/gin/internal/pki"
)

// The deny list at the gRPC listener: Authorize refuses a certificate whose
// serial is on it (UNAUTHENTICATED naming the serial), and Credentials
// wraps the listener's transport credentials so that the connections of a
// certificate denied later (an agent session opened before, a watch) are
// closed by EndDenied when the entry commits. A connection carries one
// client certificate, so closing it ends exactly that certificate's calls
// and streams; the client reconnects and is refused in Authorize.

// Credentials returns inner (the listener's mTLS credentials) with every
// accepted connection recorded under its client certificate's serial, for
// EndDenied.
func (a *Authorizer) Credentials(inner credentials.TransportCredentials) credentials.TransportCredentials {
	return &trackingCreds{TransportCredentials: inner, set: &a.conns}
}

type trackingCreds struct {
	credentials.TransportCredentials
	set *pki.Conns
}

func (t *trackingCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, info, err := t.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return c, info, err
	}
	ti, ok := info.(credentials.TLSInfo)
	leaf, lerr := leafOf(ti, ok)
	if lerr != nil {
		return c, info, nil // Authorize refuses its calls
	}
	return t.set.Track(c, pki.FormatSerial(leaf.SerialNumber)), info, nil
}

func (t *trackingCreds) Clone() credentials.TransportCredentials {
	return &trackingCreds{TransportCredentials: t.TransportCredentials.Clone(), set: t.set}
}

// EndDenied closes every tracked connection whose certificate is on the
// deny list now and returns how many it closed. It may wait for TLS
// close_notify writes: call it off the FSM's goroutine.
func (a *Authorizer) EndDenied() int {
	if a.deny == nil {
		return 0
	}
	return len(a.conns.CloseDenied(a.deny))
}

// OpenConns is how many connections Credentials tracks.
func (a *Authorizer) OpenConns() int { return a.conns.Len() }

var errNoLeaf = errors.New("no verified client certificate")

func leafOf(ti credentials.TLSInfo, ok bool) (*x509.Certificate, error) {
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return nil, errNoLeaf
	}
	return ti.State.VerifiedChains[0][0], nil
}

// PeerCertificate is the verified client certificate of the call in ctx.
func PeerCertificate(ctx context.Context) (*x509.Certificate, error) {
	chain, err := PeerChain(ctx)
	if err != nil {
		return nil, err
	}
	return chain[0], nil
}

// PeerChain is the verified chain of the call in ctx: the client
// certificate first, the cluster CA that anchors it last.
func PeerChain(ctx context.Context) ([]*x509.Certificate, error) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return nil, errNoLeaf
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if _, err := leafOf(ti, ok); err != nil {
		return nil, err
	}
	return ti.State.VerifiedChains[0], nil
}
