package raft

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-msgpack/v2/codec"
	hraft "github.com/hashicorp/raft"

	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/ratelog"
)

// The Raft RPC guard binds a master certificate to the Raft configuration.
//
// The TLS handshake proves only that the peer holds some master
// certificate of the cluster CA; hashicorp/raft then believes whatever
// server id and address the RPC header claims (a forged AppendEntries
// "from the leader" commits commands, a forged RequestVote with
// LeadershipTransfer unseats the leader). The guard closes that gap on
// every inbound connection, before the transport decodes a byte:
//
// Invariant: an RPC reaches hashicorp/raft only if the peer certificate's
// name N is a server of this server's latest Raft configuration, the RPC's
// header claims id N, and every address it claims (RPCHeader.Addr and the
// deprecated Leader/Candidate fields) is N's address in that
// configuration. A server whose configuration is still empty (fresh, not
// yet bootstrapped or joined) accepts only the peers it expects its first
// configuration from (Node.ExpectPeers: the leader that is adding it, or
// the --bootstrap-expect servers it found), each from the certificate of
// its name claiming that name and the Raft address it announced; with no
// peer expected it accepts none. Any master certificate of the CA could
// otherwise plant a configuration of the waiting server alone, which
// then elects itself and serves an empty cluster under the real cluster
// id.
//
// Mechanism: hashicorp/raft's NetworkTransport reads each request as one
// rpc-type byte and a msgpack map (an InstallSnapshot is followed by Size
// raw bytes), from a bufio.Reader over the connection the StreamLayer
// handed it, and answers only after it decoded the request. guardedConn
// sits under that reader: it decodes the next request itself from a
// recording reader (the msgpack decoder reads exactly one message from an
// io.ByteScanner, as the transport relies on too), checks its claims, and
// only then lets the transport read the recorded bytes verbatim (no
// re-encoding, so nothing of the request can change). A refused request
// is answered with an RPC error naming the refusal and the connection is
// closed; the transport never sees it. The heartbeat fast path is covered
// too: it is decoded from the same stream.

// rpcTypeNames are hashicorp/raft's wire rpc types (net_transport.go: the
// iota order rpcAppendEntries, rpcRequestVote, rpcInstallSnapshot,
// rpcTimeoutNow, rpcRequestPreVote), fixed by its wire protocol.
var rpcTypeNames = [...]string{"AppendEntries", "RequestVote", "InstallSnapshot", "TimeoutNow", "RequestPreVote"}

const (
	rpcAppendEntries   = 0
	rpcInstallSnapshot = 2
)

// maxKeptRecord is the largest request buffer a connection keeps for the
// next request.
const maxKeptRecord = 1 << 20

// rpcClaims are the fields of any Raft request that say who sent it;
// msgpack skips the others (the transport decodes the full request from
// the same bytes afterwards). RPCHeader is embedded, as in every request
// type, so its fields are inlined under the same keys.
type rpcClaims struct {
	hraft.RPCHeader
	Leader             []byte // AppendEntries, InstallSnapshot (deprecated)
	Candidate          []byte // RequestVote (deprecated)
	Term               uint64
	LeadershipTransfer bool
	Size               int64 // InstallSnapshot: raw bytes that follow
	// LeaderCommitIndex is the sender's commit index (AppendEntries; 0 in
	// a heartbeat, which carries none). Not a claim of identity: the guard
	// records it for Node.Lag (leaderCommit below).
	LeaderCommitIndex uint64
}

// Refusal reasons (the "reason" label of the refused-RPC counter).
const (
	refusedNotMember  = "not_member"  // the certificate's name is not in the configuration
	refusedIDClaim    = "id_mismatch" // the RPC claims another server's id
	refusedAddrClaim  = "addr_mismatch"
	refusedUnknownRPC = "unknown_rpc"
	refusedStarting   = "starting" // Raft is not running yet
	refusedMalformed  = "malformed"
	refusedUnexpected = "not_expected" // a fresh server: not a peer it expects its configuration from
)

// membership returns this server's latest Raft configuration; ok is false
// until Raft runs.
type membership func() (conf hraft.Configuration, ok bool)

