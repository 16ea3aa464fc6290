package raft

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gin-topology/gin/internal/state"
)

func TestParseRecoverPeers(t *testing.T) {
	tests := []struct {
		in      string
		want    []Member
		wantErr string
	}{
		{"", nil, ""},
		{"m2=10.0.0.2:5001", []Member{{ID: "m2", Address: "10.0.0.2:5001", Voter: true}}, ""},
		{"m2=10.0.0.2:5001, m3=[::1]:5001", []Member{{ID: "m2", Address: "10.0.0.2:5001", Voter: true}, {ID: "m3", Address: "[::1]:5001", Voter: true}}, ""},
		{"m2", nil, "want id=host:port"},
		{"m2=", nil, "want id=host:port"},
		{"=10.0.0.2:5001", nil, "server id is empty"},
		{"m2=10.0.0.2", nil, "missing port"},
		{"m2=:5001", nil, "host is empty"},
		{"m2=h:0", nil, "want 1..65535"},
		{"m2=h:x", nil, "want 1..65535"},
		{strings.Repeat("m=h:1,", MaxRecoverPeers) + "m=h:1", nil, "want at most"},
		{strings.Repeat("x", MaxServerIDLen+1) + "=h:1", nil, "more than"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseRecoverPeers(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseRecoverPeers(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("ParseRecoverPeers(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

func FuzzParseRecoverPeers(f *testing.F) {
	for _, s := range []string{"", "m2=10.0.0.2:5001", "a=b:1,c=d:2", "m2", "=:", "x=[::1]:65535"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		peers, err := ParseRecoverPeers(s)
		if err != nil {
			return
		}
		if len(peers) > MaxRecoverPeers {
			t.Fatalf("%d peers accepted", len(peers))
		}
		for _, p := range peers {
			if ValidateServerID(p.ID) != nil || validHostPort(p.Address) != nil || !p.Voter {
				t.Fatalf("accepted an invalid peer %+v from %q", p, s)
			}
		}
	})
}

// TestOpenRecover: a data dir written by a single master is recovered into
// a two-voter configuration (no quorum: the peer is not there), then back
// to this master alone, which leads and still holds every committed write.
func TestOpenRecover(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	n, err := Open(Config{ID: "m1", Bind: "127.0.0.1:0", DataDir: dir, Bootstrap: true, Fast: true}, state.New(nil))
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, n)
	for _, name := range []string{"x1", "x2", "x3"} {
		if _, err := n.Apply(ctx, put(name, 1, "h")); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}

	st := state.New(nil)
	peers := []Member{{ID: "m2", Address: "127.0.0.1:1", Voter: true}}
	n, err = Open(Config{ID: "m1", Bind: "127.0.0.1:0", DataDir: dir, Fast: true, Recover: true, RecoverPeers: peers}, st)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(ms []Member) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.ID)
		}
		slices.Sort(out)
		return out
	}
	if got := ids(n.Stats().Members); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Fatalf("recovered configuration = %v, want m1 m2", got)
	}
	if got := st.View().NodeNames(); len(got) != 3 {
		t.Fatalf("recovered state nodes = %v, want x1 x2 x3", got)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}

	st = state.New(nil)
	n, err = Open(Config{ID: "m1", Bind: "127.0.0.1:0", DataDir: dir, Fast: true, Recover: true}, st)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	waitLeader(t, n)
	if got := ids(n.Stats().Members); !slices.Equal(got, []string{"m1"}) {
		t.Fatalf("recovered configuration = %v, want m1 alone", got)
	}
	if _, err := n.Apply(ctx, put("x4", 1, "h")); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}
	if got := st.View().NodeNames(); len(got) != 4 {
		t.Fatalf("nodes after recovery and a write = %v, want x1..x4", got)
	}
}

func TestOpenRecoverRefusesNoState(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(root string) string
	}{
		{"missing", func(root string) string { return filepath.Join(root, "absent") }},
		{"empty", func(root string) string { return root }},
		{"empty wal", func(root string) string { _ = os.Mkdir(filepath.Join(root, "wal"), 0o750); return root }},
		{"file", func(root string) string {
			p := filepath.Join(root, "f")
			_ = os.WriteFile(p, nil, 0o600)
			return p
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := tc.setup(root)
			before, _ := os.ReadDir(root)
			_, err := Open(Config{ID: "m1", Bind: "127.0.0.1:0", DataDir: dir, Fast: true, Recover: true}, state.New(nil))
			if !errors.Is(err, ErrNoState) {
				t.Fatalf("Open(Recover) on %s = %v, want ErrNoState", tc.name, err)
			}
			after, _ := os.ReadDir(root)
			if len(after) != len(before) {
				t.Fatalf("refused recovery changed %s: %v → %v", root, before, after)
			}
			if _, err := os.Stat(filepath.Join(root, "wal", "wal-meta.db")); err == nil {
				t.Fatal("refused recovery created a log store")
			}
		})
	}
}

func TestRecoverConfigurationRefusesDuplicates(t *testing.T) {
	self := Member{ID: "m1", Address: "10.0.0.1:5001", Voter: true}
	for _, peers := range [][]Member{
		{{ID: "m1", Address: "10.0.0.9:5001"}},
		{{ID: "m2", Address: "10.0.0.1:5001"}},
		{{ID: "m2", Address: "10.0.0.2:5001"}, {ID: "m2", Address: "10.0.0.3:5001"}},
	} {
		if _, err := recoverConfiguration(serverOf(self), peers); err == nil {
			t.Errorf("recoverConfiguration(%v) accepted a duplicate", peers)
		}
	}
}

func waitLeader(t *testing.T, n *Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
}
