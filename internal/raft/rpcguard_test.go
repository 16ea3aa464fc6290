package raft

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/state"
	"github.com/gin-topology/gin/internal/testkit"
)

// tlsCluster is three Nodes on the TLS transport on loopback: m1
// bootstrapped, m2 and m3 added as voters (they start with an empty
// configuration and take their first one from m1).
type tlsCluster struct {
	pki    *raftPKI
	nodes  map[string]*Node
	stores map[string]*state.Store
	logs   map[string]*testkit.LogBuffer
	// raftLogs is hashicorp/raft's own output per server.
	raftLogs map[string]*testkit.LogBuffer
}

func newTLSCluster(t *testing.T) *tlsCluster { return newTLSClusterWith(t, nil) }

// newTLSClusterWith is newTLSCluster with mod (when not nil) applied to
// each server's Config before it opens.
func newTLSClusterWith(t *testing.T, mod func(id string, cfg *Config)) *tlsCluster {
	t.Helper()
	c := &tlsCluster{pki: newRaftPKI(t), nodes: map[string]*Node{}, stores: map[string]*state.Store{}, logs: map[string]*testkit.LogBuffer{}, raftLogs: map[string]*testkit.LogBuffer{}}
	for _, id := range []string{"m1", "m2", "m3"} {
		c.logs[id] = &testkit.LogBuffer{}
		c.raftLogs[id] = &testkit.LogBuffer{}
		c.stores[id] = state.New(nil)
		// Default timeouts: -race on a loaded machine loses Fast's leases.
		cfg := Config{ID: id, Bind: "127.0.0.1:0", DataDir: t.TempDir(), Bootstrap: id == "m1", Fast: true,
			Tuning: Tuning{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second, LeaderLeaseTimeout: 500 * time.Millisecond},
			TLS:    c.pki.source(t, pki.Identity{Role: pki.RoleMaster, Name: id}), Logger: slog.New(slog.NewTextHandler(c.logs[id], nil)),
			RaftLogOutput: c.raftLogs[id]}
		if mod != nil {
			mod(id, &cfg)
		}
		n, err := Open(cfg, c.stores[id])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Shutdown(); _ = n.CloseTransport() })
		c.nodes[id] = n
	}
	m1 := c.nodes["m1"]
	testkit.WaitFor(t, 30*time.Second, "m1 leads", m1.IsLeader)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, id := range []string{"m2", "m3"} {
		// A fresh server takes its first configuration only from the
		// leader it expects (the master's join loop names it).
		c.nodes[id].ExpectPeers([]Member{{ID: "m1", Address: m1.Addr(), Voter: true}})
		if err := m1.AddVoter(ctx, id, c.nodes[id].Addr(), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m1.Apply(ctx, put("node001", 1, "h1")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"m2", "m3"} {
		testkit.WaitFor(t, 30*time.Second, id+" applies the first write", func() bool { _, ok := c.stores[id].Node("node001"); return ok })
	}
	return c
}

// attacker is a Raft transport over the TLS layer with the certificate
// of id, as a process holding that certificate would run it.
func (c *tlsCluster) attacker(t *testing.T, id pki.Identity) *hraft.NetworkTransport {
	t.Helper()
	layer, err := newTLSLayer("127.0.0.1:0", nil, c.pki.source(t, id), nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	trans := hraft.NewNetworkTransport(layer, 1, 5*time.Second, io.Discard)
	t.Cleanup(func() { _ = trans.Close() })
	return trans
}

func master(name string) pki.Identity { return pki.Identity{Role: pki.RoleMaster, Name: name} }

func refusedCount(n *Node, rpc, reason string) uint64 {
	for _, r := range n.RefusedRPCs() {
		if r.RPC == rpc && r.Reason == reason {
			return r.Count
		}
	}
	return 0
}

// TestRaftRPCsBoundToMembership: on a three-master TLS cluster, RPCs from
// master certificates that are not the member they claim to be (a
// certificate never joined, a member claiming the leader's id, a member
// claiming another address, a removed master) are refused at the RPC with
// an error naming the refusal, counted by rpc type and reason, and logged
// naming the certificate; the leader keeps its term and leadership and no
// forged entry is applied anywhere. A member speaking as itself is answered
// (the control: the refusals are the membership check, not a broken port).
func TestRaftRPCsBoundToMembership(t *testing.T) {
	c := newTLSCluster(t)
	m1 := c.nodes["m1"]
	leaderAddr := hraft.ServerAddress(m1.Addr())
	forgedCmd, err := proto.Marshal(put("forged", 1, "evil"))
	if err != nil {
		t.Fatal(err)
	}
	header := func(id, addr string) hraft.RPCHeader {
		return hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(addr)}
	}
	// The RPCs an attacker sends, with the claims filled in per case.
	type rpcCase struct {
		name string
		send func(trans *hraft.NetworkTransport, target hraft.ServerAddress, id, addr string, term, last uint64) error
	}
	rpcs := []rpcCase{
		{"RequestVote", func(tr *hraft.NetworkTransport, to hraft.ServerAddress, id, addr string, term, last uint64) error {
			var resp hraft.RequestVoteResponse
			return tr.RequestVote("x", to, &hraft.RequestVoteRequest{RPCHeader: header(id, addr), Term: term + 1<<20,
				Candidate: []byte(addr), LastLogIndex: last + 1<<20, LastLogTerm: term + 1<<20, LeadershipTransfer: true}, &resp)
		}},
		{"AppendEntries", func(tr *hraft.NetworkTransport, to hraft.ServerAddress, id, addr string, term, last uint64) error {
			var resp hraft.AppendEntriesResponse
			return tr.AppendEntries("x", to, &hraft.AppendEntriesRequest{RPCHeader: header(id, addr), Term: term + 1, Leader: []byte(addr),
				PrevLogEntry: last, PrevLogTerm: term,
				Entries:           []*hraft.Log{{Index: last + 1, Term: term + 1, Type: hraft.LogCommand, Data: forgedCmd}},
				LeaderCommitIndex: last + 1}, &resp)
		}},
		{"TimeoutNow", func(tr *hraft.NetworkTransport, to hraft.ServerAddress, id, addr string, _, _ uint64) error {
			var resp hraft.TimeoutNowResponse
			return tr.TimeoutNow("x", to, &hraft.TimeoutNowRequest{RPCHeader: header(id, addr)}, &resp)
		}},
		{"InstallSnapshot", func(tr *hraft.NetworkTransport, to hraft.ServerAddress, id, addr string, term, last uint64) error {
			var resp hraft.InstallSnapshotResponse
			data := []byte("not a snapshot")
			return tr.InstallSnapshot("x", to, &hraft.InstallSnapshotRequest{RPCHeader: header(id, addr), SnapshotVersion: 1,
				Term: term + 1, Leader: []byte(addr), LastLogIndex: last + 1<<20, LastLogTerm: term + 1, Size: int64(len(data))},
				&resp, strings.NewReader(string(data)))
		}},
	}
	// Which server each forged RPC goes to: votes and TimeoutNow at the
	// leader (to unseat it), appends and snapshots at a follower (to
	// rewrite its state as "the leader").
	target := map[string]string{"RequestVote": "m1", "TimeoutNow": "m1", "AppendEntries": "m2", "InstallSnapshot": "m2"}

	m2Addr, m3Addr := c.nodes["m2"].Addr(), c.nodes["m3"].Addr()
	attackers := []struct {
		name         string
		cert         string
		id, addr     string // what the RPC claims ("" addr: the leader's)
		reason       string
		removeMember bool // remove cert's server from the cluster first
	}{
		{"member-less cert as itself", "m9", "m9", "127.0.0.1:1", refusedNotMember, false},
		{"member-less cert as the leader", "m9", "m1", "", refusedIDClaim, false},
		{"member cert as the leader", "m3", "m1", "", refusedIDClaim, false},
		{"member cert at another address", "m3", "m3", m2Addr, refusedAddrClaim, false},
		{"member cert with no address", "m3", "m3", "-", refusedAddrClaim, false},
		{"removed master as itself", "m3", "m3", m3Addr, refusedNotMember, true},
	}
	for _, a := range attackers {
		t.Run(a.name, func(t *testing.T) {
			if a.removeMember {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := m1.RemoveServer(ctx, a.cert); err != nil {
					t.Fatal(err)
				}
				testkit.WaitFor(t, 30*time.Second, "m2 sees m3 removed", func() bool {
					for _, m := range c.nodes["m2"].Stats().Members {
						if m.ID == a.cert {
							return false
						}
					}
					return true
				})
			}
			addr := a.addr
			switch addr {
			case "":
				addr = string(leaderAddr)
			case "-":
				addr = ""
			}
			for _, rpc := range rpcs {
				// A fresh transport per RPC: the guard closes the connection
				// of a refused RPC, which the sender would pool again.
				trans := c.attacker(t, master(a.cert))
				to := c.nodes[target[rpc.name]]
				st := m1.Stats()
				before := refusedCount(to, rpc.name, a.reason)
				err := rpc.send(trans, hraft.ServerAddress(to.Addr()), a.id, addr, st.Term, st.CommitIndex)
				if err == nil || !strings.Contains(err.Error(), "refused") {
					t.Fatalf("%s from %s claiming %s at %q: err %v, want a refusal", rpc.name, a.cert, a.id, addr, err)
				}
				if got := refusedCount(to, rpc.name, a.reason); got != before+1 {
					t.Fatalf("%s refused: counter %s/%s is %d, want %d (all: %+v)", rpc.name, rpc.name, a.reason, got, before+1, to.RefusedRPCs())
				}
				if !m1.IsLeader() || m1.Stats().Term != st.Term {
					t.Fatalf("after the forged %s: m1 leader %v, term %d (was %d)", rpc.name, m1.IsLeader(), m1.Stats().Term, st.Term)
				}
			}
			if log := c.logs["m1"].String(); !strings.Contains(log, "certificate=spiffe://gin/master/"+a.cert) || !strings.Contains(log, "claimed_id="+a.id) {
				t.Fatalf("m1's log does not name the certificate %s and its claim %s:\n%s", a.cert, a.id, log)
			}
		})
	}
	// hashicorp/raft wrote no line of its own per refused request: the
	// guard's rate-limited line is the only one.
	for id, b := range c.raftLogs {
		if n := strings.Count(b.String(), "failed to decode incoming command"); n != 0 {
			t.Errorf("%s: hashicorp/raft logged %d decode errors for refused RPCs:\n%s", id, n, b.String())
		}
	}
	// The cluster still commits, and nothing forged was applied anywhere.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := m1.Apply(ctx, put("node002", 1, "h2")); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "m2 applies the write after the attacks", func() bool { _, ok := c.stores["m2"].Node("node002"); return ok })
	for id, st := range c.stores {
		if _, ok := st.Node("forged"); ok {
			t.Fatalf("%s applied the forged entry", id)
		}
	}

	// Control: m2 speaking as itself at its own address reaches Raft (a
	// stale vote request is answered, not granted).
	trans := c.attacker(t, master("m2"))
	var resp hraft.RequestVoteResponse
	if err := trans.RequestVote("m1", leaderAddr, &hraft.RequestVoteRequest{RPCHeader: header("m2", m2Addr), Candidate: []byte(m2Addr)}, &resp); err != nil {
		t.Fatalf("a member speaking as itself was refused: %v", err)
	}
	if resp.Granted {
		t.Fatal("a stale vote was granted")
	}
}

// TestRaftDialRefusesAnotherMasterAtAMembersAddress: the layer dialling
// a member's configured address and finding another master's certificate
// there refuses the connection (a response is believed like a request).
func TestRaftDialRefusesAnotherMasterAtAMembersAddress(t *testing.T) {
	p := newRaftPKI(t)
	cases := []struct {
		name, cert string
		inConf     bool // the configuration has m2 at the dialled address
		ok         bool
	}{
		{"the member itself", "m2", true, true},
		{"another master at the member's address", "m9", true, false},
		{"an address the configuration does not hold", "m9", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lis, err := tls.Listen("tcp", "127.0.0.1:0", pki.ServerConfig(p.source(t, master(tc.cert)), pki.RequireRole(pki.RoleMaster)))
			if err != nil {
				t.Fatal(err)
			}
			defer lis.Close()
			go func() {
				for {
					c, err := lis.Accept()
					if err != nil {
						return
					}
					_ = c.(*tls.Conn).Handshake()
					_ = c.Close()
				}
			}()
			layer, err := newTLSLayer("127.0.0.1:0", nil, p.source(t, master("m1")), nil, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer layer.Close()
			conf := hraft.Configuration{Servers: []hraft.Server{{ID: "m1", Address: hraft.ServerAddress(layer.Addr().String())}}}
			if tc.inConf {
				conf.Servers = append(conf.Servers, hraft.Server{ID: "m2", Address: hraft.ServerAddress(lis.Addr().String())})
			}
			layer.guard.setMembership(func() (hraft.Configuration, bool) { return conf, true })
			c, err := layer.Dial(hraft.ServerAddress(lis.Addr().String()), 5*time.Second)
			if err == nil {
				_ = c.Close()
			}
			if (err == nil) != tc.ok {
				t.Fatalf("dial %s (certificate %s): %v, want ok %v", lis.Addr(), tc.cert, err, tc.ok)
			}
		})
	}
}
