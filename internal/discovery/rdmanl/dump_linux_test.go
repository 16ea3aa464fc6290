//go:build linux

package rdmanl

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestDumpQPsReturns runs the real netlink dump. On a machine without RDMA
// (this one) it must return ErrNoRDMA or nothing, quickly; where there are
// devices, its messages must parse.
func TestDumpQPsReturns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	msgs, err := DumpQPs(ctx)
	if d := time.Since(start); d > 6*time.Second {
		t.Fatalf("DumpQPs took %v", d)
	}
	switch {
	case errors.Is(err, ErrNoRDMA):
		t.Logf("no RDMA here: %v", err)
		return
	case err != nil:
		t.Fatalf("DumpQPs: %v", err)
	}
	qs, err := ParseQPDump(msgs)
	if err != nil {
		t.Fatalf("ParseQPDump of a live dump: %v", err)
	}
	for _, q := range qs {
		t.Logf("%s/%d %s %s %d", q.Device, q.Port, q.Type, q.State, q.Count)
	}
}

func TestDumpQPsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := DumpQPs(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