// rpcGuard checks inbound Raft RPCs against the configuration and counts
// and logs what it refuses.
type rpcGuard struct {
	members atomic.Pointer[membership]
	// expected are the peers a server with an empty configuration takes
	// RPCs from (ExpectPeers); nil or empty: none.
	expected atomic.Pointer[[]Member]
	log      *slog.Logger
	// refusedLog bounds the lines: a member-less certificate can cause one
	// per request.
	refusedLog *ratelog.Bucket

	mu      sync.Mutex
	refused map[RefusedRPC]uint64

	// leaderCommit is the highest LeaderCommitIndex of an AppendEntries
	// the guard let through from a member of the configuration (0: none
	// yet). hashicorp/raft's own CommitIndex on a follower is capped at the
	// entries it holds (min(LeaderCommitIndex, last log index)), so a
	// follower that cannot append (its data dir full, diskguard.go) would
	// report itself caught up; this is the leader's figure uncapped.
	// Invariant: it only increases, and it never exceeds an index some
	// leader committed (a stale leader's commit index is one committed
	// before, a new leader's is never below an entry committed before), so
	// a max over every term is the cluster's commit index as far as this
	// server has heard. Only membership-checked requests count: a server
	// with an empty configuration answers any master certificate claiming
	// its name (see the invariant above), whose figure could be anything,
	// and the max would keep it. It lives as long as the transport (one
	// Open).
	leaderCommit atomic.Uint64
}

// RefusedRPC is one kind of Raft request the guard refused: its rpc type
// and the reason (not_member, id_mismatch, addr_mismatch, unknown_rpc,
// starting, malformed).
type RefusedRPC struct{ RPC, Reason string }

// RefusedRPCCount is how many requests of one kind were refused.
type RefusedRPCCount struct {
	RefusedRPC
	Count uint64
}

func newRPCGuard(log *slog.Logger) *rpcGuard {
	return &rpcGuard{log: log, refusedLog: ratelog.New(refusedLogRate, refusedLogBurst, nil), refused: map[RefusedRPC]uint64{}}
}

// setMembership installs the configuration source once Raft runs.
func (g *rpcGuard) setMembership(m membership) { g.members.Store(&m) }

// counts returns the refusals so far, sorted.
func (g *rpcGuard) counts() []RefusedRPCCount {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]RefusedRPCCount, 0, len(g.refused))
	for k, n := range g.refused {
		out = append(out, RefusedRPCCount{k, n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].RPC != out[j].RPC {
			return out[i].RPC < out[j].RPC
		}
		return out[i].Reason < out[j].Reason
	})
	return out
}

// rpcRefusal is why one request was refused.
type rpcRefusal struct {
	rpc, reason, msg string
}

func (r *rpcRefusal) Error() string { return r.msg }

// observeLeaderCommit raises leaderCommit to idx (never lowers it).
func (g *rpcGuard) observeLeaderCommit(idx uint64) {
	for {
		cur := g.leaderCommit.Load()
		if idx <= cur || g.leaderCommit.CompareAndSwap(cur, idx) {
			return
		}
	}
}

// leaderCommitSeen is the highest commit index a member's AppendEntries
// carried (0: none yet); see leaderCommit.
func (g *rpcGuard) leaderCommitSeen() uint64 { return g.leaderCommit.Load() }

// check applies the invariant to one request from peer. member is true
// when it passed as a member of a non-empty configuration (false for a
// fresh server's first requests, which any master certificate claiming
// the peer's name passes).
func (g *rpcGuard) check(peer pki.Identity, rpc string, c *rpcClaims) (r *rpcRefusal, member bool) {
	refuse := func(reason, format string, args ...any) *rpcRefusal {
		return &rpcRefusal{rpc: rpc, reason: reason, msg: fmt.Sprintf("raft %s refused: ", rpc) + fmt.Sprintf(format, args...)}
	}
	claimed := string(c.ID)
	if claimed != peer.Name {
		return refuse(refusedIDClaim, "the certificate of %s claims to be server %q: a master speaks Raft only as the server its certificate names", peer, claimed), false
	}
	mp := g.members.Load()
	if mp == nil {
		return refuse(refusedStarting, "this master's Raft is not running yet"), false
	}
	conf, ok := (*mp)()
	if !ok {
		return refuse(refusedStarting, "this master's Raft configuration cannot be read"), false
	}
	if len(conf.Servers) == 0 {
		return g.checkExpected(peer, c, refuse), false // fresh server: see the invariant
	}
	var addr string
	for _, s := range conf.Servers {
		if string(s.ID) == peer.Name {
			member, addr = true, string(s.Address)
			break
		}
	}
	if !member {
		return refuse(refusedNotMember, "%s is not a server of this master's Raft configuration (%s)", peer, serverList(conf)), false
	}
	if field, v, bad := c.addrMismatch(addr); bad {
		return refuse(refusedAddrClaim, "%s claims %s address %q, the configuration has %s at %s", peer, field, v, peer.Name, addr), false
	}
	return nil, true
}

