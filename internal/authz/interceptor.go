package authz

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/gin-topology/gin/internal/apierr"
	"github.com/gin-topology/gin/internal/pki"
)

// DefaultMaxStreamsPerIdentity bounds the streams (agent sessions,
// watches) one certificate identity holds open at once from one host.
const DefaultMaxStreamsPerIdentity = 64

// StreamHostsPerIdentity is how many hosts' worth of streams one identity
// holds in all (DefaultMaxStreamsPerIdentity × this): an identity that
// many hosts share (the reader certificate of every job) is bounded per
// host first, so one job's 64 watches cannot lock every other job out
// (issue #21), and in all, so that the certificate cannot hold streams
// without end.
const StreamHostsPerIdentity = 16

// Authorizer checks calls against a table (Table() in the masters) and
// bounds the streams each identity holds open.
type Authorizer struct {
	table      map[string][]pki.Role
	maxStreams int
	deny       pki.DenyList // nil: nothing denied
	conns      pki.Conns    // the listener's connections (Credentials)
	heavy      *heavyReads  // HeavyReads at once per identity

	mu      sync.Mutex
	streams map[streamKey]int    // open streams per identity and host
	total   map[pki.Identity]int // open streams per identity
}

// streamKey is an identity on one host (the peer's IP address).
type streamKey struct {
	id   pki.Identity
	host string
}

// New returns an Authorizer over table with DefaultMaxStreamsPerIdentity.
func New(table map[string][]pki.Role) *Authorizer {
	return NewWithLimit(table, DefaultMaxStreamsPerIdentity)
}

// NewWithLimit returns an Authorizer over table allowing each identity at
// most maxStreams open streams from one host and StreamHostsPerIdentity
// times that in all (further ones: RESOURCE_EXHAUSTED).
func NewWithLimit(table map[string][]pki.Role, maxStreams int) *Authorizer {
	return &Authorizer{table: table, maxStreams: maxStreams, streams: map[streamKey]int{}, total: map[pki.Identity]int{},
		heavy: newHeavyReads(DefaultMaxHeavyReadsPerIdentity)}
}

// acquire takes a stream of k, or says which bound it is past ("" when
// taken).
func (a *Authorizer) acquire(k streamKey) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.streams[k] >= a.maxStreams:
		return fmt.Sprintf("%s already holds %d open streams from %s, the most one identity may from one host", k.id, a.maxStreams, k.host)
	case a.total[k.id] >= a.maxStreams*StreamHostsPerIdentity:
		return fmt.Sprintf("%s already holds %d open streams, the most one identity may", k.id, a.maxStreams*StreamHostsPerIdentity)
	}
	a.streams[k]++
	a.total[k.id]++
	return ""
}

func (a *Authorizer) release(k streamKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.streams[k]--; a.streams[k] <= 0 {
		delete(a.streams, k)
	}
	if a.total[k.id]--; a.total[k.id] <= 0 {
		delete(a.total, k.id)
	}
}

// peerHost is the IP address of the call's peer ("" when unknown).
func peerHost(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(p.Addr.String()); err == nil {
		return host
	}
	return p.Addr.String()
}

type identityKey struct{}

// WithDenyList makes a refuse every certificate whose serial is on list
// (the replicated deny list) and returns a. Set it before serving.
func (a *Authorizer) WithDenyList(list pki.DenyList) *Authorizer {
	a.deny = list
	return a
}

// Identity is the caller's identity, set by the interceptor; ok is false
// when the server runs without TLS (no interceptor).
func Identity(ctx context.Context) (pki.Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(pki.Identity)
	return id, ok
}

// WithIdentity returns ctx carrying id (the interceptor does this).
func WithIdentity(ctx context.Context, id pki.Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// PeerIdentity is the identity of the verified client certificate of the
// call in ctx.
func PeerIdentity(ctx context.Context) (pki.Identity, error) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return pki.Identity{}, status.Error(codes.Unauthenticated, "no client certificate: this master requires mTLS (--tls-ca, --tls-cert, --tls-key)")
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return pki.Identity{}, status.Error(codes.Unauthenticated, "no client certificate: this master requires mTLS (--tls-ca, --tls-cert, --tls-key)")
	}
	id, err := pki.PeerIdentity(ti.State)
	if err != nil {
		return pki.Identity{}, status.Errorf(codes.Unauthenticated, "client certificate: %v", err)
	}
	return id, nil
}

// Authorize returns ctx with the caller's identity, or the refusal:
// Unauthenticated without a verified GIN identity or with a certificate on
// the deny list, PermissionDenied when the method has no row or the role
// is not in it.
func (a *Authorizer) Authorize(ctx context.Context, method string) (context.Context, error) {
	id, err := PeerIdentity(ctx)
	if err != nil {
		return ctx, err
	}
	if a.deny != nil {
		leaf, err := PeerCertificate(ctx)
		if err != nil {
			return ctx, status.Errorf(codes.Unauthenticated, "client certificate: %v", err)
		}
		if err := pki.CheckDenied(a.deny, leaf); err != nil {
			return ctx, status.Error(codes.Unauthenticated, err.Error())
		}
	}
	if id.Role == pki.RoleMaster {
		if id, err = forwardedFor(ctx, id); err != nil {
			return ctx, err
		}
	}
	roles, ok := a.table[method]
	if !ok {
		return ctx, status.Errorf(codes.PermissionDenied, "%s: no role may call this method", method)
	}
	if !slices.Contains(roles, id.Role) {
		return ctx, status.Errorf(codes.PermissionDenied, "%s: %s may not call this method (allowed: %v)", method, id, roles)
	}
	return WithIdentity(ctx, id), nil
}

// ForwardedForKey is the metadata key in which a master that forwards a
// call to the leader names the caller it forwards for (an identity URI,
// as pki.Identity.String spells it). It is honoured only from a master's
// certificate: a master authorized the caller when the call reached it,
// and the leader checks the table against the caller, not the master.
const ForwardedForKey = "gin-forwarded-for"

// forwardedFor is the identity a master forwards a call for, or the
// master's own when it names none.
func forwardedFor(ctx context.Context, master pki.Identity) (pki.Identity, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(ForwardedForKey)
	if len(v) == 0 {
		return master, nil
	}
	u, err := url.Parse(v[0])
	if err == nil {
		var id pki.Identity
		if id, err = pki.ParseIdentity(u); err == nil {
			return id, nil
		}
	}
	return master, status.Errorf(codes.Unauthenticated, "%s forwarded a call for %q: %v", master, v[0], err)
}

// Unary is the unary server interceptor.
func (a *Authorizer) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx, err := a.Authorize(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	id, _ := Identity(ctx)
	release, err := a.heavy.acquire(ctx, id, info.FullMethod)
	if err != nil {
		return nil, err
	}
	defer release()
	return h(ctx, req)
}

// Stream is the stream server interceptor (checked once, when the stream
// opens).
func (a *Authorizer) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, err := a.Authorize(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	id, _ := Identity(ctx)
	k := streamKey{id: id, host: peerHost(ctx)}
	if why := a.acquire(k); why != "" {
		st := status.New(codes.ResourceExhausted, why)
		if wd, err := st.WithDetails(apierr.Info(apierr.ReasonStreamLimit, nil)); err == nil {
			st = wd
		}
		return st.Err()
	}
	defer a.release(k)
	return h(srv, &identityStream{ServerStream: ss, ctx: ctx})
}

type identityStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *identityStream) Context() context.Context { return s.ctx }
