package raft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	hraft "github.com/hashicorp/raft"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/state"
	"github.com/gin-topology/gin/internal/testkit"
)

// TestFollowerWithAFullDiskReportsItsTrueLag (issue #33 item 6): on three
// masters over TLS, one follower's data dir is made full (its appends are
// refused, diskguard.go) after it caught up; the leader commits 200 more
// entries. The follower's Lag then counts them (hashicorp/raft's own
// CommitIndex there stays at the entries it holds: the old figure, 0
// behind), it stays caught up (a follower that fell behind still answers,
// saying how far), and once space returns it catches up and Lag is 0 again.
func TestFollowerWithAFullDiskReportsItsTrueLag(t *testing.T) {
	const writes = 200
	c, full := newFullableTLSCluster(t)
	leader := c.leader(t)
	var fid string
	for _, id := range []string{"m3", "m2"} {
		if c.nodes[id] != leader {
			fid = id
			break
		}
	}
	f := c.nodes[fid]
	testkit.WaitFor(t, 30*time.Second, fid+" caught up", func() bool { return f.CaughtUp() == nil })
	_, leaderApplied := leader.Indexes()
	testkit.WaitFor(t, 30*time.Second, fid+" applies all the leader has", func() bool {
		applied, commit := f.Lag()
		return applied >= leaderApplied && commit == applied
	})
	before, _ := f.Lag()

	full[fid].Store(true)
	for i := range writes {
		c.apply(t, put(fmt.Sprintf("full%03d", i), 1, "h"))
	}
	leaderCommit, _ := c.leader(t).Indexes()
	lagReport := func() string {
		applied, commit := f.Lag()
		raftCommit, _ := f.Indexes()
		return fmt.Sprintf("%s: applied %d, Lag's commit %d (lag %d), hashicorp/raft's CommitIndex %d; the leader's commit %d",
			fid, applied, commit, commit-applied, raftCommit, leaderCommit)
	}
	// The leader retries a refused append with a growing backoff (up to
	// about 10 s): the follower learns the commit index at its next try.
	testkit.WaitFor(t, 60*time.Second, fid+"'s Lag to count the entries it could not append", func() bool {
		applied, commit := f.Lag()
		return commit-applied >= writes
	}, lagReport)
	applied, commit := f.Lag()
	raftCommit, _ := f.Indexes()
	t.Log(lagReport())
	if applied != before {
		t.Fatalf("%s applied %d → %d with its data dir full, want no entry appended", fid, before, applied)
	}
	if raftCommit-applied >= writes {
		// The cause of the bug: were it gone, this test would no longer
		// show the fix.
		t.Fatalf("hashicorp/raft's CommitIndex on %s is %d, %d past applied: no longer capped at the entries it holds", fid, raftCommit, raftCommit-applied)
	}
	if commit > leaderCommit {
		t.Fatalf("%s's Lag reports commit %d, past the leader's %d", fid, commit, leaderCommit)
	}
	if err := f.CaughtUp(); err != nil {
		t.Fatalf("CaughtUp on %s, caught up before its disk filled: %v", fid, err)
	}

	full[fid].Store(false)
	testkit.WaitFor(t, 60*time.Second, fid+" catches up once space returns", func() bool {
		applied, commit := f.Lag()
		return applied >= leaderCommit && commit == applied
	}, lagReport)
}

// TestLeaderCommitSeenOnlyIncreases: the recorded leader commit index is
// the maximum of what was observed, whatever the order (a stale leader's
// lower figure, a heartbeat's 0), also under concurrent observers (one
// connection per peer).
func TestLeaderCommitSeenOnlyIncreases(t *testing.T) {
	cases := []struct {
		name     string
		observed []uint64
		want     []uint64 // after each observation
	}{
		{"rising", []uint64{1, 5, 9}, []uint64{1, 5, 9}},
		{"a heartbeat carries 0", []uint64{7, 0, 8}, []uint64{7, 7, 8}},
		{"a stale leader's lower figure", []uint64{100, 90, 100, 101}, []uint64{100, 100, 100, 101}},
		{"none yet", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newRPCGuard(slog.New(slog.DiscardHandler))
			if got := g.leaderCommitSeen(); got != 0 {
				t.Fatalf("a new guard has seen %d, want 0", got)
			}
			for i, v := range tc.observed {
				g.observeLeaderCommit(v)
				if got := g.leaderCommitSeen(); got != tc.want[i] {
					t.Fatalf("after observing %v: %d, want %d", tc.observed[:i+1], got, tc.want[i])
				}
			}
		})
	}
	t.Run("concurrent", func(t *testing.T) {
		g := newRPCGuard(slog.New(slog.DiscardHandler))
		const n = 1000
		var wg sync.WaitGroup
		for w := range 4 {
			// Each observer sees 0..n, out of order (3 is prime to n+1).
			wg.Go(func() {
				for i := range n + 1 {
					g.observeLeaderCommit(uint64((i*3 + w) % (n + 1)))
				}
			})
		}
		done := make(chan struct{})
		var fell atomic.Bool
		go func() {
			defer close(done)
			var last uint64
			for last < n {
				got := g.leaderCommitSeen()
				if got < last {
					fell.Store(true)
					return
				}
				last = got
			}
		}()
		wg.Wait()
		<-done
		if fell.Load() {
			t.Fatal("the recorded leader commit fell while observers raced")
		}
		if got := g.leaderCommitSeen(); got != n {
			t.Fatalf("after concurrent observations of 0..%d: %d", n, got)
		}
	})
}