// addrMismatch names the first address c claims that is not addr: its
// RPCHeader.Addr (required) or a deprecated Leader/Candidate field.
func (c *rpcClaims) addrMismatch(addr string) (field string, v []byte, bad bool) {
	for _, a := range []struct {
		field string
		v     []byte
	}{{"Addr", c.Addr}, {"Leader", c.Leader}, {"Candidate", c.Candidate}} {
		if (a.field == "Addr" && len(a.v) == 0) || (len(a.v) > 0 && string(a.v) != addr) {
			return a.field, a.v, true
		}
	}
	return "", nil, false
}

// checkExpected is check for a server whose configuration is empty: the
// peer must be one it expects its first configuration from, claiming the
// address it announced.
func (g *rpcGuard) checkExpected(peer pki.Identity, c *rpcClaims, refuse func(reason, format string, args ...any) *rpcRefusal) *rpcRefusal {
	var exp []Member
	if p := g.expected.Load(); p != nil {
		exp = *p
	}
	for _, m := range exp {
		if m.ID != peer.Name {
			continue
		}
		if field, v, bad := c.addrMismatch(m.Address); bad {
			return refuse(refusedAddrClaim, "%s claims %s address %q; this master, waiting for its first configuration, expects %s at %s", peer, field, v, m.ID, m.Address)
		}
		return nil
	}
	names := make([]string, 0, len(exp))
	for _, m := range exp {
		names = append(names, m.ID)
	}
	if len(names) == 0 {
		return refuse(refusedUnexpected, "%s: this master has no Raft configuration yet and expects it from no one (it asks a leader to add it, or bootstraps with its --bootstrap-expect peers, first)", peer)
	}
	return refuse(refusedUnexpected, "%s: this master has no Raft configuration yet and takes its first only from %s", peer, strings.Join(names, ", "))
}

// serverList names the servers of conf, for refusal messages.
func serverList(conf hraft.Configuration) string {
	names := make([]string, 0, len(conf.Servers))
	for _, s := range conf.Servers {
		names = append(names, string(s.ID))
	}
	return strings.Join(names, ", ")
}

// refuse counts and logs a refusal (rate-limited), naming the certificate
// and what it claimed.
func (g *rpcGuard) refuse(peer pki.Identity, serial string, remote net.Addr, c *rpcClaims, r *rpcRefusal) {
	g.mu.Lock()
	g.refused[RefusedRPC{RPC: r.rpc, Reason: r.reason}]++
	g.mu.Unlock()
	ok, skipped := g.refusedLog.Allow()
	if !ok {
		return
	}
	attrs := []any{"certificate", peer.String(), "serial", serial, "peer", remote.String(), "rpc", r.rpc, "reason", r.reason, "err", r.msg, "suppressed", skipped}
	if c != nil {
		attrs = append(attrs, "claimed_id", string(c.ID), "claimed_addr", string(c.Addr), "term", c.Term, "leadership_transfer", c.LeadershipTransfer)
	}
	g.log.Warn("refused a Raft RPC: its certificate is not the member it claims to be", attrs...)
}

// guardedConn is one inbound, TLS-verified Raft connection as the
// transport reads it: only requests the guard passed (see the invariant
// above).
type guardedConn struct {
	net.Conn
	guard  *rpcGuard
	peer   pki.Identity
	serial string

	src *bufio.Reader // the connection's bytes
	rec recorder      // src, recording one request
	dec *codec.Decoder

	out []byte // checked bytes the transport has not read yet
	raw int64  // InstallSnapshot data still to pass through
	err error  // sticky: the connection is done
}

func newGuardedConn(c net.Conn, g *rpcGuard, peer pki.Identity, serial string) *guardedConn {
	gc := &guardedConn{Conn: c, guard: g, peer: peer, serial: serial, src: bufio.NewReaderSize(c, 64<<10)}
	gc.rec.r = gc.src
	gc.dec = codec.NewDecoder(&gc.rec, &codec.MsgpackHandle{})
	return gc
}

// Read hands the transport checked request bytes, then any snapshot data
// that follows a checked InstallSnapshot.
func (g *guardedConn) Read(p []byte) (int, error) {
	if len(g.out) == 0 && g.raw == 0 {
		if g.err != nil {
			return 0, g.err
		}
		if err := g.next(); err != nil {
			g.err = err
			return 0, err
		}
	}
	if len(g.out) > 0 {
		n := copy(p, g.out)
		g.out = g.out[n:]
		return n, nil
	}
	if int64(len(p)) > g.raw {
		p = p[:g.raw]
	}
	n, err := g.src.Read(p)
	g.raw -= int64(n)
	return n, err
}

