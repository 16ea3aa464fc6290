package main

import (
	"math"
	"strconv"

	"github.com/gin-topology/gin/internal/master"
)

// The flag values that bind a gin-master flag to its master.Config field
// where the flag's unit or zero differs from the field's: they translate
// and store, and master.Config.Validate stays the one place of ranges.
// Each parses as pflag's own value of its Type does, so a malformed value
// is refused with pflag's message (exit 64).

// handshakeQueueValue is --handshake-queue: the flag's 0 (none waits) is
// the Config's NoHandshakeQueue, since a zero Config field is the default
// queue.
type handshakeQueueValue struct{ p *int }

func (v handshakeQueueValue) String() string {
	if v.p == nil || *v.p == master.NoHandshakeQueue {
		return "0"
	}
	return strconv.Itoa(*v.p)
}

func (v handshakeQueueValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return err
	}
	if n == 0 {
		n = master.NoHandshakeQueue
	}
	*v.p = int(n)
	return nil
}

func (handshakeQueueValue) Type() string { return "int" }

// mibValue is a size given in MiB and stored in bytes
// (--data-dir-min-free-mib); a size past uint64's bytes is stored as the
// largest, which Validate refuses as out of range.
type mibValue struct{ p *uint64 }

func (v mibValue) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatUint(*v.p>>20, 10)
}

func (v mibValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return err
	}
	*v.p = math.MaxUint64
	if n <= math.MaxUint64>>20 {
		*v.p = n << 20
	}
	return nil
}

func (mibValue) Type() string { return "uint64" }

// uint32Value is a uint flag stored in a uint32 field
// (--max-streams-per-conn); a value past uint32 is stored as the largest,
// which Validate refuses as out of range.
type uint32Value struct{ p *uint32 }

func (v uint32Value) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatUint(uint64(*v.p), 10)
}

func (v uint32Value) Set(s string) error {
	n, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return err
	}
	*v.p = uint32(min(n, math.MaxUint32))
	return nil
}

func (uint32Value) Type() string { return "uint" }
