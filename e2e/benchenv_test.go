//go:build linux

package e2e

import (
	"os"
	"strconv"
	"syscall"
	"testing"
)

// benchEnv reads an integer knob of a benchmark from the environment, def
// when unset; a value outside lo..hi fails the benchmark.
func benchEnv(b testing.TB, name string, def, lo, hi int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		b.Fatalf("%s=%q: want %d..%d", name, v, lo, hi)
	}
	return n
}

// raiseFileLimit raises this process's soft open-file limit to the hard one
// (the processes it starts inherit it) and fails when even the hard limit is
// below need; what says who needs them and which knob lowers the need.
func raiseFileLimit(b *testing.B, need uint64, what string) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	if lim.Max < need {
		b.Fatalf("open-file hard limit %d is below the %d that %s: raise ulimit -Hn", lim.Max, need, what)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			b.Fatal(err)
		}
	}
}