// next reads, decodes and checks the next request. A refused one is
// answered here (the transport never sees it) and ends the connection.
func (g *guardedConn) next() error {
	typ, err := g.src.ReadByte()
	if err != nil {
		return err // io.EOF: the peer closed between requests
	}
	if cap(g.rec.buf) > maxKeptRecord {
		g.rec.buf = nil // a large request once does not pin its memory
	}
	g.rec.buf = append(g.rec.buf[:0], typ)
	if int(typ) >= len(rpcTypeNames) {
		r := &rpcRefusal{rpc: fmt.Sprintf("type %d", typ), reason: refusedUnknownRPC, msg: fmt.Sprintf("raft RPC of unknown type %d refused", typ)}
		g.guard.refuse(g.peer, g.serial, g.RemoteAddr(), nil, r)
		return r
	}
	rpc := rpcTypeNames[typ]
	var c rpcClaims
	if err := g.dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
			return err
		}
		r := &rpcRefusal{rpc: rpc, reason: refusedMalformed, msg: fmt.Sprintf("raft %s refused: undecodable request: %v", rpc, err)}
		g.guard.refuse(g.peer, g.serial, g.RemoteAddr(), nil, r)
		return r
	}
	r, member := g.guard.check(g.peer, rpc, &c)
	if r != nil {
		g.guard.refuse(g.peer, g.serial, g.RemoteAddr(), &c, r)
		g.answer(typ, r)
		return r
	}
	if typ == rpcAppendEntries && member {
		// Recorded before the transport hands the request to Raft: for
		// the moment until Raft applied what it carries, Lag counts those
		// entries as not applied, which they are not yet.
		g.guard.observeLeaderCommit(c.LeaderCommitIndex)
	}
	g.out = g.rec.buf
	if typ == rpcInstallSnapshot && c.Size > 0 {
		g.raw = c.Size
	}
	return nil
}

// answer writes a refusal the way the transport writes an RPC error (the
// error string, then an empty response), so that the sender's
// hashicorp/raft returns it as the RPC's error. The transport is waiting
// in Read (it answers only after it decoded a request), so nothing else
// writes on the connection now.
func (g *guardedConn) answer(typ byte, r *rpcRefusal) {
	w := bufio.NewWriter(g.Conn)
	enc := codec.NewEncoder(w, &codec.MsgpackHandle{})
	if err := enc.Encode(r.msg); err != nil {
		return
	}
	var resp any
	switch typ {
	case 0:
		resp = &hraft.AppendEntriesResponse{}
	case 1:
		resp = &hraft.RequestVoteResponse{}
	case 2:
		resp = &hraft.InstallSnapshotResponse{}
	case 3:
		resp = &hraft.TimeoutNowResponse{}
	default:
		resp = &hraft.RequestPreVoteResponse{}
	}
	if err := enc.Encode(resp); err != nil {
		return
	}
	_ = w.Flush()
}

// recorder reads from r and keeps what one msgpack request consumed.
// It is an io.ByteScanner, so the decoder reads no further than the
// request (UnreadByte takes the last byte back out of the record).
type recorder struct {
	r   *bufio.Reader
	buf []byte
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf = append(r.buf, p[:n]...)
	return n, err
}

func (r *recorder) ReadByte() (byte, error) {
	b, err := r.r.ReadByte()
	if err == nil {
		r.buf = append(r.buf, b)
	}
	return b, err
}

func (r *recorder) UnreadByte() error {
	if err := r.r.UnreadByte(); err != nil {
		return err
	}
	r.buf = r.buf[:len(r.buf)-1]
	return nil
}

// dialCheck is the peer check of a dial to address: a master
// certificate, and when the configuration has a server at address, that
// server's (a Raft response is believed like a request: a vote granted,
// an append accepted, so another master answering at a member's address
// is refused).
func (g *rpcGuard) dialCheck(address hraft.ServerAddress) pki.PeerCheck {
	masters := pki.RequireRole(pki.RoleMaster)
	return func(peer pki.Identity) error {
		if err := masters(peer); err != nil {
			return err
		}
		mp := g.members.Load()
		if mp == nil {
			return nil
		}
		conf, ok := (*mp)()
		if !ok {
			return nil
		}
		for _, s := range conf.Servers {
			if s.Address == address && string(s.ID) != peer.Name {
				return fmt.Errorf("the master there is %s, the configuration has server %s at %s", peer, s.ID, address)
			}
		}
		return nil
	}
}
