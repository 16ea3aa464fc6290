package raft

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	hraft "github.com/hashicorp/raft"

	"github.com/gin-topology/gin/internal/pki"
)

// TestFreshServerTakesItsFirstConfigurationOnlyFromExpectedPeers: a
// master waiting for admission (no Raft configuration yet) refuses the
// Raft RPCs of every master certificate but the peers it expects (the
// leader that is adding it), and theirs claiming another address. Before,
// any master certificate of the CA claiming its own name passed, and
// planted a configuration of the waiting master alone (issue #33 item 1).
func TestFreshServerTakesItsFirstConfigurationOnlyFromExpectedPeers(t *testing.T) {
	const leaderAddr, otherAddr = "127.0.0.1:9001", "127.0.0.1:9009"
	leader := []Member{{ID: "m1", Address: leaderAddr, Voter: true}}
	// The attacker's AppendEntries carries a configuration entry naming
	// the waiting server alone.
	planted := &hraft.AppendEntriesRequest{Term: 7, LeaderCommitIndex: 1,
		Entries: []*hraft.Log{{Index: 1, Term: 7, Type: hraft.LogConfiguration, Data: hraft.EncodeConfiguration(
			hraft.Configuration{Servers: []hraft.Server{{ID: "m4", Address: "127.0.0.1:9004", Suffrage: hraft.Voter}}})}}}
	cases := []struct {
		name     string
		expected []Member // nil: none expected yet
		cert     string
		claimID  string
		addr     string
		reason   string // "": let through
	}{
		{"no peer expected yet", nil, "m9", "m9", otherAddr, refusedUnexpected},
		{"a non-member certificate as itself", leader, "m9", "m9", otherAddr, refusedUnexpected},
		{"the leader's name from another address", leader, "m1", "m1", otherAddr, refusedAddrClaim},
		{"a certificate claiming the leader's name", leader, "m9", "m1", leaderAddr, refusedIDClaim},
		{"the expected leader", leader, "m1", "m1", leaderAddr, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := *planted
			req.RPCHeader = hraft.RPCHeader{ID: []byte(tc.claimID), Addr: []byte(tc.addr)}
			var b bytes.Buffer
			b.WriteByte(rpcAppendEntries)
			if err := codec.NewEncoder(&b, &codec.MsgpackHandle{}).Encode(&req); err != nil {
				t.Fatal(err)
			}
			g := newRPCGuard(slog.New(slog.DiscardHandler))
			g.setMembership(func() (hraft.Configuration, bool) { return hraft.Configuration{}, true })
			if tc.expected != nil {
				g.expected.Store(&tc.expected)
			}
			gc := newGuardedConn(readConn{r: &b}, g, pki.Identity{Role: pki.RoleMaster, Name: tc.cert}, "serial")
			got, err := io.ReadAll(gc)
			if tc.reason == "" {
				if err != nil || len(got) == 0 {
					t.Fatalf("the expected leader's AppendEntries: %d bytes, %v", len(got), err)
				}
				return
			}
			var r *rpcRefusal
			if !errors.As(err, &r) || r.reason != tc.reason {
				t.Fatalf("err %v, want a refusal %s", err, tc.reason)
			}
			if len(got) != 0 {
				t.Fatalf("the transport would read %d bytes of a refused request", len(got))
			}
			if tc.reason == refusedUnexpected && tc.expected != nil && !strings.Contains(err.Error(), "only from m1") {
				t.Fatalf("the refusal does not name the expected leader: %v", err)
			}
		})
	}
}
