package raft

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/ratelog"
	"github.com/gin-topology/gin/internal/state"
	"github.com/gin-topology/gin/internal/testkit"
)

type raftPKI struct {
	dir     string
	ca      *pki.CA
	sources map[pki.Identity]*pki.Source
}

// source returns a Source for id's certificate, issued on first use.
func (p *raftPKI) source(t *testing.T, id pki.Identity) *pki.Source {
	t.Helper()
	if s, ok := p.sources[id]; ok {
		return s
	}
	cert, key, err := p.ca.IssueToDir(p.dir, pki.CertRequest{Identity: id}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	src, err := pki.NewSource(pki.Files{CA: filepath.Join(p.dir, pki.CAFile), Cert: cert, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.sources[id] = src
	return src
}

func newRaftPKI(t *testing.T) *raftPKI {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.CreateCA(dir, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &raftPKI{dir: dir, ca: ca, sources: map[pki.Identity]*pki.Source{}}
}

// TestTLSTransportRefusesForgedRPCs: a leader on the TLS transport gets
// forged RequestVote RPCs (LeadershipTransfer set, a far higher term,
// claiming the leader's own id, as an attacker who can reach the Raft port
// would send them) over plain TCP, over TLS with an agent certificate of
// the same CA, and over TLS with a master certificate of another CA. Every
// one fails before Raft reads it: the leader stays leader in its term.
// A master certificate of the cluster CA gets through (the same RPC is
// answered), so the refusals are the certificate checks, not a broken port.
func TestTLSTransportRefusesForgedRPCs(t *testing.T) {
	p := newRaftPKI(t)
	n, err := Open(Config{ID: "m1", Bind: "127.0.0.1:0", DataDir: t.TempDir(), Bootstrap: true, Fast: true,
		TLS: p.source(t, pki.Identity{Role: pki.RoleMaster, Name: "m1"})}, state.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for !n.IsLeader() {
		select {
		case <-ctx.Done():
			t.Fatal("no leader")
		case <-time.After(10 * time.Millisecond):
		}
	}
	term := n.Stats().Term
	forged := func() *hraft.RequestVoteRequest {
		return &hraft.RequestVoteRequest{
			RPCHeader: hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte("m1"), Addr: []byte(n.Addr())},
			Term:      term + 1<<20, LastLogIndex: 1 << 40, LastLogTerm: term + 1<<20, LeadershipTransfer: true,
		}
	}
	quiet := slog.New(slog.DiscardHandler)
	tlsAttacker := func(src *pki.Source) *hraft.NetworkTransport {
		layer, err := newTLSLayer("127.0.0.1:0", nil, src, nil, quiet)
		if err != nil {
			t.Fatal(err)
		}
		return hraft.NewNetworkTransport(layer, 1, 2*time.Second, io.Discard)
	}
	plain, err := hraft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	other := newRaftPKI(t)
	attackers := []struct {
		name  string
		trans *hraft.NetworkTransport
	}{
		{"plain TCP", plain},
		{"agent certificate", tlsAttacker(p.source(t, pki.Identity{Role: pki.RoleAgent, Name: "node001"}))},
		{"admin certificate", tlsAttacker(p.source(t, pki.Identity{Role: pki.RoleAdmin}))},
		{"master certificate of another CA", tlsAttacker(other.source(t, pki.Identity{Role: pki.RoleMaster, Name: "m1"}))},
	}
	for _, a := range attackers {
		t.Run(a.name, func(t *testing.T) {
			defer a.trans.Close()
			var resp hraft.RequestVoteResponse
			err := a.trans.RequestVote("m1", hraft.ServerAddress(n.Addr()), forged(), &resp)
			if err == nil {
				t.Fatalf("forged RequestVote answered: %+v", resp)
			}
			if !n.IsLeader() || n.Stats().Term != term {
				t.Fatalf("after the forged vote: leader %v, term %d (was %d)", n.IsLeader(), n.Stats().Term, term)
			}
		})
	}
	// The control: the member's master certificate reaches Raft (a vote
	// request with a stale term is answered, not granted).
	peer := tlsAttacker(p.source(t, pki.Identity{Role: pki.RoleMaster, Name: "m1"}))
	defer peer.Close()
	var resp hraft.RequestVoteResponse
	stale := forged()
	stale.Term, stale.LastLogTerm, stale.LeadershipTransfer = 0, 0, false
	if err := peer.RequestVote("m1", hraft.ServerAddress(n.Addr()), stale, &resp); err != nil {
		t.Fatalf("a master of the cluster CA could not reach Raft: %v", err)
	}
	if resp.Granted {
		t.Fatal("a stale vote was granted")
	}
}

// TestTLSLayerClosesStreamsWhenFilesChange: a changed certificate file
// makes the layer call the transport's CloseStreams (pooled connections
// redial under the new files); the watcher stops with the layer.
func TestTLSLayerClosesStreamsWhenFilesChange(t *testing.T) {
	p := newRaftPKI(t)
	cert, key, err := p.ca.IssueToDir(p.dir, pki.CertRequest{Identity: pki.Identity{Role: pki.RoleMaster, Name: "m1"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	src, err := pki.NewSource(pki.Files{CA: filepath.Join(p.dir, pki.CAFile), Cert: cert, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	layer, err := newTLSLayer("127.0.0.1:0", nil, src, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	calls := make(chan struct{}, 10)
	layer.watchFiles(src, 10*time.Millisecond, func() { calls <- struct{}{} })
	select {
	case <-calls:
		t.Fatal("CloseStreams called before anything changed")
	case <-time.After(100 * time.Millisecond):
	}
	// Rotate: a new pair for the same identity, written over the old files.
	c2, k2, err := p.ca.IssueToDir(p.dir, pki.CertRequest{Identity: pki.Identity{Role: pki.RoleMaster, Name: "m1-next"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	for _, f := range [][2]string{{c2, cert}, {k2, key}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f[1], later, later); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-calls:
	case <-time.After(10 * time.Second):
		t.Fatal("CloseStreams not called after the files changed")
	}
	if err := layer.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRefusedHandshakesLogBounded: anyone who reaches the Raft port causes
// a refused handshake per connection; the layer logs the first
// refusedLogBurst of them, then one line per refill that says how many it
// left out, instead of one line each (a log flood from the network).
func TestRefusedHandshakesLogBounded(t *testing.T) {
	p := newRaftPKI(t)
	var out testkit.LogBuffer
	layer, err := newTLSLayer("127.0.0.1:0", nil, p.source(t, pki.Identity{Role: pki.RoleMaster, Name: "m1"}), nil,
		slog.New(slog.NewTextHandler(&out, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer layer.Close()
	clock := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	layer.refusedLog = ratelog.New(refusedLogRate, refusedLogBurst, now)

	// refuse opens n plain connections that send bytes that are not TLS
	// and waits until the layer has ended each (it logs before it closes).
	refuse := func(n int) {
		t.Helper()
		for range n {
			c, err := net.Dial("tcp", layer.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			_, _ = c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
			// EOF or a reset (the layer closes with our bytes unread): ended.
			var ne net.Error
			if _, err := io.Copy(io.Discard, c); errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the layer did not end a refused connection: %v", err)
			}
			_ = c.Close()
		}
	}
	lines := func() []string {
		var ls []string
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.Contains(l, "raft connection refused") {
				ls = append(ls, l)
			}
		}
		return ls
	}
	const attempts = 100
	refuse(attempts)
	if got := lines(); len(got) != refusedLogBurst {
		t.Fatalf("%d refused handshakes logged %d lines, want the burst %d", attempts, len(got), refusedLogBurst)
	}
	mu.Lock()
	clock = clock.Add(time.Second) // one more token
	mu.Unlock()
	refuse(1)
	got := lines()
	if len(got) != refusedLogBurst+1 || !strings.Contains(got[len(got)-1], fmt.Sprintf("suppressed=%d", attempts-refusedLogBurst)) {
		t.Fatalf("after a refill: %d lines, last %q; want %d lines, the last saying suppressed=%d", len(got), got[len(got)-1], refusedLogBurst+1, attempts-refusedLogBurst)
	}
}
