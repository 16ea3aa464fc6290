package preauth

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/credentials"

	"github.com/gin-topology/gin/internal/ratelog"
)

// Why a connection was refused (the reason label of the metrics).
const (
	// ReasonSource: its address already held PerSource connections
	// before authentication.
	ReasonSource = "source"
	// ReasonPrefix: its address prefix (IPv4 /24, IPv6 /64) already held
	// PrefixFactor × PerSource connections: many addresses of one network
	// (40 sources × 256 connections took every slot) count as one.
	ReasonPrefix = "prefix"
	// ReasonBusy: all Total slots were taken.
	ReasonBusy = "busy"
)

// PrefixFactor is how many sources' worth of connections one address
// prefix may hold before authentication: a /24 of agents reconnecting at
// once holds one handshake each, far below it.
const PrefixFactor = 4

// Log bounds of the refusal lines (a token bucket): anyone who reaches
// the port can cause one per connection.
const (
	refusedLogRate  = 1
	refusedLogBurst = 5
)

// ErrRefused is the error of a handshake refused by a Limiter.
var ErrRefused = errors.New("preauth: too many connections before authentication")

// Limiter counts the connections before authentication of one port.
// Invariants: inFlight[a] <= perSource for every address a,
// inPrefix[p] <= perPrefix for every prefix p, the sum of inFlight <=
// total, and Admit never waits.
type Limiter struct {
	port                        string
	perSource, perPrefix, total int
	log                         *slog.Logger
	refusedLog                  *ratelog.Bucket

	mu       sync.Mutex
	inFlight map[string]int // source IP → connections held
	inPrefix map[string]int // source prefix → connections held
	held     int

	refusedSource, refusedPrefix, refusedBusy atomic.Uint64

	httpMu  sync.Mutex
	httpRel map[net.Conn]func() // ConnState: connections before their first request
}

// New is a Limiter for port (named in logs) admitting at most perSource
// connections of one source address, PrefixFactor × perSource of one
// address prefix (IPv4 /24, IPv6 /64; at most total), total of all,
// before authentication; both must be positive.
func New(port string, perSource, total int, log *slog.Logger) (*Limiter, error) {
	if perSource <= 0 || total <= 0 {
		return nil, fmt.Errorf("preauth: %s: bounds must be positive (per source %d, total %d)", port, perSource, total)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Limiter{port: port, perSource: perSource, perPrefix: min(total, PrefixFactor*perSource), total: total, log: log,
		refusedLog: ratelog.New(refusedLogRate, refusedLogBurst, nil),
		inFlight:   map[string]int{}, inPrefix: map[string]int{}, httpRel: map[net.Conn]func(){}}, nil
}

// Admit takes a slot for a connection from remote without waiting. ok is
// false when there is none (the caller closes the connection); release
// gives the slot back and may be called more than once.
func (l *Limiter) Admit(remote net.Addr) (release func(), ok bool) {
	key, prefix := sourceKey(remote)
	l.mu.Lock()
	reason := ""
	switch {
	case l.inFlight[key] >= l.perSource:
		reason = ReasonSource
	case l.held >= l.total:
		reason = ReasonBusy
	case l.inPrefix[prefix] >= l.perPrefix:
		reason = ReasonPrefix
	}
	if reason != "" {
		l.mu.Unlock()
		l.refused(remote, reason)
		return nil, false
	}
	l.inFlight[key]++
	l.inPrefix[prefix]++
	l.held++
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			if l.inFlight[key]--; l.inFlight[key] <= 0 {
				delete(l.inFlight, key)
			}
			if l.inPrefix[prefix]--; l.inPrefix[prefix] <= 0 {
				delete(l.inPrefix, prefix)
			}
			l.held--
			l.mu.Unlock()
		})
	}, true
}

func (l *Limiter) refused(remote net.Addr, reason string) {
	switch reason {
	case ReasonSource:
		l.refusedSource.Add(1)
	case ReasonPrefix:
		l.refusedPrefix.Add(1)
	default:
		l.refusedBusy.Add(1)
	}
	if ok, skipped := l.refusedLog.Allow(); ok {
		l.log.Warn("connection refused before authentication", slog.String("port", l.port), slog.String("peer", remote.String()),
			slog.String("reason", reason), slog.Int("per_source", l.perSource), slog.Int("per_prefix", l.perPrefix), slog.Int("total", l.total), slog.Uint64("suppressed", skipped))
	}
}

// Refused are the connections refused so far, by reason.
type Refused struct{ Source, Prefix, Busy uint64 }

