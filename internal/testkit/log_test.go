package testkit

import (
	"strings"
	"sync"
	"testing"
)

func TestBufferConcurrentWritesAndReads(t *testing.T) {
	var b LogBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("x\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "x\n"); n != 800 {
		t.Fatalf("%d writes seen, want 800", n)
	}
}
