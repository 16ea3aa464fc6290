package dialerr

import (
	"regexp"
	"strings"
)

// Cause is why a client could not talk to a master.
type Cause int

const (
	// Other: none of the causes below (a timeout, a reset, a refusal).
	Other Cause = iota
	// TLSRequired: the client dialled plaintext and the master serves
	// mutual TLS; the TLS handshake fails on the master's side, which
	// closes the connection before any HTTP/2 frame.
	TLSRequired
	// NotTLS: the client dialled TLS and the port speaks plaintext (a
	// master started with --insecure, or its HTTP port).
	NotTLS
	// HTTPPort: the address answers HTTP/1.1 (the master's /metrics port).
	HTTPPort
	// Refused: nothing listens at the address.
	Refused
	// NoSuchHost: the host name does not resolve.
	NoSuchHost
	// WrongCA: the TLS handshake failed on a certificate of another CA:
	// the master's is not signed by the client's --tls-ca, or the master
	// does not know the CA of the client's certificate.
	WrongCA
	// Expired: the TLS handshake failed on a certificate outside its
	// validity dates: the master's (the client's own check) or the
	// client's (the master's alert).
	Expired
)

var (
	// A TLS server drops a connection whose first bytes are not a TLS
	// record: the client reads EOF, or a reset when the server closed with
	// the rest of the client's preface unread.
	tlsRequired = regexp.MustCompile(`error reading server preface: (EOF|.*connection reset by peer)|connection closed before server preface`)
	notTLS      = regexp.MustCompile(`first record does not look like a TLS handshake`)
	// Go's crypto/tls words for both sides: the client's own check of the
	// master's chain, and the master's alert about the client's.
	expired  = regexp.MustCompile(`certificate has expired or is not yet valid|tls: expired certificate`)
	wrongCA  = regexp.MustCompile(`certificate signed by unknown authority|tls: unknown certificate authority`)
	httpPort = regexp.MustCompile(`frame header looked like an HTTP/1\.1 header|server preface|malformed HTTP`)
)

// Classify is the Cause that the error text msg (a status message or a
// whole error) reports. The checks go from the most precise: a plaintext
// dial of a TLS port and one of the HTTP port both mention the server
// preface.
func Classify(msg string) Cause {
	switch {
	case expired.MatchString(msg):
		return Expired
	case wrongCA.MatchString(msg):
		return WrongCA
	case tlsRequired.MatchString(msg):
		return TLSRequired
	case notTLS.MatchString(msg):
		return NotTLS
	case httpPort.MatchString(msg):
		return HTTPPort
	case strings.Contains(msg, "connection refused"):
		return Refused
	case strings.Contains(msg, "no such host"):
		return NoSuchHost
	}
	return Other
}

func (c Cause) String() string {
	switch c {
	case TLSRequired:
		return "TLSRequired"
	case NotTLS:
		return "NotTLS"
	case HTTPPort:
		return "HTTPPort"
	case Refused:
		return "Refused"
	case NoSuchHost:
		return "NoSuchHost"
	case WrongCA:
		return "WrongCA"
	case Expired:
		return "Expired"
	}
	return "Other"
}