// Refused reads the counters.
func (l *Limiter) Refused() Refused {
	return Refused{Source: l.refusedSource.Load(), Prefix: l.refusedPrefix.Load(), Busy: l.refusedBusy.Load()}
}

// InFlight is the number of connections holding a slot now.
func (l *Limiter) InFlight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

// sourceKey is the IP of remote and its prefix, an IPv4 /24 or an IPv6
// /64 (both its whole string when it has no IP).
func sourceKey(a net.Addr) (ip, prefix string) {
	var addr net.IP
	if ta, ok := a.(*net.TCPAddr); ok {
		addr = ta.IP
	} else if host, _, err := net.SplitHostPort(a.String()); err == nil {
		addr = net.ParseIP(host)
		if addr == nil {
			return host, host
		}
	} else {
		return a.String(), a.String()
	}
	if v4 := addr.To4(); v4 != nil {
		return v4.String(), v4.Mask(net.CIDRMask(24, 32)).String() + "/24"
	}
	return addr.String(), addr.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// Credentials is inner whose ServerHandshake holds a slot of l for its
// duration: a connection without one is refused before its first byte is
// read. grpc-go runs each connection's handshake on a goroutine of its
// own, so refusing never stalls its accept loop; the handshake's deadline
// is grpc.ConnectionTimeout's.
func (l *Limiter) Credentials(inner credentials.TransportCredentials) credentials.TransportCredentials {
	return &limitedCreds{TransportCredentials: inner, l: l}
}

type limitedCreds struct {
	credentials.TransportCredentials
	l *Limiter
}

func (c *limitedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	release, ok := c.l.Admit(raw.RemoteAddr())
	if !ok {
		return nil, nil, fmt.Errorf("%w (%s from %s)", ErrRefused, c.l.port, raw.RemoteAddr())
	}
	defer release()
	return c.TransportCredentials.ServerHandshake(raw)
}

func (c *limitedCreds) Clone() credentials.TransportCredentials {
	return &limitedCreds{TransportCredentials: c.TransportCredentials.Clone(), l: c.l}
}

// GuardHTTP makes srv hold a slot of l for each connection from accept
// until its first request reaches the handler (or its StateActive, or its
// close), closing a connection without one. The handler releases too
// because net/http reports no StateActive for an HTTP/2 connection. The
// handshake's deadline is srv's (ReadHeaderTimeout bounds a TLS handshake
// too). Call it before serving; it keeps srv's own hooks.
func (l *Limiter) GuardHTTP(srv *http.Server) {
	nextState, nextCtx, h := srv.ConnState, srv.ConnContext, srv.Handler
	if h == nil {
		h = http.DefaultServeMux
	}
	if srv.ErrorLog == nil {
		// net/http logs a line for every failed TLS handshake, the
		// refused ones included: anyone who reaches the port could write
		// them by the thousand.
		srv.ErrorLog = log.New(&boundedWriter{l: l, b: ratelog.New(refusedLogRate, refusedLogBurst, nil)}, "", 0)
	}
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if nextCtx != nil {
			ctx = nextCtx(ctx, c)
		}
		return context.WithValue(ctx, connKey{}, c)
	}
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			release, ok := l.Admit(c.RemoteAddr())
			if !ok {
				// net/http's serve goroutine then fails its first read and
				// reports StateClosed.
				_ = c.Close()
				break
			}
			l.httpMu.Lock()
			l.httpRel[c] = release
			l.httpMu.Unlock()
		case http.StateActive, http.StateClosed, http.StateHijacked:
			l.releaseHTTP(c)
		}
		if nextState != nil {
			nextState(c, st)
		}
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
			l.releaseHTTP(c)
		}
		h.ServeHTTP(w, r)
	})
}

// boundedWriter writes net/http's error lines to the Limiter's logger, at
// most as many as its token bucket lets through.
type boundedWriter struct {
	l *Limiter
	b *ratelog.Bucket
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if ok, skipped := w.b.Allow(); ok {
		w.l.log.Warn("http server error", slog.String("port", w.l.port), slog.String("err", strings.TrimSpace(string(p))), slog.Uint64("suppressed", skipped))
	}
	return len(p), nil
}

// connKey carries a request's connection in its context (GuardHTTP).
type connKey struct{}

func (l *Limiter) releaseHTTP(c net.Conn) {
	l.httpMu.Lock()
	release := l.httpRel[c]
	delete(l.httpRel, c)
	l.httpMu.Unlock()
	if release != nil {
		release()
	}
}
