package raft

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	statev1 "github.com/gin-topology/gin/api/gen/gin/state/v1"
	ginv1 "github.com/gin-topology/gin/api/gen/gin/v1"
	"github.com/gin-topology/gin/internal/pki"
	"github.com/gin-topology/gin/internal/state"
	"github.com/gin-topology/gin/internal/testkit"
)

func deny(serial string) *statev1.Command {
	return &statev1.Command{Command: &statev1.Command_DenyCertificate{DenyCertificate: &statev1.DenyCertificate{
		Entry: &ginv1.DeniedCertificate{Serial: serial, Reason: "test"}}}}
}

func bound(cmd *statev1.Command) *statev1.Command {
	cmd.GetPutInventory().Binding = &statev1.NodeBinding{Identity: "spiffe://gin/agent/n1", CaKeySha256: "ab", Serial: "01"}
	return cmd
}

// TestFSMDenyAllowDeleteAndSnapshot: the typed commands of the deny list
// and node removal go through Apply, and the deny list through a snapshot.
func TestFSMDenyAllowDeleteAndSnapshot(t *testing.T) {
	store := state.New(nil)
	f := NewFSM(store, nil)
	tests := []struct {
		name    string
		cmd     *statev1.Command
		wantErr string
		changed bool
	}{
		{"deny", deny("0A1B"), "", true},
		{"deny again", deny("0A1B"), "", false},
		{"deny a lower-case serial (not canonical)", deny("0a1c"), "canonical", false},
		{"deny another", deny("0A1C"), "", true},
		{"allow", &statev1.Command{Command: &statev1.Command_AllowCertificate{AllowCertificate: &statev1.AllowCertificate{Serial: "0A1C"}}}, "", true},
		{"register", put("n1", 1, "h1"), "", true},
		{"delete", &statev1.Command{Command: &statev1.Command_DeleteNode{DeleteNode: &statev1.DeleteNode{NodeName: "n1"}}}, "", true},
		{"delete again", &statev1.Command{Command: &statev1.Command_DeleteNode{DeleteNode: &statev1.DeleteNode{NodeName: "n1"}}}, "", false},
		{"register the name again, over TLS", bound(put("n1", 1, "h1")), "", true},
		{"deny a third", deny("0A1D"), "", true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := f.Apply(entry(t, uint64(i+1), tc.cmd)).(*ApplyResponse)
			if (resp.Err == nil) != (tc.wantErr == "") || (resp.Err != nil && !strings.Contains(resp.Err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", resp.Err, tc.wantErr)
			}
			if resp.Result.Changed != tc.changed {
				t.Fatalf("changed = %v, want %v", resp.Result.Changed, tc.changed)
			}
		})
	}
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, store.Capture()); err != nil {
		t.Fatal(err)
	}
	restored := state.New(nil)
	if err := NewFSM(restored, nil).Restore(nopCloser{bytes.NewReader(buf.Bytes())}); err != nil {
		t.Fatal(err)
	}
	var serials []string
	for _, e := range restored.DeniedCertificates() {
		serials = append(serials, e.GetSerial())
	}
	if strings.Join(serials, ",") != "0A1B,0A1D" || !proto.Equal(restored.Snapshot(), store.Snapshot()) {
		t.Fatalf("restored deny list %v", serials)
	}
	if rec, _ := restored.Node("n1"); rec.GetBinding().GetIdentity() != "spiffe://gin/agent/n1" {
		t.Fatalf("the node's binding did not survive the snapshot: %v", rec.GetBinding())
	}
	// The restored index covers the deny entries (the last entry was one).
	if restored.Index() != uint64(len(tests)) {
		t.Fatalf("restored index %d, want %d", restored.Index(), len(tests))
	}
}

// TestTLSTransportRefusesDeniedMaster: a master certificate of the cluster
// CA reaches Raft until its serial is denied through Raft itself; from the
// commit on, its open connection is closed and every new handshake is
// refused, while another master certificate still gets through.
func TestTLSTransportRefusesDeniedMaster(t *testing.T) {
	p := newRaftPKI(t)
	logs := &testkit.LogBuffer{}
	n, err := Open(Config{ID: "m1", Bind: "127.0.0.1:0", DataDir: t.TempDir(), Bootstrap: true, Fast: true,
		TLS: p.source(t, pki.Identity{Role: pki.RoleMaster, Name: "m1"}), Logger: slog.New(slog.NewTextHandler(logs, nil))}, state.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	transport := func(src *pki.Source) *hraft.NetworkTransport {
		layer, err := newTLSLayer("127.0.0.1:0", nil, src, nil, quiet)
		if err != nil {
			t.Fatal(err)
		}
		tr := hraft.NewNetworkTransport(layer, 1, 2*time.Second, io.Discard)
		t.Cleanup(func() { _ = tr.Close() })
		return tr
	}
	// vote sends a stale vote request: answered (not granted) when the
	// certificate gets through.
	vote := func(tr *hraft.NetworkTransport, id string) error {
		req := &hraft.RequestVoteRequest{RPCHeader: hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(tr.LocalAddr())}}
		var resp hraft.RequestVoteResponse
		return tr.RequestVote("m1", hraft.ServerAddress(n.Addr()), req, &resp)
	}
	m2src := p.source(t, pki.Identity{Role: pki.RoleMaster, Name: "m2"})
	m2 := transport(m2src)
	m3 := transport(p.source(t, pki.Identity{Role: pki.RoleMaster, Name: "m3"}))
	// Members (non-voters, so the quorum stays m1's alone): Raft answers
	// only the servers of its configuration (rpcguard.go).
	for _, tr := range []struct {
		id string
		t  *hraft.NetworkTransport
	}{{"m2", m2}, {"m3", m3}} {
		if err := n.raft.AddNonvoter(hraft.ServerID(tr.id), tr.t.LocalAddr(), 0, 10*time.Second).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := vote(m2, "m2"); err != nil {
		t.Fatalf("m2 before the deny: %v", err)
	}
	if _, err := n.Apply(ctx, deny(m2src.Serial())); err != nil {
		t.Fatal(err)
	}
	// The pooled connection m2 holds is closed when the entry commits:
	// from then on every request fails.
	testkit.WaitFor(t, 10*time.Second, "m2's open connection closed after the deny", func() bool { return vote(m2, "m2") != nil })
	if err := vote(m2, "m2"); err == nil {
		t.Fatal("m2 reached Raft again after its certificate was denied")
	}
	// A fresh connection with the denied certificate fails in the
	// handshake, and m1 says why.
	if err := vote(transport(m2src), "m2"); err == nil {
		t.Fatal("a new connection with the denied certificate reached Raft")
	}
	want := "certificate serial " + m2src.Serial() + " (spiffe://gin/master/m2) is denied"
	testkit.WaitFor(t, 10*time.Second, "m1 logs the refused handshake", func() bool { return strings.Contains(logs.String(), want) }, logs.String)
	// Another master certificate of the CA is not affected.
	if err := vote(m3, "m3"); err != nil {
		t.Fatalf("m3 after m2 was denied: %v", err)
	}
}
