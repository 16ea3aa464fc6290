package pki

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
)

// PeerCheck decides whether a verified peer identity may connect at all
// (e.g. only masters on the Raft port). nil accepts every GIN identity.
type PeerCheck func(Identity) error

// RequireRole accepts only peers of one of roles.
func RequireRole(roles ...Role) PeerCheck {
	return func(id Identity) error {
		for _, r := range roles {
			if id.Role == r {
				return nil
			}
		}
		return fmt.Errorf("peer %s: role %s is not accepted here (want %v)", id, id.Role, roles)
	}
}

// ServerConfig is the TLS configuration of a listener: TLS 1.3 only, a
// client certificate signed by the current CA required (RequireAndVerify),
// carrying one GIN identity that check accepts. The CA pool and the key
// pair are taken from src at every handshake, so rotated files take effect
// for new connections without a restart.
func ServerConfig(src *Source, check PeerCheck) *tls.Config {
	return ServerConfigDenying(src, check, nil)
}

// ServerConfigDenying is ServerConfig that also refuses, in the handshake,
// a client certificate whose serial is on deny (consulted at every
// handshake, so an entry takes effect for the next connection).
func ServerConfigDenying(src *Source, check PeerCheck, deny DenyList) *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS13}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		pool, pair := src.current()
		return &tls.Config{
			MinVersion:   tls.VersionTLS13,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    pool,
			Certificates: []tls.Certificate{*pair},
			VerifyConnection: func(cs tls.ConnectionState) error {
				return checkPeer(cs, check, deny)
			},
		}, nil
	}
	return base
}

// ClientConfig is the TLS configuration of a dialer: TLS 1.3 only, the
// current key pair presented, and the server verified against the current
// CA pool, the dialled host name (or IP; not checked when the connection's
// ServerName is empty, as on the Raft port) and check (callers pass
// RequireRole(RoleMaster): every GIN server is a master). Verification is
// done in VerifyConnection rather than by crypto/tls because a tls.Config's
// RootCAs is fixed while the CA file may change.
func ClientConfig(src *Source, check PeerCheck) *tls.Config {
	return ClientConfigDenying(src, check, nil)
}

// ClientConfigDenying is ClientConfig that also refuses a server
// certificate whose serial is on deny.
func ClientConfigDenying(src *Source, check PeerCheck, deny DenyList) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The chain is verified below, against the CA as it is now.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return src.Certificate(), nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return ErrNoPeerCertificate
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			chains, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
				Roots: src.Pool(), Intermediates: inter, DNSName: cs.ServerName,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if err != nil {
				return fmt.Errorf("server certificate: %w", err)
			}
			cs.VerifiedChains = chains
			return checkPeer(cs, check, deny)
		},
	}
}

func checkPeer(cs tls.ConnectionState, check PeerCheck, deny DenyList) error {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return ErrNoPeerCertificate
	}
	id, err := IdentityFromCert(cs.VerifiedChains[0][0])
	if err != nil {
		return err
	}
	if err := CheckDenied(deny, cs.VerifiedChains[0][0]); err != nil {
		return err
	}
	if check != nil {
		return check(id)
	}
	return nil
}

// PeerIdentity is the identity of a connection's verified peer certificate.
func PeerIdentity(cs tls.ConnectionState) (Identity, error) {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return Identity{}, ErrNoPeerCertificate
	}
	return IdentityFromCert(cs.VerifiedChains[0][0])
}