// TestGuardRecordsLeaderCommitOfMembersAppendEntries: the guard reads
// LeaderCommitIndex from the request bytes the transport then reads
// verbatim, and records it only for an AppendEntries it checked against a
// configuration: not a RequestVote, not a fresh server's first requests
// (which only the peers it expects pass).
func TestGuardRecordsLeaderCommitOfMembersAppendEntries(t *testing.T) {
	const addr = "127.0.0.1:9001"
	members := hraft.Configuration{Servers: []hraft.Server{{ID: "m1", Address: addr}, {ID: "m2", Address: "127.0.0.1:9002"}}}
	hdr := hraft.RPCHeader{ID: []byte("m1"), Addr: []byte(addr)}
	cases := []struct {
		name string
		conf hraft.Configuration
		typ  byte
		req  any
		want uint64
	}{
		{"a member's AppendEntries", members, rpcAppendEntries, &hraft.AppendEntriesRequest{RPCHeader: hdr, Term: 3, LeaderCommitIndex: 42}, 42},
		{"a member's heartbeat", members, rpcAppendEntries, &hraft.AppendEntriesRequest{RPCHeader: hdr, Term: 3}, 0},
		{"a member's RequestVote", members, 1, &hraft.RequestVoteRequest{RPCHeader: hdr, Term: 3, LastLogIndex: 42}, 0},
		{"a fresh server's AppendEntries", hraft.Configuration{}, rpcAppendEntries, &hraft.AppendEntriesRequest{RPCHeader: hdr, Term: 3, LeaderCommitIndex: 42}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var req bytes.Buffer
			req.WriteByte(tc.typ)
			if err := codec.NewEncoder(&req, &codec.MsgpackHandle{}).Encode(tc.req); err != nil {
				t.Fatal(err)
			}
			sent := bytes.Clone(req.Bytes())
			g := newRPCGuard(slog.New(slog.DiscardHandler))
			g.setMembership(func() (hraft.Configuration, bool) { return tc.conf, true })
			g.expected.Store(&[]Member{{ID: "m1", Address: addr, Voter: true}}) // a fresh server's leader
			gc := newGuardedConn(readConn{r: &req}, g, pki.Identity{Role: pki.RoleMaster, Name: "m1"}, "serial")
			got, err := io.ReadAll(gc)
			if err != nil {
				t.Fatalf("the guard refused the request: %v", err)
			}
			if !bytes.Equal(got, sent) {
				t.Fatalf("the transport would read %d bytes, not the %d sent", len(got), len(sent))
			}
			if seen := g.leaderCommitSeen(); seen != tc.want {
				t.Fatalf("recorded leader commit %d, want %d", seen, tc.want)
			}
		})
	}
}

// readConn is a net.Conn that reads r (io.EOF at its end) and writes
// nowhere.
type readConn struct {
	net.Conn
	r io.Reader
}

func (c readConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c readConn) Write(p []byte) (int, error) { return len(p), nil }
func (c readConn) RemoteAddr() net.Addr        { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// fullableCluster is three masters on the TLS transport (m1 bootstrapped,
// m2 and m3 added as voters) whose data dirs read as full while full[id]
// is set.
type fullableCluster struct {
	nodes  map[string]*Node
	stores map[string]*state.Store
}

func newFullableTLSCluster(t *testing.T) (*fullableCluster, map[string]*atomic.Bool) {
	t.Helper()
	full := map[string]*atomic.Bool{}
	c := newTLSClusterWith(t, func(id string, cfg *Config) {
		isFull := new(atomic.Bool)
		full[id] = isFull
		cfg.statfs = func(string) (uint64, error) {
			if isFull.Load() {
				return 0, nil
			}
			return 1 << 40, nil
		}
	})
	return &fullableCluster{nodes: c.nodes, stores: c.stores}, full
}

// leader waits for a leader and returns it.
func (c *fullableCluster) leader(t *testing.T) *Node {
	t.Helper()
	var l *Node
	testkit.WaitFor(t, 30*time.Second, "a leader", func() bool {
		for _, n := range c.nodes {
			if n.IsLeader() {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

// apply applies cmd on the leader, again on the next leader should
// leadership move meanwhile (a put applied twice is the same put).
func (c *fullableCluster) apply(t *testing.T, cmd *statev1.Command) {
	t.Helper()
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.leader(t).Apply(ctx, cmd)
		cancel()
		if err == nil {
			return
		}
		if !errors.Is(err, ErrNotLeader) || try == 5 {
			t.Fatal(err)
		}
	}
}
