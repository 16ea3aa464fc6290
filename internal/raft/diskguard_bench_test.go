package raft

import (
	"context"
	"fmt"
	"testing"

	"github.com/gin-topology/gin/internal/state"
)

// BenchmarkApplyDiskGuard: what the free-space check (one statfs(2) per
// proposal on the leader) adds to a commit, against the same node with the
// check answered from memory, in the same run.
//
//	go test -run '^$' -bench BenchmarkApplyDiskGuard -benchtime=2000x ./internal/raft
func BenchmarkApplyDiskGuard(b *testing.B) {
	for _, bc := range []struct {
		name   string
		statfs func(string) (uint64, error)
	}{
		{"statfs", nil},
		{"no-syscall", func(string) (uint64, error) { return 1 << 40, nil }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			n, err := Open(Config{ID: "m1", Bind: "127.0.0.1:0", DataDir: b.TempDir(), Bootstrap: true, Fast: true, statfs: bc.statfs}, state.New(nil))
			if err != nil {
				b.Fatal(err)
			}
			defer n.Shutdown()
			ctx := context.Background()
			if err := n.WaitLeader(ctx); err != nil {
				b.Fatal(err)
			}
			for !n.IsLeader() {
				if err := n.Barrier(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				if _, err := n.Apply(ctx, put(fmt.Sprintf("n%d", i), 1, "h")); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFreeBytes is the statfs(2) of the data dir alone.
func BenchmarkFreeBytes(b *testing.B) {
	dir := b.TempDir()
	for range b.N {
		if _, err := freeBytes(dir); err != nil {
			b.Fatal(err)
		}
	}
}
